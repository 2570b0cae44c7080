"""A fused, compiled reference E-step for the benchmark (never imported by the package).

One pass over the non-zeros of each document: for a document ``d`` with topic row ``θ_d`` and
each of its words ``w`` (count ``n_dw``)

    p = Σ_t φ_wt θ_td,   r = n_dw / p,   g_θ[d] += r φ_w,   g_φ[w] += r θ_d,   L += n_dw log p

which is ARTM eq. 4 and the gradients of eq. 7-8 (n_wt = φ_wt g_φ[w, t], n_td = θ_td g_θ[d, t]).
Documents are split into one contiguous block per thread (``numba.prange``); each thread owns a
private ``g_φ`` slab (the documents of two threads share words, so a shared ``g_φ`` would race),
and the slabs are summed at the end.  This is what a hand-written C++ kernel such as BigARTM's
does per pass; :mod:`experiments.bench_em` times our JAX pass against it at the same thread count.

Usage::

    from numba_reference import NumbaEStep
    k = NumbaEStep(doc_offsets, word_ids, counts, n_words, n_threads=2)
    loglik, g_phi, g_theta = k(phi, theta)      # g_theta is (D, T)
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True, cache=False)
def _estep(phi, theta_t, offsets, words, counts, bounds, g_phi_slabs, g_theta, ll_parts):
    n_blocks = bounds.size - 1
    T = phi.shape[1]
    for b in numba.prange(n_blocks):
        g_phi = g_phi_slabs[b]
        g_phi[:, :] = 0.0
        ll = 0.0
        for d in range(bounds[b], bounds[b + 1]):
            th = theta_t[d]
            gt = g_theta[d]
            for t in range(T):
                gt[t] = 0.0
            for i in range(offsets[d], offsets[d + 1]):
                w = words[i]
                row = phi[w]
                p = 0.0
                for t in range(T):
                    p += row[t] * th[t]
                if p < 1e-30:
                    p = 1e-30
                n = counts[i]
                ll += n * np.log(p)
                r = n / p
                gp = g_phi[w]
                for t in range(T):
                    gt[t] += r * row[t]
                    gp[t] += r * th[t]
        ll_parts[b] = ll


@numba.njit(parallel=True)
def _sum_slabs(slabs, out):
    W = out.shape[0]
    for w in numba.prange(W):
        for k in range(slabs.shape[0]):
            out[w] += slabs[k, w]


@numba.njit(parallel=True)
def _normalize_rows_of_products(a, g):
    """In place: g[i] = a[i] * g[i] / Σ_t a[i, t] g[i, t] (Θ's M-step on (D, T) rows, eq. 8)."""
    for i in numba.prange(a.shape[0]):
        s = 0.0
        for t in range(a.shape[1]):
            g[i, t] *= a[i, t]
            s += g[i, t]
        if s > 0:
            for t in range(a.shape[1]):
                g[i, t] /= s


@numba.njit(parallel=True)
def _normalize_columns_of_products(a, g, n_blocks):
    """In place: g[:, t] = a[:, t] g[:, t] / Σ_w a[w, t] g[w, t] (Φ's M-step, eq. 7)."""
    W, T = a.shape
    sums = np.zeros((n_blocks, T))
    step = -(-W // n_blocks)
    for b in numba.prange(n_blocks):
        for w in range(b * step, min(W, (b + 1) * step)):
            for t in range(T):
                g[w, t] *= a[w, t]
                sums[b, t] += g[w, t]
    tot = sums.sum(axis=0)
    for w in numba.prange(W):
        for t in range(T):
            if tot[t] > 0:
                g[w, t] /= tot[t]


class NumbaEStep:
    """Callable fused E-step over a document-sorted corpus (CSR layout), ``n_threads`` threads."""

    def __init__(self, doc_offsets, word_ids, counts, n_words, n_threads=None, dtype=np.float32):
        self.offsets = np.asarray(doc_offsets, np.int64)
        self.words = np.asarray(word_ids, np.int64)
        self.counts = np.asarray(counts, dtype)
        self.n_words = int(n_words)
        self.n_threads = int(n_threads or numba.config.NUMBA_NUM_THREADS)
        self.dtype = dtype
        D = self.offsets.size - 1
        # Blocks of (about) equal numbers of non-zeros, one per thread.
        targets = np.linspace(0, self.offsets[-1], self.n_threads + 1)
        self.bounds = np.searchsorted(self.offsets, targets).astype(np.int64)
        self.bounds[0], self.bounds[-1] = 0, D
        self._slabs = None

    def __call__(self, phi, theta):
        numba.set_num_threads(self.n_threads)
        phi = np.ascontiguousarray(phi, self.dtype)
        theta_t = np.ascontiguousarray(np.asarray(theta, self.dtype).T)
        W, T = phi.shape
        if self._slabs is None or self._slabs.shape[2] != T:
            self._slabs = np.empty((self.n_threads, W, T), self.dtype)
        g_theta = np.empty_like(theta_t)
        ll_parts = np.zeros(self.n_threads, np.float64)
        _estep(phi, theta_t, self.offsets, self.words, self.counts, self.bounds, self._slabs, g_theta, ll_parts)
        g_phi = np.zeros((W, T), self.dtype)
        _sum_slabs(self._slabs, g_phi)
        return float(ll_parts.sum()), g_phi, g_theta


    def em_pass(self, phi, theta_t):
        """One PLSA EM iteration (ARTM eq. 6-8) on Φ (W, T) and Θᵀ (D, T): returns
        ``(loglik, new Φ, new Θᵀ)``; the M-step runs in place on the gradient buffers."""
        numba.set_num_threads(self.n_threads)
        ll, g_phi, g_theta = self(phi, theta_t.T)
        _normalize_columns_of_products(np.asarray(phi, self.dtype), g_phi, self.n_threads)
        _normalize_rows_of_products(np.asarray(theta_t, self.dtype), g_theta)
        return ll, g_phi, g_theta


if __name__ == "__main__":  # a self-check against a dense numpy computation
    rng = np.random.default_rng(0)
    D, W, T = 30, 40, 7
    dense = rng.poisson(0.3, (D, W))
    dense[:, 0] += 1
    d, w = np.nonzero(dense)
    off = np.concatenate([[0], np.cumsum(np.bincount(d, minlength=D))])
    phi = rng.random((W, T)); phi /= phi.sum(0)
    theta = rng.random((T, D)); theta /= theta.sum(0)
    ll, gp, gt = NumbaEStep(off, w, dense[d, w], W, 2, np.float64)(phi, theta)
    P = phi @ theta
    R = dense.T / P
    assert np.isclose(ll, np.sum(dense.T * np.log(P)))
    assert np.allclose(gp, R @ theta.T) and np.allclose(gt, (phi.T @ R).T)
    _, phi2, theta2_t = NumbaEStep(off, w, dense[d, w], W, 2, np.float64).em_pass(phi, theta.T)
    assert np.allclose(phi2, phi * (R @ theta.T) / (phi * (R @ theta.T)).sum(0))
    assert np.allclose(theta2_t.T, theta * (phi.T @ R) / (theta * (phi.T @ R)).sum(0))
    print("numba reference agrees with numpy")
