"""Hyperparameter sampling (sec. 4.5): α and β by slice sampling their exact conditionals (39)-(40),
η and γ by their conjugate Gamma updates under the IBP likelihood (43), δ and ξ by random-walk
Metropolis-Hastings on log(δ + σ) (log(ξ + ζ)); σ and ζ stay fixed (sec. 5.2 recommends a grid)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from . import kernel
from .ibp import ibp_harmonic, ibp_log_likelihood, log_marginal_w, log_marginal_z
from .state import TINY, Config, State, canonical
from topicjax.core.compiled import jit

__all__ = ["slice_log", "gamma_draw", "mh_log", "count_histogram", "token_count_histogram", "loggamma_sum", "hyper_step", "hyper_update"]


def slice_log(key, x0, logf, w=0.7, max_out=8, max_in=25):
    """One univariate slice-sampling update (Neal 2003): stepping out, then shrinkage, bounded.

    Written as a single ``while_loop`` whose phase (-1: the slice's height from ``logf(x0)``, 0: step
    out left, 1: step out right, 2: shrink) is part of the carry, so that ``logf`` is traced once
    (compile time: β's conditional holds log-gamma functions, and a LIDA fit's post-sweep program
    compiled two copies of each sampler's before)."""
    # all random numbers drawn up front: RNG calls inside loop bodies are costly to compile
    u = jax.random.uniform(key, (2 + 2 * max_out + max_in,), jnp.float32, minval=1e-7)
    L0 = x0 - w * u[1]

    def cond(c):
        phase, i, x, L, R, point, done, y = c
        return ~done & (i < 2 * max_out + max_in)

    def body(c):
        phase, i, x, L, R, point, _, y = c
        f = logf(point)
        first = phase < 0  # point is x0: the slice's height, no decision
        y = jnp.where(first, f + jnp.log(u[0]), y)
        inside = (f > y) & ~first
        out0 = (phase == 0) & inside  # left end still inside the slice: step further out
        out1 = (phase == 1) & inside
        accept = (phase == 2) & inside
        reject = (phase == 2) & ~inside  # shrink the interval towards x0
        L = jnp.where(out0, L - w, jnp.where(reject & (point < x0), point, L))
        R = jnp.where(out1, R + w, jnp.where(reject & (point >= x0), point, R))
        x = jnp.where(accept, point, x)
        phase = jnp.where(first, 0,
                          jnp.where(phase == 0, jnp.where(out0 & (i + 1 < max_out), 0, 1),
                                    jnp.where(phase == 1, jnp.where(out1 & (i + 1 < 2 * max_out), 1, 2), 2)))
        phase = phase.astype(jnp.int32)
        prop = L + u[2 + jnp.maximum(i, 0)] * (R - L)
        point = jnp.where(phase == 0, L, jnp.where(phase == 1, R, prop))
        return phase, i + 1, x, L, R, point, accept, y

    # i counts the decisions (from -1: the height's evaluation comes first), as the random numbers
    c0 = (jnp.int32(-1), jnp.int32(-1), x0, L0, L0 + w, x0, jnp.bool_(False), jnp.zeros_like(x0))
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
    ones and result are int64 under JAX_ENABLE_X64); values >= ``length`` are dropped.

    Consecutive values go to separate copies of the histogram (lanes), summed at the end: most
    cells of a count table are 0 (or 1), and XLA's scatter adds one value at a time, each waiting
    for the previous add to the same bin (on KOS, 345,000 cells of n_vk: 1.2 ms in one lane,
    0.6 ms in eight)."""
    values = values.reshape(-1)
    lanes = max(1, min(8, (1 << 20) // max(length, 1)))
    if lanes == 1:
        return jnp.zeros((length,), jnp.int32).at[values].add(1, mode="drop")
    lane = jnp.arange(values.shape[0], dtype=jnp.int32) % lanes
    # out-of-range values land beyond the last lane's bins: dropped
    idx = jnp.where((values >= 0) & (values < length), values * lanes + lane, length * lanes)
    h = jnp.zeros((length * lanes,), jnp.int32).at[idx].add(1, mode="drop")
    return jnp.sum(h.reshape(length, lanes), axis=1, dtype=jnp.int32)


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


def _cell_histogram(table, index, z, length: int, tokens):
    """The histogram of ``table``'s cells (:func:`count_histogram`), over the tokens
    (:func:`token_count_histogram`: ``index`` is the row of every token) where that is cheaper."""
    if _by_tokens(tokens, table):
        K = table.shape[1]
        # a flat gather: one index per token (a 2-D gather builds (N, 2) indices)
        return token_count_histogram(table.reshape(-1)[index * K + z], length)
    return count_histogram(table, length)


def _tail(hist):
    """t[j] = Σ_{c > j} hist[c]: the number of cells holding more than j (int32)."""
    return jnp.flip(jnp.cumsum(jnp.flip(hist.at[0].set(0)), dtype=jnp.int32)) - hist.at[0].set(0)


def _rising_change(tail, a, a0):
    """Σ_cells [log Γ(a + n) − log Γ(a)] − [the same at a0], from the tail counts of the cells'
    counts (:func:`_tail`): log Γ(a + n) − log Γ(a) = Σ_{j<n} log(a + j), so the difference is
    Σ_j t_j log1p((a − a0) / (a0 + j)).  Each term is small near a0, so the float32 sum keeps the
    differences the slice sampler compares (a difference of two totals of ~1e6 would not)."""
    j = jnp.arange(tail.shape[0], dtype=jnp.float32)
    return jnp.sum(tail.astype(jnp.float32) * jnp.log1p((a - a0) / (a0 + j)))


#: from this argument on, :func:`_log_rising` takes Stirling's series (truncation error < 1e-9)
_STIRLING_FROM = 8.0


def _log_rising(x, n):
    """log Γ(x + n) − log Γ(x) for x > 0, n ≥ 0 (float32), to float32's relative precision of the
    result also where the two log-gammas are large: for x ≥ 8 by Stirling's series written as
    (x − ½) log1p(n/x) + n (log(x + n) − 1) + c(x + n) − c(x), c(y) = 1/(12y) − 1/(360y³) +
    1/(1260y⁵) (the difference of two log-gammas of 10^5 would lose 0.01 to rounding: in the
    objective at W β = 10^5, 0.03 per topic, enough for two programs to disagree)."""
    x = jnp.asarray(x, jnp.float32)
    n = jnp.asarray(n, jnp.float32)
    xs = jnp.maximum(x, _STIRLING_FROM)

    def c(y):
        r = 1.0 / y
        r2 = r * r
        return r * (1.0 / 12.0 - r2 * (1.0 / 360.0 - r2 / 1260.0))

    stirling = (xs - 0.5) * jnp.log1p(n / xs) + n * (jnp.log(xs + n) - 1.0) + (c(xs + n) - c(xs))
    small = jnp.maximum(x, 1e-30)
    return jnp.where(x >= _STIRLING_FROM, stirling, gammaln(small + n) - gammaln(small))


def _gamma_ratio_change(scale, n, a, a0):
    """Σ_i [log Γ(s_i a) − log Γ(s_i a + n_i)] − [the same at a0] over the entries with n_i > 0,
    each difference taken entry by entry (no difference of large totals)."""
    s = scale.astype(jnp.float32)
    d = _log_rising(s * a0, n) - _log_rising(s * a, n)
    return jnp.sum(jnp.where(n > 0, d, 0.0))


def histograms(state: State, cfg: Config, tokens=None, *, by_kernel: bool = False):
    """``(h_dk, h_wk)``: the count histograms of n_kd (length ``cfg.max_doc_len + 1``) and n_vk
    (``cfg.max_word_count + 1``), ``None`` where that bound is unknown (0), over the tokens or the
    tables, whichever is fewer (:func:`token_count_histogram`, :func:`count_histogram`), or with
    ``by_kernel`` over the tables by the compiled CPU kernel (:func:`topicjax.lida.kernel.count_histogram`:
    the same histograms, a few times faster than XLA's scatter; the caller checks that the kernel
    runs, ``kernel.sweep_backend(cfg) == "ffi"``)."""
    h_dk = h_wk = None
    if by_kernel:
        if cfg.max_doc_len:
            h_dk = kernel.count_histogram(state.n_dk, cfg.max_doc_len + 1).at[0].set(0)
        if cfg.max_word_count:
            h_wk = kernel.count_histogram(state.n_wk, cfg.max_word_count + 1).at[0].set(0)
        return h_dk, h_wk
    if cfg.max_doc_len:
        doc = None if tokens is None else tokens.doc
        h_dk = _cell_histogram(state.n_dk, doc, state.z, cfg.max_doc_len + 1, tokens)
    if cfg.max_word_count:
        word = None if tokens is None else tokens.word
        h_wk = _cell_histogram(state.n_wk, word, state.z, cfg.max_word_count + 1, tokens)
    return h_dk, h_wk


def _alpha_change(state: State, cfg: Config, h_dk=None, n_d=None):
    """a ↦ log p(z | Θ̄, a) − log p(z | Θ̄, α), eq. (23) as a function of α's candidate (α the
    state's): from the tail counts of n_kd's histogram ``h_dk`` (O(max n_kd) per evaluation; the
    documents' factor over the tail counts of their lengths ``n_d`` where every slot is a topic of
    every document, else document by document), or from the table when ``h_dk`` is ``None``."""
    a0 = state.alpha
    if h_dk is None:
        z0 = log_marginal_z(state.n_dk, state.theta_bar, a0)
        return lambda a: log_marginal_z(state.n_dk, state.theta_bar, a) - z0
    t_dk = _tail(h_dk)
    if n_d is None:  # int32 sums (the default, int64 under JAX_ENABLE_X64, would convert the table)
        n_d = jnp.sum(state.n_dk, axis=1, dtype=jnp.int32)
    if cfg.focused:
        m = jnp.maximum(jnp.sum(state.theta_bar, axis=1, dtype=jnp.int32), 1)
        return lambda a: _gamma_ratio_change(m, n_d, a, a0) + _rising_change(t_dk, a, a0)
    # m_d = K_max for every document: Σ_d [log Γ(K a + n_d) − log Γ(K a)] is a rising sum over
    # the tail counts of the documents' lengths
    t_d = _tail(_bincount32(n_d, h_dk.shape[0]))
    K = float(cfg.n_topics)
    return lambda a: _rising_change(t_dk, a, a0) - _rising_change(t_d, K * a, K * a0)


def _beta_change(state: State, cfg: Config, live, h_wk=None):
    """b ↦ log p(w | z, Φ̄, b) − log p(w | z, Φ̄, β), eq. (24) over the live topics as a function of
    β's candidate: from the tail counts of n_vk's histogram ``h_wk`` (O(K + max n_vk) per
    evaluation), or from the table when ``h_wk`` is ``None``."""
    b0 = state.beta
    if cfg.sparse:
        M = jnp.sum(state.phi_bar, axis=0, dtype=jnp.int32)
    else:
        M = jnp.full((cfg.n_topics,), cfg.n_words, jnp.int32)
    M = jnp.where(live, M, 0)
    if h_wk is None:
        w0 = log_marginal_w(state.n_wk, state.n_k, M, b0)
        return lambda b: log_marginal_w(state.n_wk, state.n_k, M, b) - w0
    t_wk = _tail(h_wk)
    Mc = jnp.maximum(M, 1)
    return lambda b: _gamma_ratio_change(Mc, state.n_k, b, b0) + _rising_change(t_wk, b, b0)


def hyper_step(key, state: State, cfg: Config, tokens=None, hists=None) -> State:
    """Sec. 4.5: α, β (39)-(40) by slice sampling, η, γ conjugate Gamma, δ, ξ by MH on (41)-(43).

    The log conditionals of α (eq. 23) and β (eq. 24) are evaluated as changes from the current
    value (:func:`_alpha_change`, :func:`_beta_change`), from the tail counts of the count
    histograms ``hists = (h_dk, h_wk)`` (:func:`histograms`, taken here when not given; without
    a bound on the counts, ``cfg.max_doc_len`` / ``cfg.max_word_count`` 0, from the tables).
    With ``tokens``, the documents' lengths are ``tokens.n_d``."""
    ks = jax.random.split(key, 6)
    s = cfg.sample
    if hists is None and ("alpha" in s or "beta" in s):
        hists = histograms(state, cfg, tokens)
    h_dk, h_wk = hists if hists is not None else (None, None)
    # every slot is a topic of every document unless Θ̄ is sampled (LDA, SSTM)
    live = jnp.any(state.theta_bar, axis=0) if cfg.focused else jnp.ones((cfg.n_topics,), bool)
    k_star = jnp.sum(live)
    if "alpha" in s:
        f = _alpha_change(state, cfg, h_dk, None if tokens is None else tokens.n_d)
        state = state._replace(alpha=jnp.exp(slice_log(ks[0], jnp.log(state.alpha), lambda x: f(jnp.exp(x)))))
    if "beta" in s:
        f = _beta_change(state, cfg, live, h_wk)
        state = state._replace(beta=jnp.exp(slice_log(ks[1], jnp.log(state.beta), lambda x: f(jnp.exp(x)))))
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


