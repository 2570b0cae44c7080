"""Hand-written float64 references for the distribution tests: the posterior p(z | w, Θ̄, Φ̄) of
eq. (23)-(24) and the transition kernels of the token sweeps, enumerated over every assignment of a
tiny corpus.  Written from the equations (35)-(38) and the sweep definitions, with loops and no
code of the package."""

from __future__ import annotations

import itertools

import numpy as np
from scipy.special import gammaln as g


def allowed_topics(doc, word, theta_bar, phi_bar):
    """Per token, the topics k with θ̄_kd φ̄_vk = 1 (eq. 35)."""
    return [np.flatnonzero(theta_bar[d] & phi_bar[v]) for d, v in zip(doc, word)]


def states(doc, word, theta_bar, phi_bar):
    """Every assignment z with z_i in the token's allowed topics, as an (S, N) array."""
    return np.array(list(itertools.product(*allowed_topics(doc, word, theta_bar, phi_bar))))


def log_posterior(Z, doc, word, theta_bar, phi_bar, alpha, beta):
    """log p(z | w, Θ̄, Φ̄) + const: (23) times (24) with the masks fixed (M_k = active words of k)."""
    D, K = theta_bar.shape
    V = phi_bar.shape[0]
    M = phi_bar.sum(0)
    m = theta_bar.sum(1)
    out = np.empty(len(Z))
    for s, z in enumerate(Z):
        ndk = np.zeros((D, K))
        nvk = np.zeros((V, K))
        np.add.at(ndk, (doc, z), 1)
        np.add.at(nvk, (word, z), 1)
        lp = np.sum(g(m * alpha) - g(m * alpha + ndk.sum(1)))
        lp += np.sum(np.where(theta_bar, g(alpha + ndk) - g(alpha), 0.0))
        lp += np.sum(g(M * beta) - g(M * beta + nvk.sum(0)))
        lp += np.sum(np.where(phi_bar, g(beta + nvk) - g(beta), 0.0))
        out[s] = lp
    return out


def posterior(Z, *args):
    lp = log_posterior(Z, *args)
    p = np.exp(lp - lp.max())
    return p / p.sum()


def _conditional(k_allowed, d, v, ndk, nvk, nk, alpha, beta, M):
    """Eq. (35) over the allowed topics, from counts that exclude the token."""
    p = np.array([(alpha + ndk[d, k]) * (beta + nvk[v, k]) / (M[k] * beta + nk[k]) for k in k_allowed])
    return p / p.sum()


def sweep_kernel(Z, doc, word, theta_bar, phi_bar, alpha, beta, blocks, stale=False):
    """Transition matrix T[s, s'] of one sweep over the states ``Z`` (every allowed assignment, as
    :func:`states` lists them, in any order).

    ``blocks``: lists of documents, visited in order.  Parallel sweep: the documents of a block are
    resampled independently, each token in order from the counts at the start of the block plus
    its own document's changes so far.  ``stale=True``: every token of a block is drawn from the
    counts at the start of the block (minus itself) and nothing else.

    The documents of a block move independently given the block's start, so a row of the block's
    matrix is the product of the documents' outcome probabilities: each outcome of each document is
    enumerated token by token below, and their products are placed at once (a state's row is
    found from the mixed-radix number of its tokens' positions in their allowed lists)."""
    D, K = theta_bar.shape
    V = phi_bar.shape[0]
    M = phi_bar.sum(0)
    allowed = allowed_topics(doc, word, theta_bar, phi_bar)
    # state -> row: the digits of a state are its tokens' positions in their allowed lists
    radix = np.array([len(a) for a in allowed])
    stride = np.concatenate([np.cumprod(radix[::-1])[::-1][1:], [1]])
    digit = np.full((len(doc), K), -1)
    for i, a in enumerate(allowed):
        digit[i, a] = np.arange(len(a))
    code = lambda z: int(np.sum(digit[np.arange(len(z)), z] * stride))
    row_of = np.full(int(np.prod(radix)), -1)
    row_of[[code(z) for z in Z]] = np.arange(len(Z))
    assert (row_of >= 0).all(), "Z must hold every allowed assignment"
    tokens_of = [np.flatnonzero(doc == d) for d in range(D)]
    T = None
    for blk in blocks:
        Tb = np.zeros((len(Z), len(Z)))
        for s, z in enumerate(Z):
            ndk0 = np.zeros((D, K)); nvk0 = np.zeros((V, K)); nk0 = np.zeros(K)
            np.add.at(ndk0, (doc, z), 1); np.add.at(nvk0, (word, z), 1); np.add.at(nk0, z, 1)
            base = code(z)
            # per document of the block: its new assignments' codes and probabilities
            codes, probs = [], []
            for d in blk:
                toks = tokens_of[d]
                base -= int(np.sum(digit[toks, z[toks]] * stride[toks]))
                c_d, p_d = [], []
                for new in itertools.product(*[allowed[i] for i in toks]):
                    ndk, nvk, nk = ndk0.copy(), nvk0.copy(), nk0.copy()
                    prob = 1.0
                    for i, k1 in zip(toks, new):
                        k0 = z[i]
                        ndk[d, k0] -= 1; nvk[word[i], k0] -= 1; nk[k0] -= 1
                        if stale:
                            c = _conditional(allowed[i], d, word[i], ndk, nvk, nk, alpha, beta, M)
                            ndk[d, k0] += 1; nvk[word[i], k0] += 1; nk[k0] += 1
                        else:
                            c = _conditional(allowed[i], d, word[i], ndk, nvk, nk, alpha, beta, M)
                            ndk[d, k1] += 1; nvk[word[i], k1] += 1; nk[k1] += 1
                        prob *= c[list(allowed[i]).index(k1)]
                    c_d.append(int(np.sum(digit[toks, list(new)] * stride[toks])))
                    p_d.append(prob)
                codes.append(np.array(c_d))
                probs.append(np.array(p_d))
            # every combination of the documents' outcomes: codes add up, probabilities multiply
            c_all, p_all = np.array([base]), np.array([1.0])
            for c_d, p_d in zip(codes, probs):
                c_all = (c_all[:, None] + c_d[None, :]).ravel()
                p_all = (p_all[:, None] * p_d[None, :]).ravel()
            np.add.at(Tb[s], row_of[c_all], p_all)
        T = Tb if T is None else T @ Tb
    return T


def after_sweeps(p0, T, n_sweeps):
    """The distribution ``p0`` T^n_sweeps (vector-matrix products)."""
    p = np.asarray(p0, float)
    for _ in range(n_sweeps):
        p = p @ T
    return p


def stationary(T):
    """The stationary distribution π of the transition matrix ``T`` (π T = π, Σ π = 1), from one
    linear solve: the equations (T^T − I) π = 0 with one of them (redundant: the rows of T sum to
    one) replaced by Σ π = 1.  The kernels here are irreducible (every conditional is positive on
    its allowed topics), so π is unique and the system is non-singular."""
    A = T.T - np.eye(len(T))
    A[-1] = 1.0
    b = np.zeros(len(T))
    b[-1] = 1.0
    return np.linalg.solve(A, b)


def total_variation(p, q):
    return 0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum()
