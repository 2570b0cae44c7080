"""Generalized EM for PTM (2014 sec. 6): the state, E- and M-steps, word- and topic-switch
trial flips, one :func:`gem_step`, the initialisation of sec. 6.3, inference for new
documents and the fit as an algorithm for the drivers.  See :mod:`topicjax.ptm` for the model.

The family's algorithm module, in the shape every family's has: :data:`State`
(:class:`PTMState`), :func:`init` (:func:`init_state`), :func:`step` (:func:`gem_step`) and
:data:`ALGORITHM`, the :class:`~topicjax.core.driver.Algorithm` that :func:`topicjax.core.driver.run`
runs with static ``(GEMConfig, n_words)`` and args ``(PTMData,)``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from topicjax.core import driver, numerics
from topicjax.ptm import bic as pb
from topicjax.ptm import kernels as ptm_kernels
from topicjax.ptm.layout import PTMData, doc_mask, real_docs, real_words, row_sums, word_mask, word_sums
from topicjax.core.compiled import jit

__all__ = ["PTMState", "GEMConfig", "effective_topics", "e_step", "estep_sums_xla", "trial_deltas_xla", "m_step_beta", "m_step_alpha_beta", "doc_mass", "gem_step",
           "gem_step_impl", "v_flip_scores", "state_bic", "ml_scores", "init_state", "padded_topics", "infer_alpha",
           "loglik_docs", "TINY", "RATIO_CAP", "bic_pieces", "algorithm", "State", "init", "step", "ALGORITHM"]

TINY = pb.TINY
#: cap on n / p^2 in the ranking statistic s2 (only ranks trial flips; keeps inf * 0 out)
RATIO_CAP = 1e30


class PTMState(NamedTuple):
    """Parameters, switches and the E-step statistics at those parameters (all pure arrays).

    ``beta`` ``(P, N)`` topic-specific probabilities (0 where ``u`` is off), ``u`` ``(P, N)``,
    ``alpha`` / ``v`` ``(D, P)`` (documents in rows), ``topic_mask`` ``(P,)`` marks the real
    topics; ``x`` ``(P, N)`` expected counts (9) for every word and topic, ``loglik_doc`` ``(D,)``
    the log-likelihood of each document at the current parameters, ``s1`` / ``s2`` the derivatives
    that rank trial flips (:func:`e_step`); ``n_u_flips`` / ``n_v_flips`` count the switches
    changed by the last step.  The numerators of (8) are ``alpha * s1`` on the active topics (not
    stored: a ``(D, P)`` table less in every copy of the state, 120 MB at NYTimes size).
    """

    beta: jax.Array
    u: jax.Array
    alpha: jax.Array
    v: jax.Array
    topic_mask: jax.Array
    x: jax.Array
    loglik_doc: jax.Array
    s1: jax.Array
    s2: jax.Array
    iteration: jax.Array
    n_u_flips: jax.Array
    n_v_flips: jax.Array


def effective_topics(u, beta, beta0, topic_mask):
    return pb.effective_beta(u & topic_mask[:, None], beta, beta0)


def estep_sums_xla(data: PTMData, B, a):
    """The sums of the E-step in pure JAX, by document rows and word rows: ``(g (N, P), ll (D,),
    s1 (D, P), s2 (D, P))`` with ``g_wj = sum_d (n_dw / p_dw) a_dj`` (see :func:`e_step`; the C++
    kernel :func:`topicjax.ptm.kernels.estep_sums` computes the same)."""
    N = data.beta0.shape[0]
    D = data.doc_length.shape[0]

    def fn(w, n, pos, ad):
        bw = B[w]
        real = n > 0
        p = jnp.where(real, jnp.maximum(jnp.einsum("rwp,rp->rw", bw, ad), TINY), 1.0)
        r = jnp.where(real, n / p, 0.0)
        ll = jnp.sum(jnp.where(real, n * jnp.log(p), 0.0), axis=1)
        # r / p is capped: a token whose probability is clamped (p = TINY) would give inf * 0
        return ll, jnp.einsum("rwp,rw->rp", bw, r), jnp.einsum("rwp,rw->rp", bw * bw, jnp.minimum(r / p, RATIO_CAP)), r

    ll, s1, s2, r = row_sums(data.docs, fn, a, D, keep=(3,))
    g = word_sums(data, r.reshape(-1), a, N)  # r by document slot is r in flat order
    return g, ll, s1, s2


def e_step(data: PTMData, u, beta, alpha, v, topic_mask, *, masked: bool = False):
    """E-step (6): returns ``x (P, N)`` (9), the per-document log-likelihood ``(D,)`` of (5), and ``s1 = sum_w n_dw b_jw / p_dw``, ``s2 = sum_w
    n_dw (b_jw / p_dw)^2`` ``(D, P)`` for every topic (the derivatives used to rank trial flips).
    On CPU the sums run in the C++ kernel of :mod:`topicjax.ptm.kernels`, else in
    :func:`estep_sums_xla`.  ``masked=True``: ``alpha`` is already 0 outside ``v & topic_mask``
    (then it is passed on as it is, not as a masked copy: a ``(D, P)`` buffer less at the peak)."""
    B = effective_topics(u, beta, data.beta0, topic_mask)
    a = alpha if masked else jnp.where(v & topic_mask[None, :], alpha, 0.0)
    g, ll, s1, s2 = ptm_kernels.estep_sums(data, B, a, tiny=TINY, cap=RATIO_CAP, xla=estep_sums_xla)
    return B.T * g.T, ll, s1, s2


def m_step_beta(x, u, beta_old, beta0, topic_mask):
    """(9)-(10): ``beta_jn = x_jn u_jn / mu_j``, ``mu_j = xbar_j / sum_n u_jn beta0_n``.  A topic
    with no expected count on its specific words keeps its old ``beta`` (every value is then an
    M-step maximiser)."""
    uu = u & topic_mask[:, None]
    uf = uu.astype(x.dtype)
    xbar = jnp.sum(uf * x, axis=1, keepdims=True)
    S = jnp.sum(uf * beta0[None, :], axis=1, keepdims=True)
    new = uf * x * (S / jnp.where(xbar > 0, xbar, 1.0))
    return jnp.where(xbar > 0, new, jnp.where(uu, beta_old, 0.0))


def m_step_alpha_beta(state: PTMState, beta0):
    """M-step (8)-(10) of PTM's α and β from the statistics stored in ``state``: ``(alpha, beta)``."""
    tm = state.topic_mask
    vv = state.v & tm[None, :]
    num = jnp.where(vv, state.alpha * state.s1, 0.0)  # the E-step's n_dj = a_dj s1_dj
    tot = jnp.sum(num, axis=1, keepdims=True)
    alpha = jnp.where(tot > 0, num / jnp.where(tot > 0, tot, 1.0), state.alpha)
    beta = m_step_beta(state.x, state.u, state.beta, beta0, tm)
    return alpha, beta


#: documents per step of :func:`switch_counts` and :func:`by_row_blocks`
COUNT_ROWS = 8192


def switch_counts(vv, doc_length):
    """``(lbar (P,), n_docs (P,), n_active (D,))`` of the switches ``vv`` ``(D, P)`` (bool, already
    masked to the real topics): each topic's document mass ``sum_d L_d vv_dj``, its number of
    documents, and each document's number of topics, in int32 (the default int64 under
    JAX_ENABLE_X64 would convert the tables).  Summed over blocks of :data:`COUNT_ROWS` documents:
    XLA on CPU writes the whole operand of a long reduction out before it reduces it, a ``(D, P)``
    int32 table (120 MB at NYTimes size) per sum."""
    D, P = vv.shape
    c = max(1, min(COUNT_ROWS, D))
    i32 = jnp.int32

    def body(i, carry):
        lbar, n_docs, n_active = carry
        start = jnp.minimum(i * c, D - c)  # the last block may overlap the one before it ...
        blk = lax.dynamic_slice_in_dim(vv, start, c, 0)
        length = lax.dynamic_slice_in_dim(doc_length, start, c, 0).astype(i32)
        use = blk & ((start + jnp.arange(c)) >= i * c)[:, None]  # ... whose rows count once
        lbar = lbar + jnp.sum(jnp.where(use, length[:, None], 0), axis=0, dtype=i32)
        n_docs = n_docs + jnp.sum(use, axis=0, dtype=i32)
        n_active = lax.dynamic_update_slice_in_dim(n_active, jnp.sum(blk, axis=1, dtype=i32), start, 0)
        return lbar, n_docs, n_active

    zero = jnp.zeros((P,), i32)
    return lax.fori_loop(0, -(-D // c), body, (zero, zero, jnp.zeros((D,), i32)))


def by_row_blocks(fn, n_rows: int):
    """``fn(rows)`` for blocks of :data:`COUNT_ROWS` rows, concatenated: ``rows(x)`` is the block's
    rows of an ``(n_rows, ...)`` array, and ``fn`` returns a tuple of ``(block, ...)`` arrays
    computed from each row alone (the last block may overlap the one before it and recompute
    some rows, to the same values).  For row-wise work whose temporaries are ``(n_rows, P)``
    tables (the candidates of the topic-switch trials: a cost, two masks and two operands of
    ``top_k``, 120 MB each at NYTimes size): they then exist for one block at a time."""
    c = max(1, min(COUNT_ROWS, n_rows))

    def block(start):
        return fn(lambda x: lax.dynamic_slice_in_dim(x, start, c, 0))

    shapes = jax.eval_shape(block, 0)

    def body(i, out):
        start = jnp.minimum(i * c, n_rows - c)
        return tuple(lax.dynamic_update_slice_in_dim(o, r, start, 0) for o, r in zip(out, block(start)))

    init = tuple(jnp.zeros((n_rows,) + x.shape[1:], x.dtype) for x in shapes)
    return lax.fori_loop(0, -(-n_rows // c), body, init)


def doc_mass(v, doc_length, topic_mask):
    """``sum_d L_d`` over the documents of every topic, ``(P,)`` int32 (:func:`switch_counts`)."""
    return switch_counts(v & topic_mask[None, :], doc_length)[0]


def _u_round(kind, n_candidates, x, u, beta0, lbar, tm, n_words=None):
    # words after n_words (a bucket's padding) have beta0 = 0: never a candidate, cost 0
    if pb.is_2020(kind):
        return pb.select_u_flips_2020(x, u, beta0, lbar, tm, n_candidates=min(n_candidates, u.shape[1]), kind=kind)
    return pb.select_u_flips_2014(x, u, beta0, lbar, tm, kind=kind, n_candidates=n_candidates, n_words=n_words)


def trial_deltas_xla(data: PTMData, B, a, vv, cand, t_start, *, n_on: int, newton_iters: int):
    """The trial flips of :func:`topicjax.ptm.kernels.trial_deltas` in pure JAX: one pass over the
    document rows for the candidates' ratios ``b_c / p``, the sum over the active topics and the
    ranking derivatives, then :func:`topicjax.ptm.bic.v_trial_deltas`.  Returns ``(dl, t,
    variant, s1, s2)``."""
    D, K = cand.shape

    def fn(w, n, pos, inp):
        ad, cd, vd = inp
        bw = B[w]
        p = jnp.where(n > 0, jnp.maximum(jnp.einsum("rwp,rp->rw", bw, ad), TINY), 1.0)
        r = n / p
        return (jnp.take_along_axis(bw, cd[:, None, :], axis=2) / p[..., None],
                jnp.einsum("rwp,rp->rw", bw, vd.astype(bw.dtype)) / p,
                jnp.einsum("rwp,rw->rp", bw, r), jnp.einsum("rwp,rw->rp", bw * bw, jnp.minimum(r / p, RATIO_CAP)))

    rho_c, rsum, s1, s2 = row_sums(data.docs, fn, (a, cand, vv), D, keep=(0, 1))
    n_rows = data.docs.count.reshape(-1, data.docs.count.shape[-1])
    sign = jnp.where(jnp.arange(K)[None, :] < n_on, 1, -1) * jnp.ones((D, 1), jnp.int32)
    dl, t, variant = pb.v_trial_deltas(rho_c, rsum, n_rows, data.docs.item.reshape(-1), a, vv > 0, cand, sign,
                                       t_start, n_on=n_on, newton_iters=newton_iters, t_max=ptm_kernels.T_MAX)
    return dl, t, variant, s1, s2


def _v_trials(data: PTMData, kind, n_on, n_off, newton_iters, u, beta, alpha, v, tm, S1, S2, *, masked=False):
    """Candidate topic-switch flips of every document with their exact BIC changes.

    ``S1``, ``S2`` (``(D, P)``, from the E-step or the previous round, possibly stale) only rank
    the candidates; the trial changes are exact at the current parameters.  ``masked=True``:
    ``alpha`` is already 0 outside ``v & tm`` (used as it is: a ``(D, P)`` table less).
    """
    P = v.shape[1]
    B = effective_topics(u, beta, data.beta0, tm)
    vv = v & tm[None, :]
    lbar, ndocs_topic, n_active = switch_counts(vv, data.doc_length)
    a = alpha if masked else jnp.where(vv, alpha, 0.0)
    is_doc = doc_mask(data)
    uu = u & tm[:, None]
    Nj = jnp.sum(uu, axis=1, dtype=jnp.int32)
    pays_c0 = jnp.sum(uu, axis=0, dtype=jnp.int32) < jnp.sum(tm)  # words with a shared parameter (2020)
    if word_mask(data) is not None:  # not a bucket's padding words
        pays_c0 = pays_c0 & word_mask(data)
    n_c0 = jnp.sum(pays_c0).astype(jnp.float32)
    kon, koff = min(n_on, P), min(n_off, P)

    def candidates(rows):  # every document's candidates depend on its own rows only
        vb, L, md = rows(vv), rows(data.doc_length), rows(n_active)
        cost, allow_on, allow_off = pb.v_flip_costs(vb, L, lbar, ndocs_topic, Nj, tm, n_c0, kind, n_active=md)
        if is_doc is not None:  # a padding row (no document, L = 0: a cost of -inf) never turns a topic on
            allow_on = allow_on & rows(is_doc)[:, None]
        return pb.v_candidates(rows(S1), rows(S2), L, cost, allow_on, allow_off, rows(a), n_on=kon, n_off=koff)

    cand, sign, ok, t_start = by_row_blocks(candidates, vv.shape[0])

    xla = partial(trial_deltas_xla, n_on=kon, newton_iters=newton_iters)
    dl, t, variant, s1, s2 = ptm_kernels.trial_deltas(data, B, a, vv, cand, t_start, n_on=kon,
                                                      newton_iters=newton_iters, tiny=TINY, cap=RATIO_CAP, xla=xla)
    # the costs again at the candidates only: the (D, P) table is not kept through the trials
    cost_c = pb.v_flip_costs(vv, data.doc_length, lbar, ndocs_topic, Nj, tm, n_c0, kind, n_active=n_active,
                             topics=cand)[0]
    dbic, best_dbic, best_topic, best_sign, best_alpha = pb.v_best(cand, sign, ok, dl, t, variant, cost_c, a, vv,
                                                                  n_active=n_active, cost_at_cand=True)
    return dict(cand=cand, sign=sign, dbic=dbic, t=t, variant=variant, best_dbic=best_dbic, best_topic=best_topic,
                best_sign=best_sign, best_alpha=best_alpha, lbar=lbar, ndocs_topic=ndocs_topic, Nj=Nj, n_c0=n_c0,
                vv=vv, a=a, S1=s1, S2=s2)


def _v_round(data: PTMData, kind, n_on, n_off, newton_iters, doc_candidates, u, beta, alpha, v, tm, S1, S2):
    """One round of topic-switch updates: every document's best trial flip, then an exact batch
    (:func:`topicjax.ptm.bic.select_v_flips`).  Returns the new switches and proportions, the
    number of flips, their combined BIC change, and fresh ranking derivatives ``S1``, ``S2``."""
    P = v.shape[1]
    r = _v_trials(data, kind, n_on, n_off, newton_iters, u, beta, alpha, v, tm, S1, S2, masked=True)
    accept, k, change = pb.select_v_flips(r["best_dbic"], r["best_topic"], r["best_sign"], data.doc_length, r["lbar"],
                                          r["ndocs_topic"], r["Nj"], tm, r["n_c0"], kind, doc_candidates)
    flip = accept[:, None] & (jnp.arange(P)[None, :] == r["best_topic"][:, None])
    v_new = jnp.where(flip, ~r["vv"], r["vv"])
    alpha_new = jnp.where(accept[:, None], r["best_alpha"], r["a"])
    return v_new, alpha_new, k, change, r["S1"], r["S2"]


@partial(jit, static_argnames=("kind", "newton_iters"))
def v_flip_scores(state: PTMState, data: PTMData, kind: str = "2014", newton_iters: int = 6):
    """BIC change of flipping each topic switch ``v_jd`` alone, ``(D, P)`` (``+inf`` where not
    allowed), every switch of every document evaluated at once by the same masked computation
    as the GEM step (all ``P`` topics as candidates); also returns the trial ``t`` of turning
    each topic on and the variant (0 renormalise, 1 uniform) of turning it off."""
    D, P = state.v.shape
    r = _v_trials(data, kind, P, P, newton_iters, state.u, state.beta, state.alpha, state.v, state.topic_mask,
                  state.s1, state.s2)
    rows = jnp.arange(D)[:, None]
    out = jnp.full((D, P), jnp.inf, r["dbic"].dtype).at[rows, r["cand"]].min(r["dbic"])
    real = jnp.isfinite(r["dbic"])
    t = jnp.zeros((D, P), r["t"].dtype).at[rows, r["cand"]].max(jnp.where(real & (r["sign"] > 0), r["t"], 0.0))
    var = jnp.zeros((D, P), jnp.int32).at[rows, r["cand"]].max(jnp.where(real & (r["sign"] < 0), r["variant"], 0))
    return out, t, var


@dataclass(frozen=True)
class GEMConfig:
    """Static settings of a GEM step (changing them recompiles)."""

    kind: str = "2014"
    u_candidates: int = 65536
    max_u_cycles: int = 5
    max_v_rounds: int = 3
    v_on: int = 6
    v_off: int = 3
    newton_iters: int = 6
    doc_candidates: int = 65536


def gem_step_impl(state: PTMState, data: PTMData, cfg: GEMConfig) -> PTMState:
    tm = state.topic_mask
    beta0 = data.beta0
    alpha, beta = m_step_alpha_beta(state, beta0)
    lbar = doc_mass(state.v, data.doc_length, tm)

    # -- word switches (x fixed: expected complete-data BIC), then beta for the new switches
    def u_cond(c):
        return (c[1] < cfg.max_u_cycles) & ((c[1] == 0) | (c[2] > 0))

    def u_body(c):
        u, i, _, tot = c
        u, k, _ = _u_round(cfg.kind, cfg.u_candidates, state.x, u, beta0, lbar, tm, data.n_words)
        return u, i + 1, k, tot + k

    z = jnp.zeros((), jnp.int32)
    u, _, _, n_u = lax.while_loop(u_cond, u_body, (state.u, z, z, z))
    beta = m_step_beta(state.x, u, beta, beta0, tm)

    # -- topic switches (exact incomplete-data likelihood)
    def v_cond(c):
        return (c[2] < cfg.max_v_rounds) & ((c[2] == 0) | (c[3] > 0))

    def v_body(c):
        v, a, i, _, tot, S1, S2 = c
        v, a, k, _, S1, S2 = _v_round(data, cfg.kind, cfg.v_on, cfg.v_off, cfg.newton_iters, cfg.doc_candidates,
                                      u, beta, a, v, tm, S1, S2)
        return v, a, i + 1, k, tot + k, S1, S2

    vv = state.v & tm[None, :]
    # the rounds take the proportions as 0 outside the active switches (_v_trials(masked=True))
    init = (vv, jnp.where(vv, alpha, 0.0), z, z, z, state.s1, state.s2)
    v, alpha, _, _, n_v, _, _ = lax.while_loop(v_cond, v_body, init)
    alpha = jnp.where(v & tm[None, :], alpha, 0.0)
    x, ll, s1, s2 = e_step(data, u, beta, alpha, v, tm, masked=True)
    return PTMState(beta, u, alpha, v, tm, x, ll, s1, s2, state.iteration + 1, n_u, n_v)


_gem_step_jit = jit(gem_step_impl, static_argnames=("cfg",))


@numerics.full_precision
def gem_step(state: PTMState, data: PTMData, cfg: GEMConfig = GEMConfig()) -> PTMState:
    """One GEM iteration (M-step, word switches, topic switches, E-step); pure and jit-compiled,
    so it can be ``jax.vmap``-ped over a batch of states (restarts) sharing ``data``."""
    return _gem_step_jit(state, data, cfg)


def state_bic(state: PTMState, data: PTMData, kind: str) -> float:
    """BIC of a state in float64 (its log-likelihood comes from the state's last E-step)."""
    doc_cost, topic_cost, word_cost, n0, m = _structure_jit(state.u, state.v, state.topic_mask, data, kind)
    terms = pb.BICTerms(state.loglik_doc, doc_cost, topic_cost, word_cost, n0, m, real_words(data))
    return pb.bic_total(terms, kind)


def _structure_impl(u, v, topic_mask, data: PTMData, kind: str):
    # the masks of a bucket's padding inside the program (eagerly, each mask compiled an iota)
    return pb.structure_costs(u, v, data.doc_length, topic_mask, kind, doc_mask=doc_mask(data),
                              word_mask=word_mask(data))


_structure_jit = jit(_structure_impl, static_argnames=("kind",))


# =============================================================================== initialisation
def ml_scores(data: PTMData, B, D: int):
    """``sum_w n_dw log b_jw`` for every document and topic (the hard-assignment rule of 6.3)."""
    logB = jnp.log(jnp.maximum(B, TINY))

    def fn(w, n, pos, _):
        return (jnp.einsum("rw,rwp->rp", n, logB[w]),)

    return row_sums(data.docs, fn, jnp.zeros((D, 0), logB.dtype), D)[0]


def _beta_from_counts(c, u, beta0, tm):
    return m_step_beta(c, u, jnp.zeros_like(c), beta0, tm)


def _shuffle_rounds(n: int) -> int:
    """``jax.random.permutation``'s number of sorting rounds for ``n`` items (its shuffle's static rule)."""
    return int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))


#: the smallest numbers of items that take 1, 2, 3 rounds of :func:`_shuffle_rounds` (``n`` < 2**31: at most 3)
_ROUND_STARTS = (2, 1626, 2642246)


def doc_permutation(key, n_slots: int, n_docs=None):
    """``jax.random.permutation(key, n_docs)`` followed by ``n_slots - n_docs`` padding rows
    (their own indices, in order), for a traced ``n_docs <= n_slots`` (default ``n_slots``).

    JAX shuffles by sorting the items by random 32-bit keys in ``_shuffle_rounds(n)`` rounds,
    each with a fresh subkey, stably; with a counter-based generator (``jax_threefry_partitionable``,
    JAX's default) the key of item ``i`` does not depend on the number of items.  Here the padding
    rows get the largest key, so that the stable sort leaves them after the documents in their
    order, and the rounds that ``n_docs`` documents would not take leave the order as it is: the
    documents come out in the order ``permutation(key, n_docs)`` gives them, for every
    ``n_slots`` (a document count rounded up to a bucket shares the program)."""
    x = jnp.arange(n_slots, dtype=jnp.int32)
    if n_docs is None:
        n_docs = n_slots
    n_docs = jnp.asarray(n_docs, jnp.int32)
    pad = jnp.arange(n_slots) >= n_docs
    n_rounds = sum((n_docs >= s).astype(jnp.int32) for s in _ROUND_STARTS)
    for r in range(_shuffle_rounds(n_slots)):
        key, sub = jax.random.split(key)
        bits = jnp.where(pad, jnp.uint32(np.iinfo(np.uint32).max), jax.random.bits(sub, (n_slots,), jnp.uint32))
        _, shuffled = lax.sort_key_val(bits, x, is_stable=True)
        x = jnp.where(r < n_rounds, shuffled, x)
    return x


def _init_impl(key, data: PTMData, n_topics: int, n_pad: int, n_init_docs: int) -> PTMState:
    D = data.doc_length.shape[0]
    N = data.beta0.shape[0]
    M, P = n_topics, n_pad
    tm = jnp.arange(P) < M
    valid_word = data.beta0 > 0
    counts = data.flat_counts()  # padding slots are 0
    is_doc = doc_mask(data)
    # 1) distinct random seed documents for every topic (never a padding row, which the
    #    permutation puts last); their words are topic-specific
    seeds = doc_permutation(key, D, data.n_docs)[: M * n_init_docs].reshape(M, n_init_docs)
    seed_topic = jnp.broadcast_to(jnp.arange(M, dtype=jnp.int32)[:, None], seeds.shape)  # int32 also under x64
    owner = jnp.full((D,), -1, jnp.int32).at[seeds].set(seed_topic)
    sv = (owner[:, None] == jnp.arange(P)[None, :]).astype(jnp.float32)
    c = word_sums(data, counts, sv, N).T
    u = (c > 0) & tm[:, None] & valid_word[None, :]
    beta = _beta_from_counts(c, u, data.beta0, tm)
    # 2) hard-assign every document to its maximum-likelihood topic (seeds to their own)
    scores = ml_scores(data, effective_topics(u, beta, data.beta0, tm), D)
    best = jnp.argmax(jnp.where(tm[None, :], scores, -jnp.inf), axis=1)
    best = jnp.where(owner >= 0, owner, best)
    v = best[:, None] == jnp.arange(P)[None, :]
    if is_doc is not None:  # padding rows have no topic
        v = v & is_doc[:, None]
    # 3) re-estimate the switches and probabilities from the assigned documents
    c = word_sums(data, counts, v.astype(jnp.float32), N).T
    u = (c > 0) & tm[:, None] & valid_word[None, :]
    beta = _beta_from_counts(c, u, data.beta0, tm)
    alpha = v.astype(jnp.float32)
    x, ll, s1, s2 = e_step(data, u, beta, alpha, v, tm)
    z = jnp.zeros((), jnp.int32)
    return PTMState(beta, u, alpha, v, tm, x, ll, s1, s2, z, z, z)


_init_jit = jit(_init_impl, static_argnames=("n_topics", "n_pad", "n_init_docs"))


def padded_topics(n_topics: int, multiple: int = 8) -> int:
    return int(-(-n_topics // multiple) * multiple)


def init_state(key, data: PTMData, n_topics: int, *, n_init_docs: int = 5, n_pad: int | None = None) -> PTMState:
    """Initial state of sec. 6.3 (see the module docstring).  ``n_init_docs`` is lowered to
    ``D // M`` when there are not enough documents for distinct seeds.  Pure and jit-compiled:
    ``jax.vmap(lambda k: init_state(k, data, M))`` gives a batch of restarts."""
    D = real_docs(data)
    if n_topics > D:
        raise ValueError(f"{n_topics} topics need at least {n_topics} documents (one seed each); the corpus has {D}")
    n_init = max(1, min(int(n_init_docs), D // n_topics))
    return _init_jit(key, data, int(n_topics), int(n_pad or padded_topics(n_topics)), n_init)


# =============================================================================== inference
def _infer_alpha_impl(data: PTMData, B, n_iter: int, topic_mask):
    D = data.doc_length.shape[0]
    P = B.shape[1]
    # in B's dtype: a count's reciprocal and jnp.ones would be float64 under JAX_ENABLE_X64
    a0 = jnp.where(topic_mask[None, :], 1.0 / jnp.sum(topic_mask).astype(B.dtype), 0.0) * jnp.ones((D, P), B.dtype)

    def fn(w, n, pos, ad):
        bw = B[w]
        real = n > 0
        p = jnp.where(real, jnp.maximum(jnp.einsum("rwp,rp->rw", bw, ad), TINY), 1.0)
        return (ad * jnp.einsum("rwp,rw->rp", bw, jnp.where(real, n / p, 0.0)),)

    def it(a, _):
        num = row_sums(data.docs, fn, a, D)[0]
        tot = jnp.sum(num, axis=1, keepdims=True)
        return jnp.where(tot > 0, num / jnp.where(tot > 0, tot, 1.0), a), None

    a, _ = lax.scan(it, a0, None, length=n_iter)
    return a


_infer_alpha_jit = numerics.full_precision(jit(_infer_alpha_impl, static_argnames=("n_iter",)))


def infer_alpha(data: PTMData, B, n_iter: int = 50, topic_mask=None):
    """Proportions of (new) documents with every topic allowed (2014 sec. 7): ``n_iter``
    iterations of (6) and (8) with ``v = 1``, from uniform proportions, ``B`` ``(N, P)`` fixed."""
    if topic_mask is None:
        topic_mask = jnp.ones((B.shape[1],), bool)
    return _infer_alpha_jit(data, jnp.asarray(B, jnp.float32), int(n_iter), topic_mask)


def _loglik_docs_impl(data: PTMData, B, alpha):
    D = data.doc_length.shape[0]

    def fn(w, n, pos, ad):
        real = n > 0
        p = jnp.where(real, jnp.maximum(jnp.einsum("rwp,rp->rw", B[w], ad), TINY), 1.0)
        return (jnp.sum(jnp.where(real, n * jnp.log(p), 0.0), axis=1),)

    return row_sums(data.docs, fn, alpha, D)[0]


loglik_docs = numerics.full_precision(jit(_loglik_docs_impl))


# =============================================================================== the fit as an algorithm
# One GEM fit is the algorithm below for :mod:`topicjax.core.driver` (:data:`ALGORITHM`, static
# ``(GEMConfig, n_words)``, args ``(PTMData,)``): ``run`` for :meth:`PTM.fit <topicjax.ptm.PTM.fit>`
# (in compiled blocks of iterations), ``run_many`` for the restarts of ``PTM.fit_many``.
#
# The stopping rule compares BIC values (relative decrease below ``tol``).  On the device
# (float32) the BIC and its change are kept as double-float numbers (hi + lo, about 48 bits): the
# per-document / per-topic / per-word pieces are added pairwise with error-free transformations,
# and the change between iterations is summed from the exact per-piece differences, so it keeps
# full relative accuracy although it is ~1e-4 of a BIC of ~1e6.  The history's BIC values are
# those double-floats in float64 (the last one recomputed in float64 by :func:`state_bic`).


def bic_pieces(state: PTMState, data: PTMData, kind: str):
    """The float32 pieces whose float64 sum plus the u prior is the BIC (as :func:`state_bic`):
    ``-loglik_doc``, ``doc_cost``, ``topic_cost``, ``word_cost`` concatenated, and ``N0``."""
    doc_cost, topic_cost, word_cost, n0, _ = pb.structure_costs(state.u, state.v, data.doc_length,
                                                                 state.topic_mask, kind, doc_mask=doc_mask(data),
                                                                 word_mask=word_mask(data))
    return jnp.concatenate([-state.loglik_doc, doc_cost, topic_cost, word_cost]), n0


def _u_prior_device(n0, n_topics, n_words: int, kind: str):
    """:func:`topicjax.ptm.bic.u_prior_2014` in float32 (only scales the tolerance threshold)."""
    T = n_topics.astype(jnp.float32) * n_words
    if kind == "2014-exact":
        return T * np.log(2.0)
    if kind != "2014":
        return jnp.zeros((), jnp.float32)
    p = n0.astype(jnp.float32) / T
    inside = (p > 0) & (p < 1)
    ps = jnp.where(inside, p, 0.5)
    h = jnp.where(inside, -ps * jnp.log(ps) - (1.0 - ps) * jnp.log1p(-ps), 0.0)
    return T * h - 0.5 * jnp.log(T)


def _prior_cells(n_topics, n_words: int, kind: str):
    """The cells ``M N`` of the switch matrix u whose entropy the 2014 prior counts, 0 for the
    other kinds (no N0-dependent prior): carried in the measure, so that the stopping rule needs
    neither the kind nor the vocabulary size (one :data:`ALGORITHM` for every PTM fit)."""
    if kind != "2014":
        return jnp.zeros((), jnp.float32)
    return n_topics.astype(jnp.float32) * n_words


def _u_prior_change(n0_old, n0_new, cells):
    """``u_prior(N0_old) - u_prior(N0_new)`` without cancellation (the order ``M`` is fixed;
    ``cells`` from :func:`_prior_cells`, 0: no such prior)."""
    a = n0_old.astype(jnp.float32)
    on = cells > 0
    change = -pb.entropy_delta(a, jnp.where(on, cells, 1.0), n0_new.astype(jnp.float32) - a)
    return jnp.where(on, change, jnp.zeros((), jnp.float32))


def _algo_step(state, args, static):
    return gem_step_impl(state, args[0], static[0])


def _algo_objective(state, args, static):
    cfg, n_words = static
    data = args[0]
    if data.n_words is not None:  # the vocabulary's size (traced: beta0 may be padded to a bucket)
        n_words = data.n_words
    pieces, n0 = bic_pieces(state, data, cfg.kind)
    hi, lo = numerics.df_total(pieces, jnp.zeros_like(pieces))
    n_topics = jnp.sum(state.topic_mask)
    return {"pieces": pieces, "n0": n0, "bic": (hi + lo) + _u_prior_device(n0, n_topics, n_words, cfg.kind),
            "hi": hi, "lo": lo, "n_topics": n_topics, "prior_cells": _prior_cells(n_topics, n_words, cfg.kind)}


def _algo_value(m):
    return m["bic"]


def _algo_converged(old, new, tol):
    # old - new of every piece exactly (TwoSum), then summed: the BIC decrease
    d_hi, d_lo = numerics.df_total(*numerics.two_sum(old["pieces"], -new["pieces"]))
    decrease = (d_hi + d_lo) + _u_prior_change(old["n0"], new["n0"], new["prior_cells"])
    return driver.relative_change_converged(decrease, new["bic"], tol)


def _algo_record(state, args, static):
    m = _algo_objective(state, args, static)
    return {"bic_hi": m["hi"], "bic_lo": m["lo"], "n0": m["n0"], "u_flips": state.n_u_flips,
            "v_flips": state.n_v_flips}


def _algo_health(state, static):
    finite = (jnp.all(jnp.isfinite(state.loglik_doc)) & jnp.all(jnp.isfinite(state.beta))
              & jnp.all(jnp.isfinite(state.alpha)))
    return finite, jnp.array(True)


def _algo_rollback(ok, new, old, static):
    # the parameters, switches and counters of the old state; its E-step statistics (x, s1, s2,
    # loglik_doc: 0.27 GB at NYTimes size) are not kept through the step but recomputed from
    # those by _algo_restore after a failing iteration
    keep = lambda a, b: jnp.where(ok, a, b)  # noqa: E731
    return new._replace(beta=keep(new.beta, old.beta), u=keep(new.u, old.u), alpha=keep(new.alpha, old.alpha),
                        v=keep(new.v, old.v), topic_mask=keep(new.topic_mask, old.topic_mask),
                        iteration=keep(new.iteration, old.iteration), n_u_flips=keep(new.n_u_flips, old.n_u_flips),
                        n_v_flips=keep(new.n_v_flips, old.n_v_flips))


def _algo_restore(state, args, static):
    x, ll, s1, s2 = e_step(args[0], state.u, state.beta, state.alpha, state.v, state.topic_mask)
    return state._replace(x=x, loglik_doc=ll, s1=s1, s2=s2)


#: The GEM fit as the :class:`~topicjax.core.driver.Algorithm` the driver runs (the name every
#: family's algorithm module has): static ``(GEMConfig, n_words)``, args ``(PTMData,)``; the BIC
#: is minimised, its change between iterations summed exactly from its pieces.
ALGORITHM = driver.Algorithm(step=_algo_step, objective=_algo_objective, record=_algo_record, health=_algo_health,
                             converged=_algo_converged, value=_algo_value, minimize=True, rollback=_algo_rollback,
                             restore=_algo_restore)


def algorithm(kind: str, n_words: int) -> driver.Algorithm:
    """The GEM fit as a :class:`topicjax.core.driver.Algorithm`: :data:`ALGORITHM` for every BIC
    ``kind`` and vocabulary size (both reach it through the static ``(GEMConfig, n_words)``)."""
    return ALGORITHM


#: The state type (the name every family's algorithm module has): :class:`PTMState`.
State = PTMState
#: The initial state of sec. 6.3: :func:`init_state`.
init = init_state
#: One GEM iteration: :func:`gem_step`.
step = gem_step
