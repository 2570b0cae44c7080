"""Evaluation (sec. 5.1): posterior means (46)-(47) of one sample and their running averages, the
training log-likelihood, the collapsed log-likelihood of a sample (the estimator's objective),
the topic proportions of a document without tokens, document completion of held-out documents,
and the enumerated LDA posterior used by the tests."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core.numerics import compensated_sum

from .ibp import log_ratio_add_empty, topic_prior_logodds, word_prior_logodds
from .masks import diagonal_scan
from .draw import inverse_cdf
from .hyper import _log_rising, _tail, count_histogram
from .parallel import denominator
from .state import Config, State, canonical
from topicjax.core.compiled import jit

__all__ = ["Averages", "sample_means", "add_sample", "accumulate", "loglik_tokens", "collapsed_loglik", "no_evidence",
           "gibbs_fold_in", "enumerate_lda_posterior"]


class Averages(NamedTuple):
    phi_sum: jax.Array  # (W, K)
    theta_sum: jax.Array  # (D, K)
    n: jax.Array  # (K,) samples in the current lifetime of each slot


def _sample_means(state: State, cfg: Config, n_d=None):
    """Posterior means of one sample: φ (47), Rao-Blackwellised where n_vk = 0, and θ (46).
    ``n_d``: the documents' lengths (:attr:`Tokens.n_d`), else summed from n_kd."""
    W = cfg.n_words
    # without sampled topic masks every slot is a topic of every document (Θ̄ all on)
    live = jnp.any(state.theta_bar, axis=0) if cfg.focused else jnp.ones((cfg.n_topics,), bool)
    beta, alpha = state.beta, state.alpha
    n_wk = state.n_wk[:W].astype(jnp.float32)
    n_k = state.n_k.astype(jnp.float32)
    if cfg.sparse:
        pb = state.phi_bar
        # int32 sums (the default, int64 under JAX_ENABLE_X64, would convert the V x K masks)
        M = jnp.sum(pb, axis=0, dtype=jnp.int32)
        c_v = jnp.sum(pb & live[None, :], axis=1, dtype=jnp.int32)[:W]
        pbW = pb[:W]
        m_o = M[None, :] - pbW.astype(jnp.int32)
        c_o = c_v[:, None] - pbW.astype(jnp.int32)
        k_star = jnp.sum(live)
        # eq. (31)-(34) split by topic (likelihood part, m_o = M or M - 1) and by c_o (prior part):
        # no log-gamma per entry
        lr_off = log_ratio_add_empty(M, state.n_k, beta)
        lr_on = log_ratio_add_empty(M - 1, state.n_k, beta)
        prior = word_prior_logodds(jnp.arange(cfg.n_topics + 1), k_star, state.gamma, state.xi, cfg.zeta, W,
                                   cfg.vocabulary == "finite")
        lo = jnp.where(pbW, lr_on[None, :], lr_off[None, :]) + prior[jnp.maximum(c_o, 0)]
        p_on = jnp.where(state.n_wk[:W] > 0, 1.0, jax.nn.sigmoid(lo))
        phi = jnp.where(state.n_wk[:W] > 0, (beta + n_wk) / (M * beta + n_k),
                        p_on * beta / ((m_o + 1) * beta + n_k))
    else:
        phi = (beta + n_wk) / (W * beta + n_k)
    if n_d is None:
        n_d = jnp.sum(state.n_dk, axis=1, dtype=jnp.int32)
    n_d = n_d.astype(jnp.float32)[:, None]
    if cfg.focused:
        tb = state.theta_bar
        m_d = jnp.sum(tb, axis=1, keepdims=True, dtype=jnp.int32).astype(jnp.float32)
        theta = jnp.where(tb, alpha + state.n_dk, 0.0) / (m_d * alpha + n_d)
    else:
        theta = (alpha + state.n_dk) / (cfg.n_topics * alpha + n_d)
    return phi, theta, live


def sample_means(state: State, cfg: Config):
    """(φ (W x K), θ (D x K), live (K,)) of one sample: eq. (47) (Rao-Blackwellised) and (46)."""
    return _means_jit(state, _means_cfg(cfg))


@partial(jit, static_argnames=("cfg",))
def _means_jit(state, cfg):
    return _sample_means(state, cfg)


@jit
def add_sample(avg: Averages, phi, theta, live) -> Averages:
    return Averages(
        jnp.where(live[None, :], avg.phi_sum + phi, 0.0),
        jnp.where(live[None, :], avg.theta_sum + theta, 0.0),
        jnp.where(live, avg.n + 1, 0),
    )


def _means_cfg(cfg: Config) -> Config:
    """``cfg`` with what the posterior means do not read normalised (fewer compilations)."""
    return replace(canonical(cfg), sample=(), eta_prior=(1.0, 1.0), gamma_prior=(1.0, 1.0), max_doc_len=0,
                   max_word_count=0)


def accumulate_sample(avg: Averages, state: State, cfg: Config, n_d=None) -> Averages:
    """:func:`add_sample` of :func:`sample_means` in one compiled program that writes the sums in
    place (``avg`` is donated: it must not be used afterwards) and does not hold the means: one
    pass over the (W + D) x K_max cells.  ``n_d``: the documents' lengths (``tokens.n_d``)."""
    return _accumulate_jit(avg, state, n_d, _means_cfg(cfg))


@partial(jit, static_argnames=("cfg",), donate_argnums=0)
def _accumulate_jit(avg, state, n_d, cfg):
    return add_sample(avg, *_sample_means(state, cfg, n_d))


def accumulate(avg: Averages | None, state: State, cfg: Config) -> Averages:
    """Add the sample's posterior means; a slot whose topic is dead restarts from zero."""
    if avg is None:
        K = cfg.n_topics
        avg = Averages(jnp.zeros((cfg.n_words, K), jnp.float32), jnp.zeros((cfg.n_docs, K), jnp.float32),
                       jnp.zeros((K,), jnp.int32))
    return add_sample(avg, *sample_means(state, cfg))


#: tokens per block of the blockwise evaluations: temporaries of BLOCK x K floats, small enough to
#: stay in cache (the training likelihood on KOS at K = 50: 34 ms of CPU time with 65,536 tokens per
#: block, 17 ms with 8,192)
BLOCK = 1 << 13


@jit
def loglik_tokens(phi, theta, doc, word):
    """Σ n_dw log Σ_k φ_wk θ_dk (eq. 4 of ARTM, the training log-likelihood of a point estimate)
    summed over the token stream (a token is an entry of count 1: Σ_i log Σ_k φ_{w_i k} θ_{d_i k}),
    ``phi`` (W x K), ``theta`` (D x K): the fit's own ``doc`` / ``word`` arrays, so no copy of the
    corpus's entries is held for it (12 bytes per non-zero, 0.75 GB at NYTimes size), and one block
    of :data:`BLOCK` x K products at a time, so memory does not grow with tokens x K (at NYTimes
    size the unblocked product wanted 60 GB).  Blocks are sliced out of the stream (the last shifted
    back to fit, counting only its new tokens); block totals are summed with compensation."""
    hi, lo = _loglik_parts(phi, theta, doc, word)
    return hi + lo


def _loglik_parts(phi, theta, doc, word):
    """The total of :func:`loglik_tokens` as a double-float ``(hi, lo)`` (traced)."""
    return compensated_sum(_loglik_totals(phi, theta, doc, word))


def _loglik_blocks(n_tokens: int) -> int:
    """The number of blocks of :func:`_loglik_totals` over ``n_tokens`` tokens."""
    return -(-n_tokens // max(1, min(BLOCK, n_tokens)))


def _loglik_totals(phi, theta, doc, word):
    """The block totals of :func:`loglik_tokens`, float32 ``(_loglik_blocks(N),)`` (traced): a
    caller that sums them on the host in float64 compiles no compensated summation tree (its
    pairwise levels were most of the evaluation's compile time)."""
    N = doc.shape[0]
    blk = max(1, min(BLOCK, N))
    n_blocks = _loglik_blocks(N)

    def body(i, totals):
        start = i * blk
        s0 = jnp.minimum(start, N - blk)
        d = jax.lax.dynamic_slice_in_dim(doc, s0, blk)
        w = jax.lax.dynamic_slice_in_dim(word, s0, blk)
        p = jnp.sum(phi[w] * theta[d], axis=1)
        new = (s0 + jnp.arange(blk)) >= start
        return totals.at[i].set(jnp.sum(jnp.where(new, jnp.log(jnp.maximum(p, 1e-30)), 0.0)))

    return jax.lax.fori_loop(0, n_blocks, body, jnp.zeros((n_blocks,), phi.dtype))


def collapsed_loglik(state: State, cfg: Config) -> float:
    """ln p(w | z, Φ̄, β) of one sample, float64: eq. (24) with Φ integrated out,

        Σ_k [ln Γ(B_k) − ln Γ(B_k + n_k)] + Σ_{v,k: n_vk > 0} [ln Γ(β + n_vk) − ln Γ(β)],

    B_k = φ̄_·k β (LIDA, SSTM) or W β (LDA, FTM): the Dirichlet-multinomial whose predictive is the
    word factor (β + n_vk)/(B_k + n_k) of the sampler's conditional (35)-(38).  Topics without
    tokens contribute 0.  The objective of :class:`~topicjax.lida.LIDA`'s ``history_`` (the
    monitor of Griffiths & Steyvers 2004), no (tokens x topics) array: the second sum from the
    histogram of the counts n_vk (:func:`collapsed_terms`; O(W K) per cell otherwise, when
    ``cfg.max_word_count`` is 0), its float32 terms totalled on the host in float64."""
    terms = _collapsed_jit(state, replace(_means_cfg(cfg), max_word_count=cfg.max_word_count))
    return float(np.sum(np.asarray(terms, np.float64)))


def collapsed_terms(state: State, cfg: Config, h_wk=None):
    """The terms of :func:`collapsed_loglik` (traced): with ``h_wk``, the count histogram of n_vk
    (:func:`~topicjax.lida.hyper.histograms`), the K topic terms and, since
    ln Γ(β + n) − ln Γ(β) = Σ_{j<n} ln(β + j), the terms t_j ln(β + j) with t_j the number of cells
    holding more than j tokens (O(K + max n_vk)); without it, the per-topic sums over the cells."""
    den = denominator(state, cfg, state.phi_bar)
    n_k = state.n_k.astype(jnp.float32)
    beta = jnp.asarray(state.beta, jnp.float32)
    g = jax.scipy.special.gammaln
    norm = jnp.where(state.n_k > 0, -_log_rising(den, n_k), 0.0)
    if h_wk is None:
        words = jnp.sum(jnp.where(state.n_wk > 0, g(beta + state.n_wk.astype(jnp.float32)) - g(beta), 0.0), axis=0)
        return jnp.concatenate([norm, words])
    tail = _tail(h_wk)
    j = jnp.arange(tail.shape[0], dtype=jnp.float32)
    return jnp.concatenate([norm, tail.astype(jnp.float32) * jnp.log(beta + j)])


@partial(jit, static_argnames=("cfg",))
def _collapsed_jit(state: State, cfg: Config):
    h_wk = count_histogram(state.n_wk, cfg.max_word_count + 1) if cfg.max_word_count else None
    return collapsed_terms(state, cfg, h_wk)


def no_evidence(doc_freq, n_docs: int, delta: float, sigma: float, focused: bool) -> np.ndarray:
    """Topic proportions of a document without tokens, float64 ``(T,)``.

    LDA, SSTM (every topic in every document): θ = α / (T α), uniform.  FTM, LIDA: what the
    document-completion sampler (:func:`gibbs_fold_in`) averages for such a document: with no tokens
    the topics are independent, θ̄_k ~ Bernoulli(p_k), p_k = (c_k − σ)/(D + δ) (eq. 29 with the
    D training documents as the other customers, c_k of them using topic k, no likelihood term),
    and θ_k = θ̄_k / Σ_j θ̄_j (eq. 46 with n_d = 0), so

        θ_k = E[θ̄_k / S | S ≥ 1] = p_k ∫_0^1 Π_{j≠k} (1 − p_j + p_j t) dt / P(S ≥ 1),

    using 1/(1 + s) = ∫_0^1 t^s dt.  The integrand is a polynomial of degree T − 1, integrated
    exactly by ⌈T/2⌉-point Gauss-Legendre (in log space).  (S = 0, no topic at all, has no θ: the
    proportions are conditioned on at least one topic.)

    >>> np.round(no_evidence([2, 2], 4, 1.0, 0.0, True), 3).tolist()  # symmetric: uniform
    [0.5, 0.5]
    """
    c = np.asarray(doc_freq, np.float64)
    T = c.size
    if not focused or T == 1:
        return np.full(T, 1.0 / T)
    p = np.clip((c - sigma) / (n_docs + delta), 1e-300, 1.0)
    import scipy.special  # here, not with the sampler: 70 ms of CPU in every process's first LIDA

    # scipy's nodes: O(T) (numpy's leggauss solves an eigenproblem, 3 s at T = 3000), as accurate
    x, w = scipy.special.roots_legendre(max(1, -(-T // 2)))
    t, w = (x + 1) / 2, w / 2  # nodes and weights on [0, 1]
    log_f = np.log1p(p[:, None] * (t[None, :] - 1))  # (T, nodes): ln(1 − p_j + p_j t)
    total = log_f.sum(0)
    shift = total.max()
    vals = p * (np.exp(total[None, :] - log_f - shift) @ w)  # E[θ̄_k / S; S ≥ 1] · e^{-shift}
    return vals / vals.sum()


# ============================================================================ document completion
@partial(jit, static_argnames=("n_sweeps", "burn_in", "focused"))
def gibbs_fold_in(key, phi, c_train, d_train, alpha, eta, delta, sigma, doc, word, n_d, n_docs_arr,
                   n_sweeps: int, burn_in: int, focused: bool):
    """Sample the topics of new documents with Φ fixed (exact sequential sweeps) and return the
    average of θ (46) over the sweeps after ``burn_in`` (T x D).  With topic masks, θ̄ of the new
    documents is sampled by (29) with the training documents as the other customers."""
    D = n_docs_arr.shape[0]
    K = phi.shape[1]
    # float32 like the chain, also when the hyperparameters come as host floats under JAX_ENABLE_X64
    d_train, alpha, eta, delta, sigma = (jnp.asarray(x, jnp.float32) for x in (d_train, alpha, eta, delta, sigma))
    k0, key = jax.random.split(key)
    # initial assignments from p(k | w) ∝ φ_wk (every word has φ_w· > 0), a block of tokens at a
    # time (phi[word] of all tokens at once is tokens x K)
    u0 = jax.random.uniform(k0, word.shape, jnp.float32)
    N = word.shape[0]
    n_blk = max(1, -(-N // BLOCK))
    pad = n_blk * BLOCK - N
    z = jax.lax.map(lambda a: inverse_cdf(phi[a[0]], a[1]),
                    (jnp.pad(word, (0, pad)).reshape(n_blk, BLOCK), jnp.pad(u0, (0, pad)).reshape(n_blk, BLOCK)))
    z = z.reshape(-1)[:N]
    n_dk = jnp.zeros((D, K), jnp.int32).at[doc, z].add(1)
    tb = (n_dk > 0) if focused else jnp.ones((D, K), bool)
    c_train = c_train.astype(jnp.float32)

    def one(carry, i):
        z, n_dk, tb, acc = carry
        k = jax.random.fold_in(key, i)
        ka, kb = jax.random.split(k)
        if focused:
            m_sum = jnp.sum(tb, axis=1, dtype=jnp.int32)

            prior = topic_prior_logodds(c_train, d_train, eta, delta, sigma)  # by topic: training documents
            tb, _, _ = diagonal_scan(
                ka, tb, m_sum, jnp.sum(tb, 0, dtype=jnp.int32), lambda r, m: log_ratio_add_empty(m, n_d[r], alpha),
                lambda cols, c_o: prior[cols], lambda r, c, m_o: n_dk[r, c] > 0, lambda r, c, ct: c_train[c] > 0)
        u = jax.random.uniform(kb, z.shape, jnp.float32)

        def body(n_dk, xs):
            d, v, k0, ui = xs
            n_dk = n_dk.at[d, k0].add(-1)
            p = (alpha + n_dk[d]) * phi[v]
            if focused:
                p = jnp.where(tb[d], p, 0.0)
            knew = inverse_cdf(p, ui)
            return n_dk.at[d, knew].add(1), knew

        n_dk, z = jax.lax.scan(body, n_dk, (doc, word, z, u))
        m_d = jnp.sum(tb, axis=1, keepdims=True).astype(jnp.float32)
        theta = jnp.where(tb, alpha + n_dk, 0.0) / (m_d * alpha + n_d[:, None])
        acc = acc + jnp.where(i >= burn_in, theta, 0.0)
        return (z, n_dk, tb, acc), None

    (z, n_dk, tb, acc), _ = jax.lax.scan(one, (z, n_dk, tb, jnp.zeros((D, K), jnp.float32)),
                                         jnp.arange(n_sweeps))
    theta = acc / (n_sweeps - burn_in)
    return (theta / jnp.sum(theta, axis=1, keepdims=True)).T


# ============================================================================ enumeration (tests)
def enumerate_lda_posterior(doc, word, n_topics, n_words, alpha, beta):
    """Exact LDA posterior p(z | w) ∝ Π_d Π_k Γ(α+n_kd)/Γ(Kα+n_d) · Π_k Π_v Γ(β+n_vk)/Γ(Wβ+n_k)
    (the product of (23) and (24) with all masks on) over all K^N assignments, in float64 numpy.
    Returns (assignments (K^N, N), probabilities)."""
    from scipy.special import gammaln as g

    doc, word = np.asarray(doc), np.asarray(word)
    N, K = doc.size, n_topics
    D = int(doc.max()) + 1
    Z = np.array(np.meshgrid(*[np.arange(K)] * N, indexing="ij")).reshape(N, -1).T
    logp = np.empty(len(Z))
    for i, z in enumerate(Z):
        ndk = np.zeros((D, K))
        nwk = np.zeros((n_words, K))
        np.add.at(ndk, (doc, z), 1)
        np.add.at(nwk, (word, z), 1)
        logp[i] = (g(alpha + ndk).sum() - g(K * alpha + ndk.sum(1)).sum()
                   + g(beta + nwk).sum() - g(n_words * beta + nwk.sum(0)).sum())
    p = np.exp(logp - logp.max())
    return Z, p / p.sum()

