"""The EM family's step: E-step counts against a numpy loop, monotone likelihood, distributions,
seeds, the clamp convention, inference with Φ fixed."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax import Corpus, datasets
from topicjax.core import em, estep, layout, mstep
from topicjax.evaluation import metrics

T = 4


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(3)
    dense = rng.poisson(1.5, size=(7, 9))
    dense[:, 0] += 1  # no empty documents
    return Corpus.from_dense(dense)


@pytest.fixture(scope="module")
def step():
    return em.make_step()


def _loop_counts(phi, theta, corpus):
    """Hand-written E-step (ARTM eq. 6-8): one loop over documents and words."""
    W, T = phi.shape
    n_wt = np.zeros((W, T))
    n_td = np.zeros((T, corpus.n_docs))
    ll = 0.0
    dense = corpus.to_dense()
    for d in range(corpus.n_docs):
        for w in range(W):
            n = dense[d, w]
            if n == 0:
                continue
            joint = phi[w] * theta[:, d]
            p = joint.sum()
            ll += n * np.log(p)
            n_wt[w] += n * joint / p
            n_td[:, d] += n * joint / p
    return ll, n_wt, n_td


@pytest.mark.parametrize("chunk", [8, 16, None])
def test_expected_counts_match_loop(tiny, chunk):
    state = em.init(jax.random.key(1), tiny.n_words, tiny.n_docs, T)
    theta = jax.random.dirichlet(jax.random.key(2), jnp.ones(T), (tiny.n_docs,)).T
    data = layout.prepare(tiny, chunk=chunk)
    ll, g_phi, g_theta = estep.expected_counts(state.phi, theta, data)
    ll_ref, n_wt, n_td = _loop_counts(np.asarray(state.phi, float), np.asarray(theta, float), tiny)
    np.testing.assert_allclose(np.asarray(state.phi * g_phi), n_wt, rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(theta * g_theta), n_td, rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(float(ll), ll_ref, rtol=1e-6)
    # Counts conserve tokens: Σ_wt n_wt = Σ_td n_td = n.
    assert abs(float((state.phi * g_phi).sum()) - tiny.n_tokens) < 1e-3


def test_log_likelihood_gradient_is_autodiff_of_the_plain_formula(tiny):
    """The custom VJP equals jax.grad of the naive dense expression."""
    state = em.init(jax.random.key(4), tiny.n_words, tiny.n_docs, T)
    theta = jax.random.dirichlet(jax.random.key(5), jnp.ones(T), (tiny.n_docs,)).T
    dense = jnp.asarray(tiny.to_dense(), jnp.float32)
    naive = lambda p, t: jnp.sum(dense.T * jnp.log(p @ t))  # noqa: E731
    data = layout.prepare(tiny, chunk=8)
    g = jax.grad(estep.log_likelihood, argnums=(0, 1))(state.phi, theta, data)
    g_ref = jax.grad(naive, argnums=(0, 1))(state.phi, theta)
    for a, b in zip(g, g_ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    g_t = jax.grad(estep.log_likelihood_theta, argnums=1)(state.phi, theta, data)
    np.testing.assert_allclose(np.asarray(g_t), np.asarray(g_ref[1]), rtol=1e-4, atol=1e-5)


def test_em_monotone_and_distributions(step):
    corpus, _ = datasets.make_bars(n_docs=150, seed=2)
    data = layout.prepare(corpus, chunk=1024)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 10)
    lls = []
    for _ in range(30):
        state = step(state, data)
        lls.append(float(state.loglik))
        np.testing.assert_allclose(np.asarray(state.phi.sum(0)), 1.0, atol=1e-5)
        np.testing.assert_allclose(np.asarray(state.theta.sum(0)), 1.0, atol=1e-5)
        assert float(state.phi.min()) >= 0 and float(state.theta.min()) >= 0
    # EM never decreases the likelihood (up to float32 round-off of the compensated sum).
    assert np.all(np.diff(lls) >= -1e-6 * abs(lls[-1]))
    assert lls[-1] > lls[0]


def test_loglik_is_accurate_to_float64(step):
    corpus, _ = datasets.make_bars(n_docs=400, seed=5)
    data = layout.prepare(corpus, chunk=256)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 10)
    state = step(state, data)
    new = step(state, data)  # new.loglik is L at state's parameters
    exact = metrics.log_likelihood(state.phi, state.theta, corpus)
    assert abs(float(new.loglik) - exact) < 1e-6 * abs(exact)


def test_same_seed_same_result(step):
    corpus, _ = datasets.make_bars(n_docs=60, seed=1)
    data = layout.prepare(corpus)

    def fit(seed):
        s = em.init(jax.random.key(seed), corpus.n_words, corpus.n_docs, 10)
        for _ in range(5):
            s = step(s, data)
        return np.asarray(s.phi)

    if jax.default_backend() == "cpu":
        assert np.array_equal(fit(7), fit(7))
    else:  # GPU scatter-adds use atomics: same seed, same model to float round-off (module docs)
        np.testing.assert_allclose(fit(7), fit(7), rtol=1e-4, atol=1e-7)
    assert not np.allclose(fit(7), fit(8), rtol=1e-2)


def test_normalize_columns_zero_column_is_zero_not_nan():
    a = jnp.array([[1.0, -1.0, 0.0], [3.0, -2.0, 0.0]])
    out = np.asarray(mstep.normalize_columns(a))
    np.testing.assert_allclose(out[:, 0], [0.25, 0.75])
    assert np.all(out[:, 1:] == 0) and np.all(np.isfinite(out))
    # per block of rows (one distribution per modality)
    b = np.asarray(mstep.normalize_columns(jnp.array([[1.0], [3.0], [2.0], [2.0]]), jnp.array([0, 0, 1, 1]), 2))
    np.testing.assert_allclose(b[:, 0], [0.25, 0.75, 0.5, 0.5])


def test_regularized_counts_smoothing_limit_at_zero():
    """φ ∂R/∂φ for R = β Σ log φ is β even where φ = 0 (no 0·∞ = NaN): the one clamp convention."""
    corpus = Corpus.from_dense([[1, 2], [3, 0]])
    data = layout.prepare(corpus)
    phi = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    theta = jnp.full((2, 2), 0.5)
    _, _, a_phi, _ = mstep.regularized_counts(lambda p, t: estep.log_likelihood(p, t, data), phi, theta,
                                              lambda p, t: 0.5 * jnp.sum(jnp.log(p)))
    _, g, _ = estep.expected_counts(phi, theta, data)
    np.testing.assert_allclose(np.asarray(a_phi), np.asarray(phi * g) + 0.5, rtol=1e-5, atol=1e-6)


def test_counts_likelihood_gives_back_the_counts():
    """The online algorithm's M-step: x ⊙ ∇L of the counts' likelihood is the counts, at φ = 0 too."""
    n = jnp.array([[2.0, 0.0], [1.0, 3.0]])
    phi = jnp.array([[0.0, 0.5], [1.0, 0.5]])
    _, _, a_phi, _ = mstep.regularized_counts(mstep.counts_likelihood(n), phi, jnp.full((2, 3), 0.5))
    np.testing.assert_allclose(np.asarray(a_phi), np.asarray(n), rtol=1e-6)


def test_infer_theta_recovers_training_theta_with_fixed_phi(step):
    from topicjax.regularizers import as_regularizer

    corpus, _ = datasets.make_bars(n_docs=80, seed=3)
    data = layout.prepare(corpus)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 10)
    for _ in range(40):
        state = step(state, data)
    theta = em.infer_theta(state.phi, data, corpus.n_docs, as_regularizer(None), n_iter=200)
    assert metrics.perplexity(state.phi, theta, corpus) <= metrics.perplexity(state.phi, state.theta, corpus) * 1.01


def test_prepare_rejects_empty():
    c = Corpus.from_entries([], [], [], vocab=["a"], n_docs=0)
    with pytest.raises(ValueError, match="no tokens"):
        layout.prepare(c)
