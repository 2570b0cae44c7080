"""ONE plain two-argument regularizer, written once, through every fit path: ``ARTM.fit``,
``fit_many``, ``transform``, the online fit, the sharded fit (1 device here; 4 devices and two
processes in subprocesses), all giving the model of ``ARTM.fit`` up to round-off (issue 11)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import topicjax as tj
from topicjax import regularizers
from topicjax.artm import algorithm as em
from topicjax.core import layout
from topicjax.scale import distributed, online

from multidevice import N_ITER, T, run_two_processes


def reg(phi, theta):  # smoothing Φ (ARTM eq. 23) and sparsing Θ (eq. 25), three lines
    return 0.01 * jnp.sum(jnp.log(phi)) - 0.02 * jnp.sum(jnp.log(theta))


@pytest.fixture(scope="module")
def corpus():
    return tj.datasets.make_bars(n_docs=70, doc_length=40, seed=3)[0]


KW = dict(max_iter=N_ITER, progress=False, random_state=0, scores=("perplexity",))


@pytest.fixture(scope="module")
def reference(corpus):
    return tj.ARTM(T, regularizers=[reg], **KW).fit(corpus)


def _same(a, b, tol=1e-5):
    np.testing.assert_allclose(a.phi_, b.phi_, rtol=tol, atol=tol / 10)
    np.testing.assert_allclose(a.theta_, b.theta_, rtol=tol, atol=tol / 10)


def test_fit_many(corpus, reference):
    models = tj.ARTM(T, regularizers=[reg], **KW).fit_many(corpus, seeds=[0, 1])
    _same(models[0], reference)
    assert np.abs(models[1].phi_ - reference.phi_).max() > 1e-3


def test_transform_applies_its_theta_term(corpus, reference):
    """Θ of the training documents with Φ fixed: eq. 16 with θ ∂R/∂θ = -0.02, written in numpy."""
    phi = reference.phi_.astype(np.float64)
    dense = corpus.to_dense().T.astype(float)  # W x D
    theta = np.full((T, corpus.n_docs), 1.0 / T)
    for _ in range(reference.transform_iter):
        a = np.maximum(theta * (phi.T @ (dense / (phi @ theta))) - 0.02, 0)
        theta = a / a.sum(0)
    np.testing.assert_allclose(reference.transform(corpus), theta.T, rtol=1e-4, atol=1e-6)


def test_online_fit_of_one_batch_is_the_offline_fit(corpus, tmp_path):
    store = online.write_store([corpus], tmp_path / "store", batch_size=corpus.n_docs)
    model = online.fit_online(store, T, passes=N_ITER, learning_decay=0.0, doc_passes=3, regularizers=[reg],
                              random_state=0, progress=False)
    phi, hist = model.phi_, model.history_
    ref = tj.ARTM(T, regularizers=[reg], doc_passes=3, **KW).fit(corpus)
    np.testing.assert_allclose(phi, ref.phi_, rtol=1e-5, atol=1e-6)
    assert [h["objective"] for h in hist] == pytest.approx([h["objective"] for h in ref.history_], rel=1e-6)


def test_sharded_fit_on_one_device(corpus, reference):
    _same(distributed.fit(corpus, T, regularizers=[reg], **KW), reference)


def test_sharded_fit_over_two_processes(corpus, reference, tmp_path):
    a, b = run_two_processes(tmp_path, "artm")  # the same reg, in tests/multidevice.py
    np.testing.assert_array_equal(a["phi"], b["phi"])
    np.testing.assert_allclose(a["phi"], reference.phi_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a["theta"], reference.theta_, rtol=1e-5, atol=1e-6)


def test_the_calls_that_failed_before(corpus, tmp_path):
    """The three calls of the issue, which raised TypeError."""
    def decor(phi, theta):
        s = phi.sum(1)
        return -(jnp.sum(s * s) - jnp.sum(phi * phi))

    m = distributed.fit(corpus, 5, regularizers=decor, max_iter=2, progress=False)
    assert m.phi_.shape == (corpus.n_words, 5)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 5)
    state = em.make_step(decor)(state, layout.prepare(corpus), None)
    assert float(state.reg) != 0.0
    store = online.write_store([corpus], tmp_path / "s", batch_size=35)
    model = online.fit_online(store, 5, regularizers=regularizers.smooth_phi(), progress=False)
    phi = model.phi_
    assert np.all(phi > 0)  # smoothing reached the online M-step
