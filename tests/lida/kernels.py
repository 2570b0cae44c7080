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
    """Transition matrix T[s, s'] of one sweep over the states ``Z``.

    ``blocks``: lists of documents, visited in order.  Parallel sweep: the documents of a block are
    resampled independently, each token in order from the counts at the start of the block plus
    its own document's changes so far.  ``stale=True``: every token of a block is drawn from the
    counts at the start of the block (minus itself) and nothing else."""
    D, K = theta_bar.shape
    V = phi_bar.shape[0]
    M = phi_bar.sum(0)
    allowed = allowed_topics(doc, word, theta_bar, phi_bar)
    index = {tuple(z): i for i, z in enumerate(Z)}
    tokens_of = [np.flatnonzero(doc == d) for d in range(D)]
    T = np.eye(len(Z))
    for blk in blocks:
        Tb = np.zeros((len(Z), len(Z)))
        for s, z in enumerate(Z):
            ndk0 = np.zeros((D, K)); nvk0 = np.zeros((V, K)); nk0 = np.zeros(K)
            np.add.at(ndk0, (doc, z), 1); np.add.at(nvk0, (word, z), 1); np.add.at(nk0, z, 1)
            # per document of the block: distribution over its new assignments
            per_doc = []
            for d in blk:
                toks = tokens_of[d]
                outcomes = {}
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
                    outcomes[new] = prob
                per_doc.append((toks, outcomes))
            for combo in itertools.product(*[list(o.items()) for _, o in per_doc]):
                z1 = z.copy()
                prob = 1.0
                for (toks, _), (new, p) in zip(per_doc, combo):
                    z1[toks] = new
                    prob *= p
                Tb[s, index[tuple(z1)]] += prob
        T = T @ Tb
    return T


def stationary(T):
    """The stationary distribution of the transition matrix ``T`` (left eigenvector for 1)."""
    w, vecs = np.linalg.eig(T.T)
    v = np.real(vecs[:, np.argmin(np.abs(w - 1))])
    return v / v.sum()


def total_variation(p, q):
    return 0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum()
