"""Θ with Φ fixed (core.foldin): against a hand-written loop of ARTM eq. 16, and as the Θ passes
that ARTM's regularized step runs (no regularizer: its inference is the plain fold-in)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax import Corpus
from topicjax.core import foldin, layout


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(7)
    dense = rng.poisson(1.2, size=(6, 8))
    dense[:, 1] += 1  # no empty document
    return Corpus.from_dense(dense), dense


def _eq16_loop(phi, dense, n_iter):
    """θ_td ← θ_td Σ_w n_dw φ_wt / Σ_s φ_ws θ_sd, normalised over t: written out per document."""
    W, T = phi.shape
    D = dense.shape[0]
    theta = np.full((T, D), 1.0 / T)
    for _ in range(n_iter):
        new = np.zeros_like(theta)
        for d in range(D):
            for w in range(W):
                if dense[d, w]:
                    p = sum(phi[w, s] * theta[s, d] for s in range(T))
                    for t in range(T):
                        new[t, d] += dense[d, w] * phi[w, t] * theta[t, d] / p
        theta = new / new.sum(0, keepdims=True)
    return theta


def test_fold_in_is_eq16_with_phi_fixed(tiny):
    corpus, dense = tiny
    phi = np.random.default_rng(1).uniform(0.05, 1.0, size=(corpus.n_words, 3))
    phi /= phi.sum(0, keepdims=True)
    got = foldin.fold_in(jnp.asarray(phi, jnp.float32), layout.prepare(corpus), corpus.n_docs, n_iter=6)
    np.testing.assert_allclose(np.asarray(got), _eq16_loop(phi, dense, 6), rtol=2e-5, atol=1e-6)


def test_fold_in_is_artm_inference_without_regularizer(tiny):
    from topicjax.artm import algorithm
    from topicjax.regularizers import as_regularizer

    corpus, _ = tiny
    data = layout.prepare(corpus)
    phi = algorithm.init(jax.random.key(3), corpus.n_words, corpus.n_docs, 4).phi
    plain = foldin.fold_in(phi, data, corpus.n_docs, n_iter=9)
    artm = algorithm.infer_theta(phi, data, corpus.n_docs, as_regularizer(None), n_iter=9)
    np.testing.assert_array_equal(np.asarray(plain), np.asarray(artm))


def test_fold_in_refuses_negative_iterations(tiny):
    corpus, _ = tiny
    with pytest.raises(ValueError, match="n_iter"):
        foldin.fold_in(jnp.ones((corpus.n_words, 2)) / corpus.n_words, layout.prepare(corpus), corpus.n_docs,
                       n_iter=-1)
