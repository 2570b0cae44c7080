"""Hyperparameter sampling (sec. 4.5): α and β by slice sampling their exact conditionals (39)-(40),
η and γ by their conjugate Gamma updates under the IBP likelihood (43), δ and ξ by random-walk
Metropolis-Hastings on log(δ + σ) (log(ξ + ζ)); σ and ζ stay fixed (sec. 5.2 recommends a grid)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from .ibp import ibp_harmonic, ibp_log_likelihood, log_marginal_w, log_marginal_z
from .state import TINY, Config, State, canonical
from topicjax.core.compiled import jit

__all__ = ["slice_log", "gamma_draw", "mh_log", "count_histogram", "token_count_histogram", "loggamma_sum", "hyper_step", "hyper_update"]


def slice_log(key, x0, logf, w=0.7, max_out=8, max_in=25):
    """One univariate slice-sampling update (Neal 2003): stepping out, then shrinkage, bounded.

    Written as a single ``while_loop`` whose phase (0: step out left, 1: step out right, 2: shrink)
    is part of the carry, so that ``logf`` is traced twice only (compile time)."""
    # all random numbers drawn up front: RNG calls inside loop bodies are costly to compile
    u = jax.random.uniform(key, (2 + 2 * max_out + max_in,), jnp.float32, minval=1e-7)
    y = logf(x0) + jnp.log(u[0])
    L0 = x0 - w * u[1]

    def cond(c):
        phase, i, x, L, R, point, done = c
        return ~done & (i < 2 * max_out + max_in)

    def body(c):
        phase, i, x, L, R, point, _ = c
        inside = logf(point) > y
        out0 = (phase == 0) & inside  # left end still inside the slice: step further out
        out1 = (phase == 1) & inside
        accept = (phase == 2) & inside
        reject = (phase == 2) & ~inside  # shrink the interval towards x0
        L = jnp.where(out0, L - w, jnp.where(reject & (point < x0), point, L))
        R = jnp.where(out1, R + w, jnp.where(reject & (point >= x0), point, R))
        x = jnp.where(accept, point, x)
        phase = jnp.where(phase == 0, jnp.where(out0 & (i + 1 < max_out), 0, 1),
                          jnp.where(phase == 1, jnp.where(out1 & (i + 1 < 2 * max_out), 1, 2), 2)).astype(jnp.int32)
        prop = L + u[2 + i] * (R - L)
        point = jnp.where(phase == 0, L, jnp.where(phase == 1, R, prop))
        return phase, i + 1, x, L, R, point, accept

    c0 = (jnp.int32(0), jnp.int32(0), x0, L0, L0 + w, L0, jnp.bool_(False))
    _, _, x, *_ = jax.lax.while_loop(cond, body, c0)
    return x


def gamma_draw(key, shape, n_try: int = 16):
    """One Gamma(shape, 1) draw by Marsaglia & Tsang (2000) with ``n_try`` vectorised candidates
    (each accepted with probability > 0.95 for shape ≥ 1, so all fail with probability < 1e-20) and
    the boost Gamma(a) = Gamma(a + 1) U^{1/a} for shape < 1.  Loop-free (cheap to compile, unlike
    ``jax.random.gamma``)."""
    r = jax.random.uniform(key, (3, n_try + 1), jnp.float32, minval=1e-7)
    a = jnp.asarray(shape, jnp.float32)
    a1 = jnp.where(a < 1, a + 1, a)
    d = a1 - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)
    x = jnp.sqrt(-2.0 * jnp.log(r[0, :n_try])) * jnp.cos(2.0 * jnp.pi * r[1, :n_try])  # Box-Muller
    v = (1 + c * x) ** 3
    u = r[2, :n_try]
    ok = (v > 0) & (jnp.log(u) < 0.5 * x * x + d - d * v + d * jnp.log(jnp.maximum(v, TINY)))
    g = d * v[jnp.argmax(ok)]
    boost = jnp.where(a < 1, r[2, n_try] ** (1.0 / a), 1.0)
    return g * boost


def mh_log(key, x0, logf, scale, steps):
    """Random-walk Metropolis-Hastings on x (``steps`` proposals N(x, scale²))."""

    u = jax.random.uniform(key, (3, steps + 1), jnp.float32, minval=1e-7)
    step = scale * jnp.sqrt(-2.0 * jnp.log(u[0])) * jnp.cos(2.0 * jnp.pi * u[1])  # Box-Muller normals
    step = step.at[0].set(0.0)

    def body(i, c):
        # iteration 0 only evaluates logf(x0) (one traced copy of logf: compile time)
        x, fx = c
        x1 = x + step[i]
        f1 = logf(x1)
        acc = (i == 0) | (jnp.log(u[2, i]) < f1 - fx)
        return jnp.where(acc, x1, x), jnp.where(acc, f1, fx)

    x, _ = jax.lax.fori_loop(0, steps + 1, body, (x0, jnp.float32(0.0)))
    return x


def _bincount32(values, length: int):
    """``jnp.bincount(values, length=length)`` of non-negative counts, in int32 (bincount's own
    ones and result are int64 under JAX_ENABLE_X64)."""
    return jnp.zeros((length,), jnp.int32).at[values].add(1, mode="drop")


def token_count_histogram(cell_of_token, length: int):
    """h[c] = number of cells holding count c (c ≥ 1), from ``cell_of_token`` = the count of the cell
    of every token (n_dk[d_i, z_i] or n_wk[w_i, z_i]): a cell holding c tokens is seen c times.
    O(N) instead of a pass over the D x K_max (V x K_max) table."""
    t = _bincount32(cell_of_token, length)
    c = jnp.maximum(jnp.arange(length, dtype=jnp.int32), 1)
    return (t // c).at[0].set(0)


def count_histogram(counts, length: int):
    """h[c] = number of cells holding count c (c ≥ 1; h[0] = 0), for cells with counts < length."""
    h = _bincount32(counts.reshape(-1), length)
    return h.at[0].set(0)


def loggamma_sum(hist, a):
    """Σ_cells [log Γ(a + n) − log Γ(a)] over the non-zero cells, from their count histogram."""
    c = jnp.arange(hist.shape[0], dtype=jnp.float32)
    return jnp.sum(hist * (gammaln(a + c) - gammaln(a)))


def _ibp_hyper(k_mass, k_conc, sampled, names, prior, counts, n_features, n_customers, mass, conc, disc,
               n_max: int, cfg: Config):
    """One update of an IBP's mass and concentration (eqs. 43-44 for the topic IBP, the same for
    the word IBP): the mass by its conjugate Gamma(a + K*, b + H) draw, the concentration by
    random-walk MH on log(conc + disc); each only when its name is in ``sampled``."""
    if names[0] in sampled:
        a, b = prior
        n_features = jnp.asarray(n_features, jnp.float32)  # a count (int64 under JAX_ENABLE_X64)
        mass = gamma_draw(k_mass, a + n_features) / (b + ibp_harmonic(n_customers, conc, disc, n_max))
    if names[1] in sampled:
        f = lambda x: ibp_log_likelihood(counts, n_customers, mass, jnp.exp(x) - disc, disc, n_max)
        conc = jnp.exp(mh_log(k_conc, jnp.log(conc + disc), f, cfg.mh_scale, cfg.mh_hyper_steps)) - disc
    return mass, conc


def _by_tokens(tokens, table) -> bool:
    """Whether a count histogram is cheaper over the tokens than over the table's cells (the two
    give the same histogram; the tokens' way gathers an ``(N,)`` temporary, the table's reads
    ``D x K_max`` or ``V x K_max`` cells)."""
    return tokens is not None and table.size > tokens.word.shape[0]


def hyper_step(key, state: State, cfg: Config, tokens=None) -> State:
    """Sec. 4.5: α, β (39)-(40) by slice sampling, η, γ conjugate Gamma, δ, ξ by MH on (41)-(43)."""
    ks = jax.random.split(key, 6)
    s = cfg.sample
    live = jnp.any(state.theta_bar, axis=0)
    k_star = jnp.sum(live)
    if "alpha" in s:
        # eq. (23) from the histogram of the counts n_kd: O(D + max n_kd) per evaluation
        hist = None
        if cfg.max_doc_len:
            hist = (token_count_histogram(state.n_dk[tokens.doc, state.z], cfg.max_doc_len + 1)
                    if _by_tokens(tokens, state.n_dk) else count_histogram(state.n_dk, cfg.max_doc_len + 1))
        # int32 sums (the default, int64 under JAX_ENABLE_X64, would convert the D x K tables)
        m = jnp.sum(state.theta_bar, axis=1, dtype=jnp.int32).astype(jnp.float32)
        n_d = jnp.sum(state.n_dk, axis=1, dtype=jnp.int32).astype(jnp.float32)
        ms = jnp.maximum(m, 1.0)

        def f(x):
            a = jnp.exp(x)
            if hist is None:
                return log_marginal_z(state.n_dk, state.theta_bar, a)
            t1 = jnp.where(n_d > 0, gammaln(ms * a) - gammaln(ms * a + n_d), 0.0)
            return jnp.sum(t1) + loggamma_sum(hist, a)

        state = state._replace(alpha=jnp.exp(slice_log(ks[0], jnp.log(state.alpha), f)))
    if "beta" in s:
        W = cfg.n_words
        if cfg.sparse:
            M = jnp.sum(state.phi_bar, axis=0, dtype=jnp.int32)
        else:
            M = jnp.full((cfg.n_topics,), W, jnp.int32)
        M = jnp.where(live, M, 0)
        hist = None
        if cfg.max_word_count:
            hist = (token_count_histogram(state.n_wk[tokens.word, state.z], cfg.max_word_count + 1)
                    if _by_tokens(tokens, state.n_wk) else count_histogram(state.n_wk, cfg.max_word_count + 1))
        Mf = jnp.maximum(M.astype(jnp.float32), 1.0)
        nk = state.n_k.astype(jnp.float32)

        def f(x):  # eq. (24)
            b = jnp.exp(x)
            if hist is None:
                return log_marginal_w(state.n_wk, state.n_k, M, b)
            t1 = jnp.where(state.n_k > 0, gammaln(Mf * b) - gammaln(Mf * b + nk), 0.0)
            return jnp.sum(t1) + loggamma_sum(hist, b)

        state = state._replace(beta=jnp.exp(slice_log(ks[1], jnp.log(state.beta), f)))
    if cfg.focused:  # topic IBP: customers are the documents, features the topics
        c_k = jnp.sum(state.theta_bar, axis=0, dtype=jnp.int32)
        mass, conc = _ibp_hyper(ks[2], ks[3], s, ("eta", "delta"), cfg.eta_prior, c_k, k_star, cfg.n_docs,
                                state.eta, state.delta, cfg.sigma, cfg.n_docs, cfg)
        state = state._replace(eta=mass, delta=conc)
    if cfg.sparse:
        # word IBP: customers are the K* live topics, features the words (observed and phantom)
        c_v = jnp.sum(state.phi_bar & live[None, :], axis=1, dtype=jnp.int32)
        mass, conc = _ibp_hyper(ks[4], ks[5], s, ("gamma", "xi"), cfg.gamma_prior, c_v, jnp.sum(c_v > 0), k_star,
                                state.gamma, state.xi, cfg.zeta, cfg.n_topics, cfg)
        state = state._replace(gamma=mass, xi=conc)
    return state


@partial(jit, static_argnames=("cfg",))
def _hyper_jit(state: State, key, cfg: Config, tokens) -> State:
    return hyper_step(key, state, cfg, tokens)


def hyper_update(state: State, key, cfg: Config, tokens=None) -> State:
    """The hyperparameter step of Algorithm 1 (sec. 4.5), for the names in ``cfg.sample``.  With
    ``tokens`` the count histograms of the α, β updates are taken over the tokens (O(N)) where
    that is cheaper than over the count table (more cells than tokens)."""
    return _hyper_jit(state, key, canonical(cfg), tokens) if cfg.sample else state


