"""One sweep of Algorithm 1 without the hyperparameters, in one of three modes of the token step.

* ``mode="parallel"`` (default): documents in parallel, each document's counts exact token by
  token, the shared n_vk and n_k refreshed between blocks of documents (the AD-LDA approximation;
  :mod:`topicjax.lida.parallel`), over the documents' active topics only; on CPU the compiled
  kernel of :mod:`topicjax.lida.kernel` runs it when it is built, on a GPU the Pallas kernels of
  :mod:`topicjax.lida.pallas_sweep` (same state, semantics and uniforms; ``TOPICJAX_LIDA``).
* ``mode="exact"``: the exact sequential collapsed Gibbs sweep over all tokens (the reference): a
  ``lax.scan`` over tokens that removes the token from the counts, draws from the dense K_max-way
  conditional (35)-(38) and adds it back.
* ``mode="stale"`` (**approximate, kept for comparison**): tokens in batches of ``cfg.batch``
  consecutive tokens, every token of a batch drawn from the counts at the start of the batch, its
  own document's counts included.  Tokens of one document do not see each other's new topics, so
  document-level clustering is weakened: on a tiny corpus its stationary distribution is 0.45-0.56
  (total variation) from the posterior, on KOS LDA(100) it loses 0.04-0.05 nats of held-out
  log-perplexity after 150 sweeps and drifts α to 0.13 instead of 0.053.  The per-token draw is
  the dense categorical (``mh_steps=0``) or ``mh_steps`` MH steps with the cycle proposals.

The family's algorithm module is :mod:`topicjax.lida.chain` (``State``, ``init``, ``step`` and
``ALGORITHM``, run by :func:`topicjax.core.driver.run_host`: a chain changes its shapes between
sweeps); this module is its building block, one sweep over the tokens, with the names of an
algorithm module for a sweep alone: :data:`State`, :func:`init`
(:func:`~topicjax.lida.state.init_state`) and :func:`step` (:func:`sweep`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache, partial

import jax
import jax.numpy as jnp

from . import kernel, pallas_sweep
from .draw import inverse_cdf, mix32, uniform_from_bits
from .masks import topic_step, word_step
from .parallel import assign_parallel, denominator
from .state import Config, State, Tokens, init_state, pow2
from topicjax.core.compiled import jit

__all__ = ["sweep", "assign_exact", "assign_stale", "mask_step", "State", "init", "step"]


def assign_exact(key, state: State, tokens: Tokens, cfg: Config, theta_bar, phi_bar):
    """The exact sequential collapsed Gibbs sweep over tokens, eq. (35)-(38)."""
    alpha, beta = state.alpha, state.beta
    den0 = denominator(state, cfg, phi_bar)
    u = jax.random.uniform(key, state.z.shape, jnp.float32)

    def body(carry, xs):
        n_dk, n_wk, n_k = carry
        d, v, k0, ui = xs
        n_dk = n_dk.at[d, k0].add(-1)
        n_wk = n_wk.at[v, k0].add(-1)
        n_k = n_k.at[k0].add(-1)
        p = (alpha + n_dk[d]) * (beta + n_wk[v]) / (den0 + n_k)
        if cfg.focused:
            p = jnp.where(theta_bar[d], p, 0.0)
        if cfg.sparse:
            p = jnp.where(phi_bar[v], p, 0.0)
        k = inverse_cdf(p, ui)
        return (n_dk.at[d, k].add(1), n_wk.at[v, k].add(1), n_k.at[k].add(1)), k

    (n_dk, n_wk, n_k), z = jax.lax.scan(body, (state.n_dk, state.n_wk, state.n_k),
                                        (tokens.doc, tokens.word, state.z, u))
    return z, n_dk, n_wk, n_k


def assign_stale(key, state: State, tokens: Tokens, cfg: Config, theta_bar, phi_bar):
    """The stale batched sweep (approximate, see the module docstring): every token of a batch is
    drawn from the counts at the start of the batch (minus its own assignment); counts are then
    updated with the batch's changes.  With ``mh_steps`` > 0 the proposals pick a random *other*
    token of the document (word), so that their densities q(k) = (n^{-i}_dk + α)/(n_d − 1 + K α) and
    (n^{-i}_wk + β)/(n_w − 1 + K β) do not depend on the token's own topic (valid for any number of
    MH steps)."""
    B, nb, N, K = cfg.batch, cfg.n_batches, cfg.n_tokens, cfg.n_topics
    pad = nb * B - N
    alpha, beta = state.alpha, state.beta
    den0 = denominator(state, cfg, phi_bar)
    padi = lambda a: jnp.concatenate([a, jnp.zeros((pad,), a.dtype)]) if pad else a
    doc_p, word_p, z_p = padi(tokens.doc), padi(tokens.word), padi(state.z)
    dstart_p, wstart_p, wlen_p = padi(tokens.doc_start), padi(tokens.word_start), padi(tokens.word_len)
    wpos_p = padi(tokens.word_pos)
    valid_p = jnp.arange(nb * B) < N
    seeds = jax.random.bits(key, (nb,), jnp.uint32)
    M = cfg.mh_steps
    lane = jnp.arange(B, dtype=jnp.uint32)
    Kf = jnp.float32(K)

    def body(carry, bi):
        z_p, n_dk, n_wk, n_k = carry
        sl = lambda a: jax.lax.dynamic_slice(a, (bi * B,), (B,))
        d, v, zo, ok = sl(doc_p), sl(word_p), sl(z_p), sl(valid_p)
        ctr = mix32(lane + seeds[bi] * jnp.uint32(0x9E3779B9))
        unif = lambda m: uniform_from_bits(
            mix32(ctr ^ (jnp.asarray(m + 1, jnp.uint32) * jnp.uint32(0x85EBCA6B))))
        if M == 0:
            own = jnp.arange(K)[None, :] == zo[:, None]
            p = ((alpha + (n_dk[d] - own)) * (beta + (n_wk[v] - own)) / (den0 + (n_k - own)))
            if cfg.focused:
                p = jnp.where(theta_bar[d], p, 0.0)
            if cfg.sparse:
                p = jnp.where(phi_bar[v], p, 0.0)
            zn = inverse_cdf(p, unif(0))
        else:
            n_dk_f, n_wk_f = n_dk.reshape(-1), n_wk.reshape(-1)
            tb_f, pb_f = theta_bar.reshape(-1), phi_bar.reshape(-1)
            dK, vK = d * K, v * K
            # The proposals pick a random *other* token of the document (word), so that their
            # densities q(k) = (n^{-i}_dk + α)/(n_d - 1 + K α) and (n^{-i}_wk + β)/(n_w - 1 + K β) do
            # not depend on the token's own topic: independence proposals, valid for any number
            # of MH steps.
            nd_o = tokens.n_d[d] - 1
            ds = sl(dstart_p)
            dpos = bi * B + jnp.arange(B, dtype=jnp.int32) - ds
            ws, wl, wpos = sl(wstart_p), sl(wlen_p), sl(wpos_p)
            nw_o = wl - 1

            def target(k):
                """Conditional (35)-(38) of topic k from the batch-start counts minus the token, and
                the two counts it gathered (reused as proposal densities: fewer gathers)."""
                own = (k == zo).astype(jnp.int32)
                a = n_dk_f[dK + k] - own
                b = n_wk_f[vK + k] - own
                p = (alpha + a) * (beta + b) / (den0[k] + (n_k[k] - own))
                if cfg.focused:
                    p = jnp.where(tb_f[dK + k], p, 0.0)
                if cfg.sparse:
                    p = jnp.where(pb_f[vK + k], p, 0.0)
                return p, a, b

            def pick(x_u, n_o, mass, pos, fetch):
                x = x_u * (n_o.astype(jnp.float32) + Kf * mass)
                j = jnp.minimum(x.astype(jnp.int32), jnp.maximum(n_o - 1, 0))
                j = j + (j >= pos)  # skip the token itself
                uni = jnp.minimum(((x - n_o) / mass).astype(jnp.int32), K - 1)
                return jnp.where(x < n_o, fetch(j), uni)

            def mh(m, c, doc_prop):
                s, ps, a_s, b_s = c
                x_u, a_u = unif(2 * m), unif(2 * m + 1)
                if doc_prop:
                    t = pick(x_u, nd_o, alpha, dpos, lambda j: z_p[ds + j])
                else:
                    t = pick(x_u, nw_o, beta, wpos, lambda j: z_p[tokens.by_word[ws + j]])
                pt, a_t, b_t = target(t)
                # q(k) ∝ n^{-i}_dk + α (document proposal) or n^{-i}_wk + β (word proposal)
                qs, qt = (a_s + alpha, a_t + alpha) if doc_prop else (b_s + beta, b_t + beta)
                acc = a_u * ps * qt < pt * qs
                keep = lambda new, old: jnp.where(acc, new, old)
                return keep(t, s), keep(pt, ps), keep(a_t, a_s), keep(b_t, b_s)

            def pair(i, c):
                return mh(2 * i + 1, mh(2 * i, c, True), False)

            c = jax.lax.fori_loop(0, M // 2, pair, (zo, *target(zo)))
            if M % 2:
                c = mh(M - 1, c, True)
            zn = c[0]
        zn = jnp.where(ok, zn, zo)
        inc = ok.astype(jnp.int32)
        n_dk = n_dk.at[d, zo].add(-inc).at[d, zn].add(inc)
        n_wk = n_wk.at[v, zo].add(-inc).at[v, zn].add(inc)
        n_k = n_k.at[zo].add(-inc).at[zn].add(inc)
        z_p = jax.lax.dynamic_update_slice(z_p, zn, (bi * B,))
        return (z_p, n_dk, n_wk, n_k), None

    (z_p, n_dk, n_wk, n_k), _ = jax.lax.scan(body, (z_p, state.n_dk, state.n_wk, state.n_k),
                                             jnp.arange(nb, dtype=jnp.int32))
    return z_p[:N], n_dk, n_wk, n_k



# ============================================================================ one sweep
@lru_cache(maxsize=64)
def _normalised(cfg: Config) -> Config:
    """Settings that only the hyperparameter step reads, normalised: fewer compilations."""
    return replace(cfg, sample=(), eta_prior=(1.0, 1.0), gamma_prior=(1.0, 1.0), max_doc_len=0, max_word_count=0)


def mask_step(state: State, key, tokens: Tokens, cfg: Config):
    """Topic and word activations of one sweep: (theta_bar, phi_bar, overflow_topics, overflow_words)."""
    return _masks_jit(state, key, tokens, _normalised(cfg))[:4]


@partial(jit, static_argnames=("cfg",))
def _masks_jit(state: State, key, tokens: Tokens, cfg: Config, it=None):
    k_t, k_w, _ = jax.random.split(_sweep_key(key, it), 3)
    theta_bar, phi_bar = state.theta_bar, state.phi_bar
    of_t = of_w = jnp.int32(0)
    if cfg.focused:
        theta_bar, of_t = topic_step(k_t, state, tokens, cfg)
    if cfg.sparse:
        phi_bar, of_w = word_step(k_w, state, theta_bar, cfg)
    # the busiest document's active topics (the XLA sweep's list length), here rather than in
    # eager operations that would compile programs of their own
    busiest = jnp.max(jnp.sum(theta_bar, axis=1, dtype=jnp.int32))
    return theta_bar, phi_bar, of_t.astype(jnp.int32), of_w.astype(jnp.int32), busiest


def sweep(state: State, key, tokens: Tokens, cfg: Config, donate: bool = False, it=None) -> State:
    """One iteration of Algorithm 1 without the hyperparameters (see
    :func:`~topicjax.lida.hyper.hyper_update`): topic activations, word activations and topic
    assignments in ``cfg.mode``.

    ``donate=True`` hands the state's arrays to the sweep, which writes the new counts and
    assignments into them instead of copies (``state`` must not be used afterwards); where the
    compiled kernel runs the sweep, that saves copying z, n_dk and n_wk (about 6 MB on KOS at K =
    100, a few percent of a sweep).  It applies where the sweep is one compiled call (the kernel,
    the exact and stale modes, variants without topic activations); otherwise the state is left
    alone.

    ``it``: a sweep index (an int32 scalar); when given, the sweep's key is
    ``jax.random.fold_in(key, it)``, folded inside the sweep's program (a chain's sweeps then
    compile no program of their own for it: :func:`topicjax.lida.chain.step`)."""
    cfg = _normalised(cfg)
    if tokens.by_word is None and (cfg.mode == "stale" or cfg.mh_steps):
        raise ValueError(f"the {cfg.mode!r} sweep{' with MH steps' if cfg.mh_steps else ''} reads per-token arrays "
                         "that these tokens were made without: make_tokens(corpus, ..., extras=True)")
    backend = kernel.sweep_backend(cfg)  # decided here, a static argument: every program stays cached
    if cfg.mode == "parallel" and backend == "xla" and tokens.blocks.tok is None:
        raise ValueError("the XLA parallel sweep reads the blocks' lane layout that these tokens were made "
                         "without: make_tokens(corpus, ..., lanes_layout=True)")
    if cfg.mode != "parallel" or not cfg.focused or backend != "xla":
        # the kernel's draw (kernel.set_draw): static, like the backend
        draw = kernel.get_draw() if backend == "ffi" else "auto"
        return (_sweep_jit_donated if donate else _sweep_jit)(state, key, tokens, cfg, 0, backend, draw, it)
    # the active-topic lists are as long as the busiest document (a power of two: few compilations)
    theta_bar, phi_bar, of_t, of_w, busiest = _masks_jit(state, key, tokens, cfg, it)
    # (at least 32: the first sweeps of a chain would otherwise compile for 1, 2, 4, ... topics)
    n_active = min(cfg.n_topics, max(32, pow2(int(busiest))))
    masked = state._replace(theta_bar=theta_bar, phi_bar=phi_bar, overflow_topics=of_t, overflow_words=of_w)
    return _assign_jit(masked, key, tokens, cfg, n_active, "xla", "auto", it)


def _sweep_one_call(state: State, key, tokens: Tokens, cfg: Config, n_active: int, backend: str,
                    draw: str = "auto", it=None) -> State:
    key = _sweep_key(key, it)
    theta_bar, phi_bar, of_t, of_w, _ = _masks_jit(state, key, tokens, cfg)
    state = state._replace(theta_bar=theta_bar, phi_bar=phi_bar, overflow_topics=of_t, overflow_words=of_w)
    return _assign_jit(state, key, tokens, cfg, n_active, backend, draw)


def _sweep_key(key, it):
    """The sweep's key: ``key`` itself, or folded with the sweep index ``it`` (traced)."""
    return key if it is None else jax.random.fold_in(key, it)


_sweep_jit = jit(_sweep_one_call, static_argnames=("cfg", "n_active", "backend", "draw"))
_sweep_jit_donated = jit(_sweep_one_call, static_argnames=("cfg", "n_active", "backend", "draw"), donate_argnums=0)


@partial(jit, static_argnames=("cfg", "n_active", "backend", "draw"))
def _assign_jit(state: State, key, tokens: Tokens, cfg: Config, n_active: int, backend: str = "xla",
                draw: str = "auto", it=None) -> State:
    k_z = jax.random.split(_sweep_key(key, it), 3)[2]
    if cfg.mode == "exact":
        out = assign_exact(k_z, state, tokens, cfg, state.theta_bar, state.phi_bar)
    elif cfg.mode == "stale":
        out = assign_stale(k_z, state, tokens, cfg, state.theta_bar, state.phi_bar)
    elif backend == "ffi":  # the compiled CPU sweep: same state, same semantics
        out = kernel.sweep_kernel(k_z, state, tokens, cfg, state.theta_bar, state.phi_bar, draw=draw)
    elif backend == "pallas":  # the Pallas kernels: same state, semantics and uniforms
        out = pallas_sweep.assign_pallas(k_z, state, tokens, cfg, state.theta_bar, state.phi_bar)
    else:
        out = assign_parallel(k_z, state, tokens, cfg, state.theta_bar, state.phi_bar, n_active)
    z, n_dk, n_wk, n_k = out
    return state._replace(z=z, n_dk=n_dk, n_wk=n_wk, n_k=n_k)


#: The initial state of a chain: :func:`~topicjax.lida.state.init_state`.
init = init_state
#: One sweep of Algorithm 1 without the hyperparameters: :func:`sweep`.
step = sweep
