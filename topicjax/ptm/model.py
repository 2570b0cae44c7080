"""Parsimonious topic models (Soleimani & Miller 2014; Wang & Miller 2020) fitted by generalized EM.

The model (2014 sec. 4): each topic ``j`` has word switches ``u_jn`` -- a word is topic-specific
(probability ``beta_jn``) or uses the shared model ``beta0_n`` (estimated once from the global
frequencies, eq. 11) -- and each document ``d`` has topic switches ``v_jd`` selecting the topics
it uses with proportions ``alpha_jd``.  The likelihood is (5)::

    p(D | H, Theta) = prod_d prod_i sum_j alpha_jd v_jd beta_{j w_id}^{u_{j w_id}} beta0_{w_id}^{1 - u_{j w_id}}

Everything -- switches, parameters and the number of topics -- minimises a BIC
(:mod:`topicjax.ptm_bic`: 2014 eq. 26, its exact-count variant of sec. 7.4, or 2020 eq. 16).

Generalized EM (2014 sec. 6), one :func:`gem_step`:

1. M-step (8)-(10) from the E-step statistics of the current parameters;
2. word switches: rounds of trial flips (27)-(29) on the expected complete-data BIC (2014), or
   joint per-word optimisation over the three configurations all-off / all-on / mixed (2020),
   several flips accepted per round only through an exact combined change
   (:func:`topicjax.ptm.bic.select_u_flips_2014` / ``select_u_flips_2020``); then ``beta`` is
   re-estimated by (9)-(10) for the new switches;
3. topic switches: rounds of trial flips (30)-(31) with exact incomplete-data likelihood changes,
   every document's candidate flips evaluated at once (:func:`topicjax.ptm.bic.v_trial_deltas`),
   a batch (at most one per document) accepted with an exact combined change;
4. E-step (6) at the new parameters: expected counts ``x_jn`` (9), ``sum_i P(Z^(j))`` per
   document (8) and the per-document log-likelihood, from which the BIC is computed in float64.

Each accepted step decreases the BIC: the M-step and the word flips increase the expected
complete-data log-likelihood by at least their computed amount (hence the likelihood, by
Jensen's inequality), and the topic-switch batches are scored with the exact likelihood.  The
constraints of sec. 6.1-6.2 always hold: every topic keeps a specific word and a document, every
document keeps a topic.

Layout: the corpus is held twice, as rows of 16 entries of one document and as rows of 16
entries of one word (:class:`Rows`), so both halves of the E-step and the per-document trial
flips are gathers, dense reductions and ``segment_sum``s over rows -- no scatter-add of
``(nnz, M)`` rows, which XLA executes serially on CPU -- and every pass has one shape, so it
compiles once.  Topics are padded to a multiple of 8 with a mask, so that the compiled step is
reused across a model-order sweep.

Initialisation (sec. 6.3): ``n_init_docs`` distinct random seed documents per topic, their words
topic-specific with frequency-count probabilities; every document hard-assigned to its maximum
likelihood topic (seed documents to their own); switches and probabilities re-estimated from the
assigned documents.  Model-order selection (2014 sec. 6.5, 2020 sec. 3.5): :func:`select_order`
sweeps ``M`` top-down, removing the least massive topics and warm-starting from the rest.
Random restarts at one order: :meth:`PTM.fit_many` runs them in one compiled call (vmapped over
the seeds), :func:`best_fit` keeps the smallest BIC.

Results depend only on the seed and the data on CPU; bits can differ between CPU and GPU.  On a
GPU the scatter-adds of the E-step may run in any order (atomics), and two fits with the same
seed were seen to end with different switches on an H100.

>>> import topicjax as tj
>>> from topicjax.ptm import PTM
>>> corpus, _ = tj.datasets.make_bars(n_docs=100, seed=0)
>>> model = PTM(n_components=6, max_iter=5, random_state=0, progress=False).fit(corpus)
>>> model.u_.shape, model.v_.shape, bool(model.bic_history_[-1] <= model.bic_history_[0])
((6, 25), (6, 100), True)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from topicjax.core import em
from topicjax.ptm import bic as pb
from topicjax.estimator import TopicModelBase, int_sequence
from topicjax.data.corpus import Corpus

__all__ = [
    "PTM",
    "PTMData",
    "PTMState",
    "prepare",
    "init_state",
    "gem_step",
    "e_step",
    "m_step",
    "state_bic",
    "infer_alpha",
    "v_flip_scores",
    "select_order",
    "OrderSelection",
    "check_completion",
    "reduce_topics",
    "best_fit",
]

TINY = pb.TINY
#: cap on n / p^2 in the ranking statistic s2 (only ranks trial flips; keeps inf * 0 out)
RATIO_CAP = 1e30
#: shared words remembered per topic for :meth:`PTM.top_shared_words`
SHARED_TOP = 50


# =============================================================================== data layout
class Rows(NamedTuple):
    """The non-zeros grouped by an "item" (a document, or a word) and cut into rows of ``W``.

    ``item`` ``(C, R)``: the item owning each row (padding rows: the number of items), rows of an
    item are consecutive and items are sorted; ``other`` / ``count`` / ``pos`` ``(C, R, W)``: the
    word (for document rows) or document (for word rows) of each entry, its count (0 = padding)
    and its index in the flat count array (padding: its last slot).  The ``C`` chunks of ``R`` rows
    are processed one at a time by ``lax.scan``; one shape for the whole corpus means one
    compilation, and per-item sums are ``segment_sum``s over rows.
    """

    item: jax.Array
    other: jax.Array
    count: jax.Array
    pos: jax.Array


class PTMData(NamedTuple):
    """A corpus on the device for PTM: document rows, word rows, flat counts, lengths, beta0."""

    docs: Rows
    words: Rows
    counts: jax.Array  # (F,) float32: the non-zeros in corpus order, then zeros; F = nnz + 1 rounded up
    doc_length: jax.Array  # (D,) int32, L_d
    beta0: jax.Array  # (N,) float32, eq. 11


def _rows_layout(lengths: np.ndarray, offsets: np.ndarray, other: np.ndarray, counts: np.ndarray, pos: np.ndarray,
                 width: int, block_tokens: int, pad_other: int, pad_pos: int) -> Rows:
    n_items = lengths.size
    n_rows_item = -(-lengths // width)
    n_rows = int(n_rows_item.sum())
    R = max(1, block_tokens // width)
    C = max(1, -(-n_rows // R))
    item = np.repeat(np.arange(n_items, dtype=np.int64), n_rows_item)
    first = np.repeat(np.cumsum(n_rows_item) - n_rows_item, n_rows_item)
    start = offsets[item] + (np.arange(n_rows) - first) * width
    end = offsets[item] + lengths[item]
    k = start[:, None] + np.arange(width)[None, :]
    valid = k < end[:, None]
    k = np.where(valid, k, 0)
    out_item = np.full(C * R, n_items, np.int32)
    out_item[:n_rows] = item
    mats = []
    for f, pad in ((other, pad_other), (counts, 0), (pos, pad_pos)):
        m = np.full((C * R, width), pad, f.dtype)
        if n_rows:
            m[:n_rows] = np.where(valid, f[k], pad)
        mats.append(m.reshape(C, R, width))
    return Rows(jnp.asarray(out_item.reshape(C, R)), jnp.asarray(mats[0], jnp.int32),
                jnp.asarray(mats[1], jnp.float32), jnp.asarray(mats[2], jnp.int32))


def prepare(corpus: Corpus, *, block_tokens: int = 4096, doc_width: int = 16, word_width: int = 16) -> PTMData:
    """Build the device layout of a corpus for PTM (see :class:`PTMData` and :class:`Rows`).

    ``block_tokens`` padded entries per chunk bound the working set of one step of a pass to
    about ``block_tokens * M * 4`` bytes; ``doc_width`` / ``word_width`` are the row widths (the
    padding is below 20% on 20 Newsgroups with 16).
    """
    if corpus.nnz == 0:
        raise ValueError("the corpus has no tokens")
    D, N, nnz = corpus.n_docs, corpus.n_words, corpus.nnz
    # the flat arrays are padded to a multiple of block_tokens (at least one padding slot, the
    # last) so that corpora of similar size share compiled functions
    n_flat = int(-(-(nnz + 1) // block_tokens) * block_tokens)
    pad_pos = n_flat - 1
    pos = np.arange(nnz, dtype=np.int32)
    counts = corpus.counts.astype(np.float32)
    d_off = corpus.doc_offsets
    docs = _rows_layout(np.diff(d_off), d_off, corpus.word_ids, counts, pos, doc_width, block_tokens, 0, pad_pos)
    order = np.argsort(corpus.word_ids, kind="stable").astype(np.int32)
    w_len = np.bincount(corpus.word_ids, minlength=N).astype(np.int64)
    w_off = np.concatenate([[0], np.cumsum(w_len)]).astype(np.int64)
    words = _rows_layout(w_len, w_off, corpus.doc_ids[order], counts[order], order, word_width, block_tokens, D, pad_pos)
    wc = corpus.word_counts.astype(np.float64)
    beta0 = wc / wc.sum()
    flat = np.zeros(n_flat, np.float32)
    flat[:nnz] = counts
    return PTMData(docs, words, jnp.asarray(flat), jnp.asarray(corpus.doc_lengths, jnp.int32),
                   jnp.asarray(beta0, jnp.float32))


def _rows(a, idx):
    """``a[idx]`` with out-of-range indices (padding) giving zero rows."""
    fill = False if a.dtype == jnp.bool_ else 0
    return jnp.take(a, idx, axis=0, mode="fill", fill_value=fill)


def _row_map(rows: Rows, fn, per_item):
    """Apply ``fn(other (R, W), count (R, W), pos (R, W), inputs)`` to every chunk of rows,
    ``inputs`` being the rows of the ``per_item`` pytree for each row's item.  Returns the outputs
    stacked over chunks and flattened to one leading axis of ``C * R`` rows."""

    def body(_, blk):
        it, o, n, p = blk
        return None, fn(o, n, p, jax.tree.map(lambda a: _rows(a, it), per_item))

    _, out = lax.scan(body, None, (rows.item, rows.other, rows.count, rows.pos))
    return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), out)


def _per_item(rows: Rows, values, n_items: int):
    """Sum row values over the rows of every item (``(n_items, ...)``)."""
    return jax.ops.segment_sum(values, rows.item.reshape(-1), num_segments=n_items, indices_are_sorted=True)


def _flat(rows: Rows, values, n_flat: int):
    """Scatter per-entry row values ``(C*R, W)`` back to corpus order ``(F,)`` (padding slots 0)."""
    out = jnp.zeros((n_flat,), values.dtype).at[rows.pos.reshape(-1)].set(values.reshape(-1), mode="drop")
    return out.at[n_flat - 1].set(0)


def _word_sums(data: PTMData, r_flat, a, N: int):
    """``g[n, j] = sum_d r_dn a[d, j]`` over the non-zeros, by word rows (``(N, P)``)."""

    def fn(d, n, pos, _):
        return jnp.einsum("rk,rkp->rp", r_flat[pos], _rows(a, d))

    part = _row_map(data.words, fn, jnp.zeros((N + 1, 0)))
    return _per_item(data.words, part, N)


# =============================================================================== model state
class PTMState(NamedTuple):
    """Parameters, switches and the E-step statistics at those parameters (all pure arrays).

    ``beta`` ``(P, N)`` topic-specific probabilities (0 where ``u`` is off), ``u`` ``(P, N)``,
    ``alpha`` / ``v`` ``(D, P)`` (documents in rows), ``topic_mask`` ``(P,)`` marks the real
    topics; ``x`` ``(P, N)`` expected counts (9) for every word and topic, ``n_dj`` ``(D, P)`` the
    E-step numerators of (8), ``loglik_doc`` ``(D,)`` the log-likelihood of each document at the
    current parameters, ``s1`` / ``s2`` the derivatives that rank trial flips (:func:`e_step`);
    ``n_u_flips`` / ``n_v_flips`` count the switches changed by the last step.
    """

    beta: jax.Array
    u: jax.Array
    alpha: jax.Array
    v: jax.Array
    topic_mask: jax.Array
    x: jax.Array
    n_dj: jax.Array
    loglik_doc: jax.Array
    s1: jax.Array
    s2: jax.Array
    iteration: jax.Array
    n_u_flips: jax.Array
    n_v_flips: jax.Array


def _effective(u, beta, beta0, topic_mask):
    return pb.effective_beta(u & topic_mask[:, None], beta, beta0)


def e_step(data: PTMData, u, beta, alpha, v, topic_mask):
    """E-step (6): returns ``x (P, N)`` (9), ``n_dj (D, P)`` (numerators of (8)), the
    per-document log-likelihood ``(D,)`` of (5), and ``s1 = sum_w n_dw b_jw / p_dw``, ``s2 = sum_w
    n_dw (b_jw / p_dw)^2`` ``(D, P)`` for every topic (the derivatives used to rank trial flips)."""
    N = data.beta0.shape[0]
    D = data.doc_length.shape[0]
    n_flat = data.counts.shape[0]
    B = _effective(u, beta, data.beta0, topic_mask)
    a = jnp.where(v & topic_mask[None, :], alpha, 0.0)

    def fn(w, n, pos, ad):
        bw = B[w]
        real = n > 0
        p = jnp.where(real, jnp.maximum(jnp.einsum("rwp,rp->rw", bw, ad), TINY), 1.0)
        r = jnp.where(real, n / p, 0.0)
        ll = jnp.sum(jnp.where(real, n * jnp.log(p), 0.0), axis=1)
        # r / p is capped: a token whose probability is clamped (p = TINY) would give inf * 0
        return ll, jnp.einsum("rwp,rw->rp", bw, r), jnp.einsum("rwp,rw->rp", bw * bw, jnp.minimum(r / p, RATIO_CAP)), r

    ll, s1, s2, r = _row_map(data.docs, fn, a)
    g = _word_sums(data, _flat(data.docs, r, n_flat), a, N)
    s1 = _per_item(data.docs, s1, D)
    return B.T * g.T, a * s1, _per_item(data.docs, ll, D), s1, _per_item(data.docs, s2, D)


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


def m_step(state: PTMState, beta0):
    """M-step (8)-(10) from the statistics stored in ``state``."""
    tm = state.topic_mask
    vv = state.v & tm[None, :]
    num = jnp.where(vv, state.n_dj, 0.0)
    tot = jnp.sum(num, axis=1, keepdims=True)
    alpha = jnp.where(tot > 0, num / jnp.where(tot > 0, tot, 1.0), state.alpha)
    beta = m_step_beta(state.x, state.u, state.beta, beta0, tm)
    return alpha, beta


def _lbar(v, doc_length, topic_mask):
    return jnp.sum(jnp.where(v & topic_mask[None, :], doc_length[:, None], 0), axis=0)


def _u_round(kind, n_candidates, x, u, beta0, lbar, tm):
    if kind == "2020":
        return pb.select_u_flips_2020(x, u, beta0, lbar, tm, n_candidates=min(n_candidates, u.shape[1]))
    return pb.select_u_flips_2014(x, u, beta0, lbar, tm, kind=kind, n_candidates=n_candidates)


def _v_trials(data: PTMData, kind, n_on, n_off, newton_iters, u, beta, alpha, v, tm, S1, S2):
    """Candidate topic-switch flips of every document with their exact BIC changes.

    ``S1``, ``S2`` (``(D, P)``, from the E-step or the previous round, possibly stale) only rank
    the candidates; the trial changes are exact at the current parameters.
    """
    D, P = v.shape
    B = _effective(u, beta, data.beta0, tm)
    lbar = _lbar(v, data.doc_length, tm)
    vv = v & tm[None, :]
    a = jnp.where(vv, alpha, 0.0)
    ndocs_topic = jnp.sum(vv, axis=0)
    uu = u & tm[:, None]
    Nj = jnp.sum(uu, axis=1)
    n_c0 = jnp.sum(jnp.sum(uu, axis=0) < jnp.sum(tm)).astype(jnp.float32)
    cost, allow_on, allow_off = pb.v_flip_costs(vv, data.doc_length, lbar, ndocs_topic, Nj, tm, n_c0, kind)
    kon, koff = min(n_on, P), min(n_off, P)
    cand, sign, ok, t_start = pb.v_candidates(S1, S2, data.doc_length, cost, allow_on, allow_off, a, n_on=kon, n_off=koff)

    # one pass: the candidates' ratios b_c / p and the sum over the active topics for every
    # token, and the derivatives S1, S2 of every topic for the next round's ranking
    def fn(w, n, pos, inp):
        ad, cd, vd = inp
        bw = B[w]
        p = jnp.where(n > 0, jnp.maximum(jnp.einsum("rwp,rp->rw", bw, ad), TINY), 1.0)
        r = n / p
        return (jnp.take_along_axis(bw, cd[:, None, :], axis=2) / p[..., None], jnp.einsum("rwp,rp->rw", bw, vd) / p,
                jnp.einsum("rwp,rw->rp", bw, r), jnp.einsum("rwp,rw->rp", bw * bw, jnp.minimum(r / p, RATIO_CAP)))

    rho_c, rsum, s1, s2 = _row_map(data.docs, fn, (a, cand, vv.astype(jnp.float32)))
    n_rows = data.docs.count.reshape(-1, data.docs.count.shape[-1])
    dl, t, variant = pb.v_trial_deltas(rho_c, rsum, n_rows, data.docs.item.reshape(-1), alpha, vv, cand, sign, t_start,
                                       n_on=kon, newton_iters=newton_iters)
    dbic, best_dbic, best_topic, best_sign, best_alpha = pb.v_best(cand, sign, ok, dl, t, variant, cost, alpha, vv)
    return dict(cand=cand, sign=sign, dbic=dbic, t=t, variant=variant, best_dbic=best_dbic, best_topic=best_topic,
                best_sign=best_sign, best_alpha=best_alpha, lbar=lbar, ndocs_topic=ndocs_topic, Nj=Nj, n_c0=n_c0,
                vv=vv, a=a, S1=_per_item(data.docs, s1, D), S2=_per_item(data.docs, s2, D))


def _v_round(data: PTMData, kind, n_on, n_off, newton_iters, doc_candidates, u, beta, alpha, v, tm, S1, S2):
    """One round of topic-switch updates: every document's best trial flip, then an exact batch
    (:func:`topicjax.ptm.bic.select_v_flips`).  Returns the new switches and proportions, the
    number of flips, their combined BIC change, and fresh ranking derivatives ``S1``, ``S2``."""
    P = v.shape[1]
    r = _v_trials(data, kind, n_on, n_off, newton_iters, u, beta, alpha, v, tm, S1, S2)
    accept, k, change = pb.select_v_flips(r["best_dbic"], r["best_topic"], r["best_sign"], data.doc_length, r["lbar"],
                                          r["ndocs_topic"], r["Nj"], tm, r["n_c0"], kind, doc_candidates)
    flip = accept[:, None] & (jnp.arange(P)[None, :] == r["best_topic"][:, None])
    v_new = jnp.where(flip, ~r["vv"], r["vv"])
    alpha_new = jnp.where(accept[:, None], r["best_alpha"], r["a"])
    return v_new, alpha_new, k, change, r["S1"], r["S2"]


@partial(jax.jit, static_argnames=("kind", "newton_iters"))
def v_flip_scores(state: PTMState, data: PTMData, kind: str = "2014", newton_iters: int = 6):
    """BIC change of flipping each topic switch ``v_jd`` alone, ``(D, P)`` (``+inf`` where not
    allowed), every switch of every document evaluated at once by the same masked computation
    as the GEM step (all ``P`` topics as candidates); also returns the trial ``t`` of turning
    each topic on and the variant (0 renormalise, 1 uniform) of turning it off."""
    D, P = state.v.shape
    r = _v_trials(data, kind, P, P, newton_iters, state.u, state.beta, state.alpha, state.v, state.topic_mask,
                  state.s1, state.s2)
    rows = jnp.arange(D)[:, None]
    out = jnp.full((D, P), jnp.inf).at[rows, r["cand"]].min(r["dbic"])
    real = jnp.isfinite(r["dbic"])
    t = jnp.zeros((D, P)).at[rows, r["cand"]].max(jnp.where(real & (r["sign"] > 0), r["t"], 0.0))
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


def _gem_step_impl(state: PTMState, data: PTMData, cfg: GEMConfig) -> PTMState:
    tm = state.topic_mask
    beta0 = data.beta0
    alpha, beta = m_step(state, beta0)
    lbar = _lbar(state.v, data.doc_length, tm)

    # -- word switches (x fixed: expected complete-data BIC), then beta for the new switches
    def u_cond(c):
        return (c[1] < cfg.max_u_cycles) & ((c[1] == 0) | (c[2] > 0))

    def u_body(c):
        u, i, _, tot = c
        u, k, _ = _u_round(cfg.kind, cfg.u_candidates, state.x, u, beta0, lbar, tm)
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

    init = (state.v & tm[None, :], alpha, z, z, z, state.s1, state.s2)
    v, alpha, _, _, n_v, _, _ = lax.while_loop(v_cond, v_body, init)
    alpha = jnp.where(v, alpha, 0.0)
    x, ndj, ll, s1, s2 = e_step(data, u, beta, alpha, v, tm)
    return PTMState(beta, u, alpha, v, tm, x, ndj, ll, s1, s2, state.iteration + 1, n_u, n_v)


_gem_step_jit = jax.jit(_gem_step_impl, static_argnames=("cfg",))


def gem_step(state: PTMState, data: PTMData, cfg: GEMConfig = GEMConfig()) -> PTMState:
    """One GEM iteration (M-step, word switches, topic switches, E-step); pure and jit-compiled,
    so it can be ``jax.vmap``-ped over a batch of states (restarts) sharing ``data``."""
    return _gem_step_jit(state, data, cfg)


def state_bic(state: PTMState, data: PTMData, kind: str) -> float:
    """BIC of a state in float64 (its log-likelihood comes from the state's last E-step)."""
    doc_cost, topic_cost, word_cost, n0, m = _structure_jit(state.u, state.v, data.doc_length, state.topic_mask, kind)
    terms = pb.BICTerms(state.loglik_doc, doc_cost, topic_cost, word_cost, n0, m, int(state.u.shape[1]))
    return pb.bic_total(terms, kind)


_structure_jit = jax.jit(pb.structure_costs, static_argnames=("kind",))


# =============================================================================== initialisation
def _ml_scores(data: PTMData, B, D: int):
    """``sum_w n_dw log b_jw`` for every document and topic (the hard-assignment rule of 6.3)."""
    logB = jnp.log(jnp.maximum(B, TINY))

    def fn(w, n, pos, _):
        return jnp.einsum("rw,rwp->rp", n, logB[w])

    return _per_item(data.docs, _row_map(data.docs, fn, jnp.zeros((D, 0))), D)


def _beta_from_counts(c, u, beta0, tm):
    return m_step_beta(c, u, jnp.zeros_like(c), beta0, tm)


def _init_impl(key, data: PTMData, n_topics: int, n_pad: int, n_init_docs: int) -> PTMState:
    D = data.doc_length.shape[0]
    N = data.beta0.shape[0]
    M, P = n_topics, n_pad
    tm = jnp.arange(P) < M
    valid_word = data.beta0 > 0
    counts = data.counts  # padding slots are 0
    # 1) distinct random seed documents for every topic; their words are topic-specific
    seeds = jax.random.permutation(key, D)[: M * n_init_docs].reshape(M, n_init_docs)
    owner = jnp.full((D,), -1, jnp.int32).at[seeds].set(jnp.broadcast_to(jnp.arange(M)[:, None], seeds.shape))
    sv = (owner[:, None] == jnp.arange(P)[None, :]).astype(jnp.float32)
    c = _word_sums(data, counts, sv, N).T
    u = (c > 0) & tm[:, None] & valid_word[None, :]
    beta = _beta_from_counts(c, u, data.beta0, tm)
    # 2) hard-assign every document to its maximum-likelihood topic (seeds to their own)
    scores = _ml_scores(data, _effective(u, beta, data.beta0, tm), D)
    best = jnp.argmax(jnp.where(tm[None, :], scores, -jnp.inf), axis=1)
    best = jnp.where(owner >= 0, owner, best)
    v = best[:, None] == jnp.arange(P)[None, :]
    # 3) re-estimate the switches and probabilities from the assigned documents
    c = _word_sums(data, counts, v.astype(jnp.float32), N).T
    u = (c > 0) & tm[:, None] & valid_word[None, :]
    beta = _beta_from_counts(c, u, data.beta0, tm)
    alpha = v.astype(jnp.float32)
    x, ndj, ll, s1, s2 = e_step(data, u, beta, alpha, v, tm)
    z = jnp.zeros((), jnp.int32)
    return PTMState(beta, u, alpha, v, tm, x, ndj, ll, s1, s2, z, z, z)


_init_jit = jax.jit(_init_impl, static_argnames=("n_topics", "n_pad", "n_init_docs"))


def padded_topics(n_topics: int, multiple: int = 8) -> int:
    return int(-(-n_topics // multiple) * multiple)


def init_state(key, data: PTMData, n_topics: int, *, n_init_docs: int = 5, n_pad: int | None = None) -> PTMState:
    """Initial state of sec. 6.3 (see the module docstring).  ``n_init_docs`` is lowered to
    ``D // M`` when there are not enough documents for distinct seeds.  Pure and jit-compiled:
    ``jax.vmap(lambda k: init_state(k, data, M))`` gives a batch of restarts."""
    D = int(data.doc_length.shape[0])
    if n_topics > D:
        raise ValueError(f"{n_topics} topics need at least {n_topics} documents (one seed each); the corpus has {D}")
    n_init = max(1, min(int(n_init_docs), D // n_topics))
    return _init_jit(key, data, int(n_topics), int(n_pad or padded_topics(n_topics)), n_init)


# =============================================================================== inference
def _infer_alpha_impl(data: PTMData, B, n_iter: int, topic_mask):
    D = data.doc_length.shape[0]
    P = B.shape[1]
    a0 = jnp.where(topic_mask[None, :], 1.0 / jnp.sum(topic_mask), 0.0) * jnp.ones((D, P))

    def fn(w, n, pos, ad):
        bw = B[w]
        real = n > 0
        p = jnp.where(real, jnp.maximum(jnp.einsum("rwp,rp->rw", bw, ad), TINY), 1.0)
        return ad * jnp.einsum("rwp,rw->rp", bw, jnp.where(real, n / p, 0.0))

    def it(a, _):
        num = _per_item(data.docs, _row_map(data.docs, fn, a), D)
        tot = jnp.sum(num, axis=1, keepdims=True)
        return jnp.where(tot > 0, num / jnp.where(tot > 0, tot, 1.0), a), None

    a, _ = lax.scan(it, a0, None, length=n_iter)
    return a


_infer_alpha_jit = jax.jit(_infer_alpha_impl, static_argnames=("n_iter",))


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
        return jnp.sum(jnp.where(real, n * jnp.log(p), 0.0), axis=1)

    return _per_item(data.docs, _row_map(data.docs, fn, alpha), D)


_loglik_docs = jax.jit(_loglik_docs_impl)


# =============================================================================== restarts
# Several random restarts at one model order as ONE compiled computation (:meth:`PTM.fit_many`).
# Each restart runs the loop of :meth:`PTM.fit` -- GEM steps until the BIC stops decreasing by
# ``tol`` (relative) or ``max_iter`` -- as a bounded ``lax.while_loop``; under ``jax.vmap`` the
# loop continues while any restart is running and a restart that has stopped keeps its state
# (the batching rule of ``while_loop`` selects the old carry where a predicate is false), so
# every restart ends exactly where its own fit would.
#
# The stopping rule of :func:`topicjax.core.em.run` compares float64 BIC values summed on the host.
# On the device (float32) the BIC and its change are kept as double-float numbers (hi + lo,
# about 48 bits): the per-document / per-topic / per-word pieces are added pairwise with
# error-free transformations, and the change between iterations is summed from the exact
# per-piece differences, so it keeps full relative accuracy although it is ~1e-4 of a BIC of
# ~1e6.  The host then replays the rule of ``em.run`` on the recorded float64 history; a restart
# whose device decision disagrees (its change within ~1e-7 of the threshold) is refitted alone.


def _two_sum(a, b):
    """Knuth's TwoSum: ``s + e == a + b`` exactly."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _df_add(a_hi, a_lo, b_hi, b_lo):
    """Double-float addition ``(a_hi + a_lo) + (b_hi + b_lo)``, renormalised (|lo| <= ulp(hi)/2)."""
    s, e = _two_sum(a_hi, b_hi)
    e = e + (a_lo + b_lo)
    hi = s + e
    return hi, e - (hi - s)


def _df_total(hi, lo):
    """Sum a vector of double-float values ``(hi, lo)`` pairwise: ``(hi, lo)`` scalars.  The error
    is about ``log2(n) eps^2 sum |x|`` (eps = 2^-24), i.e. ~1e-13 relative for a BIC."""
    n = hi.shape[0]
    size = 1 << max(0, (n - 1).bit_length())
    hi = jnp.pad(hi, (0, size - n))
    lo = jnp.pad(lo, (0, size - n))
    while hi.shape[0] > 1:
        h = hi.shape[0] // 2
        hi, lo = _df_add(hi[:h], lo[:h], hi[h:], lo[h:])
    return hi[0], lo[0]


def _bic_pieces(state: PTMState, data: PTMData, kind: str):
    """The float32 pieces whose float64 sum plus the u prior is the BIC (as :func:`state_bic`):
    ``-loglik_doc``, ``doc_cost``, ``topic_cost``, ``word_cost`` concatenated, and ``N0``."""
    doc_cost, topic_cost, word_cost, n0, _ = pb.structure_costs(state.u, state.v, data.doc_length,
                                                                 state.topic_mask, kind)
    return jnp.concatenate([-state.loglik_doc, doc_cost, topic_cost, word_cost]), n0


def _u_prior_device(n0, n_topics, n_words: int, kind: str):
    """:func:`topicjax.ptm.bic.u_prior_2014` in float32 (only scales the tolerance threshold)."""
    T = n_topics.astype(jnp.float32) * n_words
    if kind == "2014-exact":
        return T * math.log(2.0)
    if kind != "2014":
        return jnp.zeros((), jnp.float32)
    p = n0.astype(jnp.float32) / T
    inside = (p > 0) & (p < 1)
    ps = jnp.where(inside, p, 0.5)
    h = jnp.where(inside, -ps * jnp.log(ps) - (1.0 - ps) * jnp.log1p(-ps), 0.0)
    return T * h - 0.5 * jnp.log(T)


def _u_prior_change(n0_old, n0_new, n_topics, n_words: int, kind: str):
    """``u_prior(N0_old) - u_prior(N0_new)`` without cancellation (the order ``M`` is fixed)."""
    if kind != "2014":
        return jnp.zeros((), jnp.float32)
    T = n_topics.astype(jnp.float32) * n_words
    a = n0_old.astype(jnp.float32)
    return -pb._entropy_delta(a, T, n0_new.astype(jnp.float32) - a)


def _fit_loop(state: PTMState, data: PTMData, cfg: GEMConfig, max_iter: int, tol):
    """The loop of :meth:`PTM.fit` for one restart, compiled: returns the final state and the
    trace ``(bic_hi, bic_lo, n0)`` (``max_iter + 1``: the start, then every iteration; the BIC
    without its u prior, as a double-float), ``u_flips``, ``v_flips`` (``max_iter``), the number
    of iterations and whether the parameters stayed finite."""
    kind = cfg.kind
    n_words = data.beta0.shape[0]
    n_topics = jnp.sum(state.topic_mask)
    pieces, n0 = _bic_pieces(state, data, kind)
    hi0, lo0 = _df_total(pieces, jnp.zeros_like(pieces))
    f32 = jnp.zeros((max_iter + 1,), jnp.float32)
    i32 = jnp.zeros((max_iter + 1,), jnp.int32)
    trace = (f32.at[0].set(hi0), f32.at[0].set(lo0), i32.at[0].set(n0), i32[1:], i32[1:])
    tol = jnp.asarray(tol, jnp.float32)

    def cond(c):
        _, i, done, _, _, _, _ = c
        return (i < max_iter) & ~done

    def body(c):
        s, i, _, _, old_pieces, old_n0, (t_hi, t_lo, t_n0, t_uf, t_vf) = c
        new = _gem_step_impl(s, data, cfg)
        new_pieces, new_n0 = _bic_pieces(new, data, kind)
        hi, lo = _df_total(new_pieces, jnp.zeros_like(new_pieces))
        # old - new of every piece exactly (TwoSum), then summed: the BIC decrease
        d_hi, d_lo = _df_total(*_two_sum(old_pieces, -new_pieces))
        decrease = (d_hi + d_lo) + _u_prior_change(old_n0, new_n0, n_topics, n_words, kind)
        bic = (hi + lo) + _u_prior_device(new_n0, n_topics, n_words, kind)
        finite = (jnp.all(jnp.isfinite(new.loglik_doc)) & jnp.all(jnp.isfinite(new.beta))
                  & jnp.all(jnp.isfinite(new.alpha)) & jnp.isfinite(hi))
        it = i + 1
        # em.run: from the second iteration on, stop when |change| <= tol * max(|BIC|, 1e-30)
        converged = (it >= 2) & (tol > 0) & (jnp.abs(decrease) <= tol * jnp.maximum(jnp.abs(bic), 1e-30))
        trace = (t_hi.at[it].set(hi), t_lo.at[it].set(lo), t_n0.at[it].set(new_n0),
                 t_uf.at[i].set(new.n_u_flips), t_vf.at[i].set(new.n_v_flips))
        return new, it, converged | ~finite, finite, new_pieces, new_n0, trace

    z = jnp.zeros((), jnp.int32)
    carry = (state, z, jnp.zeros((), bool), jnp.ones((), bool), pieces, n0, trace)
    state, n_iter, _, finite, _, _, trace = lax.while_loop(cond, body, carry)
    return state, trace, n_iter, finite


def _restarts_impl(keys, data: PTMData, tol, n_topics: int, n_pad: int, n_init_docs: int, cfg: GEMConfig,
                   max_iter: int, batch_size: int):
    def one(key):
        return _fit_loop(_init_impl(key, data, n_topics, n_pad, n_init_docs), data, cfg, max_iter, tol)

    # batch_size 1: lax.map without vmap (a compiled loop over restarts, one at a time)
    return lax.map(one, keys, batch_size=None if batch_size == 1 else batch_size)


_restarts_jit = jax.jit(_restarts_impl,
                        static_argnames=("n_topics", "n_pad", "n_init_docs", "cfg", "max_iter", "batch_size"))


def _stop_iteration(bics, tol: float):
    """The iteration after which the tolerance rule of :func:`topicjax.core.em.run` stops on the
    minimised objective sequence ``bics`` (``bics[0]`` the start, ``bics[i]`` after iteration
    ``i``), or ``None`` when it does not stop within the sequence."""
    for i in range(2, len(bics)):
        if tol > 0 and abs(bics[i - 1] - bics[i]) <= tol * max(abs(bics[i]), 1e-30):
            return i
    return None


def _check_seeds(seeds, n_restarts, random_state) -> list[int]:
    """Validate the restarts of :meth:`PTM.fit_many` and return their seeds."""
    if seeds is not None and n_restarts is not None:
        raise ValueError("give seeds or n_restarts, not both")
    if seeds is None:
        if n_restarts is None:
            raise ValueError("fit_many needs seeds (a list of integers) or n_restarts")
        if isinstance(n_restarts, bool) or not isinstance(n_restarts, (int, np.integer)) or n_restarts < 1:
            raise ValueError(f"n_restarts must be a positive integer, got {n_restarts!r}")
        if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
            raise ValueError(f"n_restarts needs an integer random_state to count seeds from, got {random_state!r}")
        return [int(random_state) + i for i in range(int(n_restarts))]
    seeds = int_sequence(seeds, "seeds", 0)
    if not seeds:
        raise ValueError("seeds is empty: fit_many needs at least one seed")
    if len(set(seeds)) != len(seeds):
        dup = next(s for s in seeds if seeds.count(s) > 1)
        raise ValueError(f"seed {dup} appears more than once in seeds (the restarts would be identical)")
    return seeds


def best_fit(models):
    """The model of smallest ``bic_`` among fitted :class:`PTM` (e.g. from :meth:`PTM.fit_many`);
    ties go to the first."""
    models = list(models)
    if not models:
        raise ValueError("best_fit needs at least one fitted model")
    for i, m in enumerate(models):
        if not hasattr(m, "bic_"):
            raise ValueError(f"models[{i}] is not a fitted PTM")
    return models[int(np.argmin([m.bic_ for m in models]))]


# =============================================================================== estimator
def _check_fit_corpus(corpus: Corpus, n_topics: int):
    corpus.check_topics(n_topics)
    if n_topics > corpus.n_docs:
        raise ValueError(
            f"n_components={n_topics} is larger than the number of documents ({corpus.n_docs}): "
            "every topic needs at least one document"
        )


class PTM(TopicModelBase):
    """Parsimonious topic model (2014) with the 2014 or 2020 BIC, fitted by generalized EM.

    Parameters
    ----------
    n_components: number of topics ``M`` (use :func:`select_order` to choose it by BIC).
    bic: ``"2014"`` (eq. 26), ``"2014-exact"`` (sec. 7.4, small vocabularies) or ``"2020"``
        (2020 eq. 16, joint per-word switch updates).
    max_iter: maximum number of GEM iterations.
    tol: stop when the relative decrease of the BIC in one iteration is below ``tol``.
    random_state: seed of the initialisation (sec. 6.3); same seed, same model on CPU (see above for GPUs).
    n_init_docs: seed documents per topic (``D_init`` of sec. 6.3; the reference code uses 5).
    max_u_cycles, max_v_rounds: bounds on the rounds of word / topic switch updates per iteration
        (the reference code cycles 20 and 10 times through single flips; one of our rounds
        accepts a whole batch, and the next iteration continues where a round stopped).
    u_candidates: flips considered per word-switch round (the best by single-flip score).
    v_candidates: ``(n_on, n_off)`` topic switches tried per document and round: inactive topics
        ranked by an estimated gain, active ones by smallest proportion (``>= M`` tries all).
    transform_iter: EM iterations for the proportions of new documents.
    block_tokens: padded entries per block of the device layout (memory/speed trade-off).
    progress: tqdm progress bar over GEM iterations.

    Fitted attributes (paper orientation, topics in rows): ``u_`` ``(M, N)`` bool, ``v_`` ``(M, D)``
    bool, ``alpha_`` ``(M, D)``, ``beta_`` ``(M, N)`` (topic-specific probabilities, 0 where
    ``u_`` is off), ``beta0_`` ``(N,)``, ``bic_`` and ``bic_history_`` (BIC after the
    initialisation and after every GEM iteration, never increasing), ``history_`` (per iteration:
    BIC, switches changed, seconds), ``n_iter_``, ``vocab_``.  ``phi_`` ``(N, M)`` is the
    effective word distribution of each topic, ``theta_`` is ``alpha_``.
    """

    _saved_arrays = ("u_", "v_", "alpha_", "beta_", "beta0_", "shared_top_")
    _saved_meta = ("bic_", "bic_history_", "history_", "n_iter_")

    def __init__(self, n_components=10, *, bic="2014", max_iter=100, tol=1e-4, random_state=0, n_init_docs=5,
                 max_u_cycles=5, max_v_rounds=3, u_candidates=65536, v_candidates=(6, 3), transform_iter=50,
                 block_tokens=4096, progress=True):
        self.n_components = n_components
        self.bic = bic
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.n_init_docs = n_init_docs
        self.max_u_cycles = max_u_cycles
        self.max_v_rounds = max_v_rounds
        self.u_candidates = u_candidates
        self.v_candidates = v_candidates
        self.transform_iter = transform_iter
        self.block_tokens = block_tokens
        self.progress = progress

    # ------------------------------------------------------------------ fitting
    def _config(self) -> GEMConfig:
        pb.check_kind(self.bic)
        on, off = (int(c) for c in self.v_candidates)
        if on < 1 or off < 1:
            raise ValueError(f"v_candidates must be two positive integers, got {self.v_candidates!r}")
        return GEMConfig(kind=self.bic, u_candidates=int(self.u_candidates), max_u_cycles=int(self.max_u_cycles),
                         max_v_rounds=int(self.max_v_rounds), v_on=on, v_off=off)

    def fit(self, X, y=None):
        corpus = self._train_corpus(X)
        _check_fit_corpus(corpus, self.n_components)
        cfg = self._config()
        data = prepare(corpus, block_tokens=self.block_tokens)
        state = init_state(jax.random.key(self.random_state), data, int(self.n_components), n_init_docs=self.n_init_docs)
        return self._fit_state(data, state, cfg)

    def fit_many(self, X, seeds=None, *, n_restarts=None, batch_size=None, y=None) -> list["PTM"]:
        """Fit several random restarts at the order ``n_components`` in ONE compiled call.

        Each restart is this estimator with ``random_state`` set to one of ``seeds`` (or, with
        ``n_restarts``, to ``random_state, random_state + 1, ...``): its initialisation (sec. 6.3)
        and its whole GEM loop -- up to ``max_iter`` iterations, stopping as :meth:`fit` does
        when the relative BIC decrease falls below ``tol`` -- are one ``lax.while_loop``, and the
        restarts are ``jax.vmap``-ped over their seeds (in chunks of ``batch_size``) inside one
        jit-compiled function; a restart that has converged keeps its state while the others go
        on.  The results are those of separate ``PTM(..., random_state=seed).fit(X)`` fits (see
        Exactness below): the same switches, parameters and BIC (``bic_``, the last value of
        ``bic_history_``, is computed in float64 exactly as :meth:`fit` does; the earlier values
        of ``bic_history_`` come from double-float sums on the device and agree to ~1e-13
        relative).  The device applies the stopping rule of
        :func:`topicjax.core.em.run` to double-float BIC values; the host then replays the rule on the
        float64 history, and the rare restart whose BIC change lies within ~1e-7 of the threshold
        and was stopped differently is refitted alone with :meth:`fit`.

        Model order: PTM chooses ``M`` by the separate top-down sweep :func:`select_order`;
        ``fit_many`` runs restarts at one fixed order (to pick restarts at several orders, call it
        once per order and compare ``bic_``).

        Parameters
        ----------
        X: the training corpus (``Corpus`` or documents x words counts), as for :meth:`fit`.
        seeds: distinct non-negative integers, one restart each.
        n_restarts: instead of ``seeds``: the seeds ``random_state + i`` for ``i < n_restarts``.
        batch_size: restarts vmapped together (``jax.lax.map`` over chunks of this size inside
            the same compiled call; 1 runs them one after the other without vmap).  Under vmap a
            chunk runs as long as its slowest restart (the others are frozen, but their step is
            still evaluated).  Default: all restarts at once on accelerators, where it pays (8
            restarts, 2000 synthetic documents, ``M = 16``, H100: one vmapped call 15 s, 8
            separate fits 91 s; ``batch_size=1`` 89 s); 1 on CPU, where the vmapped step's
            batched gathers and scatter-adds made 8 restarts on 300-600 KOS documents ~2.4x
            slower than one restart at a time (which is about as fast as separate fits), and
            where the float32 sums of a batched step can round differently from a single fit's
            (below).

        Returns the fitted models, one per seed in the order given: clones of this estimator with
        their ``random_state``, every fitted attribute of :meth:`fit`; ``history_[i]["seconds"]``
        is the call's wall time spread evenly over all the iterations of all restarts.  This
        estimator itself is left unchanged.  :func:`best_fit` picks the smallest BIC.  There is no
        progress bar (the loop is compiled).

        Exactness: with ``batch_size=1`` the restarts run the very operations of :meth:`fit` and
        were bit-identical to it on the test corpora and on 600 KOS documents.  Under vmap
        (``batch_size > 1``) XLA compiles batched reductions and may add float32 terms in
        another order; the results are then equal to the last bits on small corpora (the tests)
        but on larger ones a ~1e-9 relative difference can tip a near-tie switch decision, after
        which the restart follows another (equally valid) GEM path: 8 vmapped restarts on 600 KOS
        documents on CPU ended with other switches than their separate fits.  On a GPU even two
        separate fits with one seed can differ (see the module docstring).
        """
        from sklearn.base import clone

        from topicjax.estimator import as_corpus

        corpus = as_corpus(X)
        _check_fit_corpus(corpus, self.n_components)
        cfg = self._config()
        seeds = _check_seeds(seeds, n_restarts, self.random_state)
        G = len(seeds)
        if batch_size is None:
            batch_size = 1 if jax.default_backend() == "cpu" else G
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        batch_size = min(int(batch_size), G)
        max_iter, tol = int(self.max_iter), float(self.tol)
        if max_iter < 0:
            raise ValueError(f"max_iter must be >= 0, got {self.max_iter!r}")
        M, N = int(self.n_components), corpus.n_words
        data = prepare(corpus, block_tokens=self.block_tokens)
        n_init = max(1, min(int(self.n_init_docs), corpus.n_docs // M))
        keys = jnp.stack([jax.random.key(s) for s in seeds])
        t0 = time.perf_counter()
        finals, trace, n_iters, finite = _restarts_jit(
            keys, data, tol, n_topics=M, n_pad=padded_topics(M), n_init_docs=n_init, cfg=cfg, max_iter=max_iter,
            batch_size=batch_size)
        t_hi, t_lo, t_n0, t_uf, t_vf = (np.asarray(a) for a in trace)
        n_iters, finite = np.asarray(n_iters), np.asarray(finite)
        wall = time.perf_counter() - t0
        bad = np.flatnonzero(~finite)
        if bad.size:
            g = int(bad[0])
            raise em.NumericalError(f"PTM fit_many (seed {seeds[g]}): non-finite parameters after iteration "
                                    f"{int(n_iters[g])}")
        per_iter = wall / max(int(n_iters.sum()), 1)
        models = []
        for g, seed in enumerate(seeds):
            m = clone(self).set_params(random_state=seed)
            n = int(n_iters[g])
            bics = [float(np.float64(t_hi[g, i]) + np.float64(t_lo[g, i]))
                    + pb.u_prior_2014(int(t_n0[g, i]), M, N, cfg.kind) for i in range(n + 1)]
            stop = _stop_iteration(bics, tol)
            if stop != n and not (stop is None and n == max_iter):
                # the device's double-float decision and the float64 rule disagree (a change within
                # rounding of the threshold): this restart is fitted alone
                models.append(m.fit(corpus))
                continue
            state = jax.tree.map(lambda a: a[g], finals)
            m.vocab_ = list(corpus.vocab)
            m.n_features_in_ = N
            m._set_fitted(state, data, M)
            bics[-1] = state_bic(state, data, cfg.kind)
            m.bic_history_ = bics
            m.history_ = [{"bic": bics[i], "u_flips": int(t_uf[g, i - 1]), "v_flips": int(t_vf[g, i - 1]),
                           "seconds": per_iter} for i in range(1, n + 1)]
            m.bic_ = bics[-1]
            m.n_iter_ = n
            m._state = state
            models.append(m)
        return models

    def _fit_state(self, data: PTMData, state: PTMState, cfg: GEMConfig, desc: str | None = None):
        kind = cfg.kind
        M = int(np.asarray(state.topic_mask).sum())
        bic0 = state_bic(state, data, kind)
        t_last = [time.perf_counter()]

        def callback(i, s):
            now = time.perf_counter()
            rec = {"u_flips": int(s.n_u_flips), "v_flips": int(s.n_v_flips), "seconds": now - t_last[0]}
            t_last[0] = now
            return rec

        def finite(s):
            return bool(jnp.all(jnp.isfinite(s.loglik_doc)) & jnp.all(jnp.isfinite(s.beta)) & jnp.all(jnp.isfinite(s.alpha)))

        state, history = em.run(
            lambda s: gem_step(s, data, cfg), state, max_iter=int(self.max_iter), tol=float(self.tol),
            objective=lambda s: state_bic(s, data, kind), minimize=True, progress=self.progress,
            desc=desc or f"PTM M={M}", callback=callback, check_finite=finite,
        )
        self._set_fitted(state, data, M)
        self.bic_history_ = [bic0] + [h["objective"] for h in history]
        self.history_ = [{"bic": h["objective"], **{k: h[k] for k in ("u_flips", "v_flips", "seconds")}} for h in history]
        self.bic_ = self.bic_history_[-1]
        self.n_iter_ = len(history)
        self._state = state  # the device state, used to warm-start the next order; not saved
        return self

    def _set_fitted(self, state: PTMState, data: PTMData, M: int):
        self.u_ = np.asarray(state.u)[:M].astype(bool)
        self.v_ = np.asarray(state.v)[:, :M].T.astype(bool)
        self.alpha_ = np.asarray(state.alpha)[:, :M].T.astype(np.float32)
        self.beta_ = np.where(self.u_, np.asarray(state.beta)[:M], 0.0).astype(np.float32)
        self.beta0_ = np.asarray(data.beta0).astype(np.float32)
        x = np.asarray(state.x)[:M]
        top = []
        for j in range(M):
            idx = np.flatnonzero(~self.u_[j])
            idx = idx[np.argsort(-x[j, idx], kind="stable")][:SHARED_TOP]
            top.append(np.concatenate([idx, np.full(SHARED_TOP - idx.size, -1)]))
        self.shared_top_ = np.asarray(top, np.int32).reshape(M, SHARED_TOP)

    # ------------------------------------------------------------------ derived views
    @property
    def phi_(self):
        """Effective word distribution of every topic, ``(N, M)``: ``u beta + (1 - u) beta0``."""
        return np.where(self.u_, self.beta_, self.beta0_[None, :]).T

    @property
    def theta_(self):
        return self.alpha_

    @property
    def m_bar_(self) -> float:
        """Average number of topics per document, ``M-bar`` (2014 Table 1)."""
        return float(self.v_.sum(0).mean())

    @property
    def n_bar_(self) -> float:
        """Average number of topic-specific words per topic, ``N-bar`` (2014 Table 2)."""
        return float(self.u_.sum(1).mean())

    @property
    def n_unique_(self) -> int:
        """Words specific to at least one topic, ``N_unique`` (2014 Table 2)."""
        return int(self.u_.any(0).sum())

    @property
    def frac_all_off_(self) -> float:
        """Share of vocabulary words whose switches are off in every topic (2020 sec. 4.4)."""
        return float((~self.u_.any(0)).mean())

    def top_specific_words(self, n: int = 10) -> list[list[str]]:
        """The ``n`` most probable topic-specific words of every topic (2014 Table 3)."""
        self._check_fitted()
        out = []
        for j in range(self.u_.shape[0]):
            idx = np.flatnonzero(self.u_[j])
            idx = idx[np.argsort(-self.beta_[j, idx], kind="stable")][:n]
            out.append([self.vocab_[i] for i in idx])
        return out

    def top_shared_words(self, n: int = 10) -> list[list[str]]:
        """The ``n`` (at most 50) shared words (switch off) that each topic generates most (2014
        Table 3), ranked by their expected count under the topic at the end of the fit, ``x_jn``
        of eq. 9 (``sum_d alpha_jd v_jd n_dn beta0_n / p_dn``)."""
        self._check_fitted()
        return [[self.vocab_[i] for i in row[row >= 0][:n]] for row in np.asarray(self.shared_top_)]

    # ------------------------------------------------------------------ new documents
    def _infer(self, corpus: Corpus):
        data = prepare(corpus, block_tokens=self.block_tokens)
        B = jnp.asarray(self.phi_, jnp.float32)
        return data, B, infer_alpha(data, B, int(self.transform_iter))

    def transform(self, X):
        """Topic proportions of documents with every topic allowed (2014 sec. 7), ``(n_docs, M)``."""
        corpus = self._new_corpus(X)
        _, _, a = self._infer(corpus)
        return np.asarray(a)

    def fit_transform(self, X, y=None):
        return self.fit(X).alpha_.T

    def log_likelihood(self, X, alpha=None) -> float:
        """Log-likelihood (5) of corpus ``X`` in float64; proportions ``alpha`` ``(M, n_docs)`` or
        estimated with every topic allowed."""
        corpus = self._new_corpus(X)
        data = prepare(corpus, block_tokens=self.block_tokens)
        B = jnp.asarray(self.phi_, jnp.float32)
        a = infer_alpha(data, B, int(self.transform_iter)) if alpha is None else jnp.asarray(np.asarray(alpha).T, jnp.float32)
        return float(np.asarray(_loglik_docs(data, B, a), np.float64).sum())

    def heldout_log_likelihood(self, observed, heldout) -> float:
        """Document completion (2014 eq. 32): proportions from ``observed`` with every topic allowed,
        log-likelihood of ``heldout`` (the same documents), summed in float64."""
        obs = self._new_corpus(observed)
        held = self._new_corpus(heldout)
        if obs.n_docs != held.n_docs:
            raise ValueError(f"observed has {obs.n_docs} documents but heldout has {held.n_docs}")
        _, B, a = self._infer(obs)
        data = prepare(held, block_tokens=self.block_tokens)
        return float(np.asarray(_loglik_docs(data, B, a), np.float64).sum())

    def completion_log_likelihood(self, X, *, protocol: str = "words", seed: int = 0):
        """Split every document of ``X`` (``Corpus.completion_split``) and return ``(held-out
        log-likelihood, number of held-out tokens)``.  Documents too short to be split (fewer
        than 2 tokens, or 2 distinct words for ``protocol="words"``) are an error naming the first."""
        corpus = self._new_corpus(X)
        check_completion(corpus, protocol)
        obs, held = corpus.completion_split(protocol, seed=seed)
        return self.heldout_log_likelihood(obs, held), held.n_tokens

    # ------------------------------------------------------------------ persistence
    @classmethod
    def load(cls, path, **params):
        model = super().load(path, **params)
        for name in ("u_", "v_"):
            if hasattr(model, name):
                setattr(model, name, np.asarray(getattr(model, name)).astype(bool))
        return model


def check_completion(corpus: Corpus, protocol: str = "words") -> None:
    """Raise a ``ValueError`` naming the first document that document completion cannot split."""
    if protocol == "words":
        n = np.diff(corpus.doc_offsets)
        what = "distinct word(s)"
    else:
        n = corpus.doc_lengths
        what = "token(s)"
    short = np.flatnonzero(n < 2)
    if short.size:
        d = int(short[0])
        raise ValueError(
            f"document {d} has {int(n[d])} {what}: document completion needs at least 2 "
            f"({short.size} such document(s)); drop them first, e.g. corpus.subset(keep)"
        )


# =============================================================================== model order
@dataclass
class OrderSelection:
    """Result of :func:`select_order`: every order's model, BIC and fitting time."""

    orders: list[int]
    bics: list[float]
    models: dict
    seconds: list[float]
    best_order: int = 0
    best_model: PTM | None = None

    def curve(self):
        """``(orders, bics)`` as arrays, from the largest order down."""
        return np.asarray(self.orders), np.asarray(self.bics)


def _validate_orders(n_docs: int, m_max: int, m_min: int, step: int) -> list[int]:
    for name, val in (("m_max", m_max), ("m_min", m_min), ("step", step)):
        if int(val) != val or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    if m_min > m_max:
        raise ValueError(f"m_min={m_min} is larger than m_max={m_max}")
    if m_max > n_docs:
        raise ValueError(f"m_max={m_max} is larger than the number of documents ({n_docs}); every topic needs a document")
    if (m_max - m_min) % step:
        last = m_max - ((m_max - m_min) // step) * step
        raise ValueError(
            f"step={step} from m_max={m_max} skips past m_min={m_min} (it reaches {last}, then {last - step}); "
            f"choose a step dividing m_max - m_min = {m_max - m_min}"
        )
    return list(range(int(m_max), int(m_min) - 1, -int(step)))


def _reduce_impl(state: PTMState, data: PTMData, keep, n_pad_new: int):
    """Keep the topics ``keep`` (indices), repad to ``n_pad_new``, give documents left without a
    topic their maximum-likelihood remaining topic, renormalise proportions, run the E-step."""
    D = state.v.shape[0]
    N = state.u.shape[1]
    Mk = keep.shape[0]
    P = n_pad_new
    tm = jnp.arange(P) < Mk
    pad_r = lambda a: jnp.concatenate([a[keep], jnp.zeros((P - Mk,) + a.shape[1:], a.dtype)], axis=0)
    pad_c = lambda a: jnp.concatenate([a[:, keep], jnp.zeros((D, P - Mk), a.dtype)], axis=1)
    u = pad_r(state.u)
    beta = pad_r(state.beta)
    # Specific words with beta = 0 (turned on while the topic generated none of them: a valid
    # maximiser of (7)) would give zero probability to the words of a document newly assigned to
    # the topic, an infinite BIC from which GEM's bound no longer holds.  The warm start makes
    # them shared again and rescales the topic's other specific probabilities to stay normalised;
    # a topic whose specific words are all dead becomes the shared model on them.
    dead = u & (beta <= 0) & tm[:, None]
    live = u & ~dead
    all_dead = ~jnp.any(live, axis=1, keepdims=True)
    S_old = jnp.sum(jnp.where(u, data.beta0[None, :], 0.0), axis=1, keepdims=True)
    S_new = jnp.sum(jnp.where(live, data.beta0[None, :], 0.0), axis=1, keepdims=True)
    beta = jnp.where(all_dead, jnp.where(u, data.beta0[None, :], 0.0),
                     jnp.where(live, beta * (S_new / jnp.maximum(S_old, TINY)), 0.0))
    u = jnp.where(all_dead, u, live)
    v = pad_c(state.v)
    alpha = pad_c(jnp.where(state.v, state.alpha, 0.0))
    orphan = ~jnp.any(v, axis=1)
    scores = _ml_scores(data, _effective(u, beta, data.beta0, tm), D)
    best = jnp.argmax(jnp.where(tm[None, :], scores, -jnp.inf), axis=1)
    v = jnp.where(orphan[:, None], best[:, None] == jnp.arange(P)[None, :], v)
    alpha = jnp.where(orphan[:, None], v.astype(jnp.float32), alpha)
    tot = jnp.sum(alpha, axis=1, keepdims=True)
    nv = jnp.sum(v, axis=1, keepdims=True)
    alpha = jnp.where(tot > 0, alpha / jnp.where(tot > 0, tot, 1.0), v / jnp.maximum(nv, 1))
    x, ndj, ll, s1, s2 = e_step(data, u, beta, alpha, v, tm)
    z = jnp.zeros((), jnp.int32)
    return PTMState(beta, u, alpha, v, tm, x, ndj, ll, s1, s2, z, z, z)


_reduce_jit = jax.jit(_reduce_impl, static_argnames=("n_pad_new",))


def reduce_topics(state: PTMState, data: PTMData, n_remove: int) -> PTMState:
    """Remove the ``n_remove`` topics with the smallest aggregate mass ``sum_d alpha_jd`` (2014
    sec. 6.5) and warm-start the smaller model from the others: their switches and probabilities
    are kept (specific words of probability 0 become shared again, see :func:`_reduce_impl`),
    documents keep their remaining topics with renormalised proportions, and a document that
    lost all its topics gets its maximum-likelihood remaining topic (as in sec. 6.3)."""
    tm = np.asarray(state.topic_mask)
    M = int(tm.sum())
    mass = np.asarray(jnp.sum(jnp.where(state.v, state.alpha, 0.0), axis=0))[:M]
    drop = np.argsort(mass, kind="stable")[:n_remove]
    keep = np.setdiff1d(np.arange(M), drop)
    return _reduce_jit(state, data, jnp.asarray(keep, jnp.int32), padded_topics(M - n_remove))


def select_order(corpus, m_max: int, m_min: int = 2, step: int = 1, *, bic: str = "2014", random_state: int = 0,
                 progress: bool = True, keep_models: bool = True, callback=None, **ptm_params) -> OrderSelection:
    """Top-down model-order selection (2014 sec. 6.5, 2020 sec. 3.5).

    Fits a :class:`PTM` with ``m_max`` topics, then repeatedly removes the ``step`` least massive
    topics and refits from the remaining ones, down to ``m_min``; returns every order's model
    (``keep_models``) and BIC and the BIC-minimising model.  ``callback(order, model, seconds)``
    is called after every order (e.g. to evaluate it).  Errors: ``m_max`` larger than the number
    of documents, and steps that do not land on ``m_min``.
    """
    from tqdm.auto import tqdm

    corpus = corpus if isinstance(corpus, Corpus) else PTM()._train_corpus(corpus)
    orders = _validate_orders(corpus.n_docs, m_max, m_min, step)
    pb.check_kind(bic)
    proto = PTM(n_components=orders[0], bic=bic, random_state=random_state, progress=progress, **ptm_params)
    cfg = proto._config()
    data = prepare(corpus, block_tokens=proto.block_tokens)
    result = OrderSelection([], [], {}, [])
    state = None
    bar = tqdm(orders, desc="PTM orders", disable=not progress)
    try:
        for M in bar:
            t0 = time.perf_counter()
            if state is None:
                _check_fit_corpus(corpus, M)
                state = init_state(jax.random.key(random_state), data, M, n_init_docs=proto.n_init_docs)
            else:
                state = reduce_topics(state, data, int(np.asarray(state.topic_mask).sum()) - M)
            model = PTM(n_components=M, bic=bic, random_state=random_state, progress=progress, **ptm_params)
            model.vocab_ = list(corpus.vocab)
            model.n_features_in_ = corpus.n_words
            model._fit_state(data, state, cfg, desc=f"PTM M={M}")
            state = model._state
            model._state = None  # keep the sweep's memory bounded: only host arrays per order
            secs = time.perf_counter() - t0
            result.orders.append(M)
            result.bics.append(model.bic_)
            result.seconds.append(secs)
            if keep_models:
                result.models[M] = model
            if callback is not None:
                callback(M, model, secs)
            if not keep_models and (result.best_model is None or model.bic_ <= min(result.bics)):
                result.best_model = model
            bar.set_postfix(M=M, bic=f"{model.bic_:.6g}")
    finally:
        bar.close()
    i = int(np.argmin(result.bics))
    result.best_order = result.orders[i]
    if keep_models:
        result.best_model = result.models[result.best_order]
    return result
