"""Quality measures shared by all models (filled in below)."""
import numpy as np


def log_likelihood(phi, theta, corpus) -> float:
    """Σ n_dw log Σ_t φ_wt θ_td (ARTM eq. 4) in float64 on the host."""
    phi = np.asarray(phi, np.float64)
    theta = np.asarray(theta, np.float64)
    p = np.einsum("nt,tn->n", phi[corpus.word_ids], theta[:, corpus.doc_ids])
    return float(np.sum(corpus.counts * np.log(np.maximum(p, 1e-300))))


def perplexity(phi, theta, corpus) -> float:
    """exp(-L / n) (ARTM eq. 56)."""
    return float(np.exp(-log_likelihood(phi, theta, corpus) / corpus.n_tokens))
