"""Tests of the Theme Topic Mixture Model (topicjax.ttmm): every equation against an independent
float64 numpy reference (brute force over themes and topic assignments, the explicit Q tensor),
EM monotonicity, SGD against EM, the estimator, persistence and bad input."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from sklearn.base import clone
from sklearn.metrics import adjusted_rand_score

from topicjax.data.corpus import Corpus, CorpusError
from topicjax.core.errors import NumericalError
from topicjax.ttmm import TTMM, TTMMParams, sample_corpus, synthetic_params
from topicjax.ttmm.em import em_init, em_step
from topicjax.ttmm.sweeps import (doc_log_likelihood, doc_topic_posterior, theme_layout, theme_posterior,
                                  token_topic_shares)
from topicjax.ttmm.sgd import batch_loss, make_batches


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def tiny():
    """J=2, K=3, W=4 parameters (float64 numpy) and 3 short documents (dense counts)."""
    rng = np.random.default_rng(3)
    pi = rng.dirichlet(np.ones(2))
    tau = rng.dirichlet(np.ones(3), size=2)
    beta = rng.dirichlet(np.ones(4), size=3)
    counts = np.array([[2, 0, 1, 1], [0, 3, 0, 2], [1, 1, 1, 0]])
    return (pi, tau, beta), counts


def _jax_params(params):
    return TTMMParams(*(jnp.asarray(x, jnp.float32) for x in params))


def _ref_posteriors(params, counts):
    """float64 P(h|d) (eq. 6), Q (eq. 7, the explicit J x K x W tensor) and log P(d) (eq. 3)."""
    pi, tau, beta = params
    A = tau @ beta
    log_joint = np.log(pi)[None, :] + counts @ np.log(A).T
    ll = np.logaddexp.reduce(log_joint, axis=1)
    P = np.exp(log_joint - ll[:, None])
    Q = tau[:, :, None] * beta[None, :, :] / A[:, None, :]
    return P, Q, ll


@pytest.fixture(scope="module")
def shared():
    """A corpus sampled from a TTMM (J=3, K=4, W=24, 150 documents) and its true themes."""
    truth = synthetic_params(3, 4, 24, concentration=0.3, seed=1)
    return sample_corpus(truth, n_docs=150, doc_length=(30, 60), seed=0)


@pytest.fixture(scope="module")
def em_model(shared):
    corpus, _ = shared
    return TTMM(4, n_themes=3, max_iter=150, tol=0, random_state=0, progress=False).fit(corpus)


@pytest.fixture(scope="module")
def sgd_model(shared):
    corpus, _ = shared
    return TTMM(4, n_themes=3, solver="sgd", optimizer=optax.adam(0.05), batch_size=32, max_iter=40, tol=0,
                random_state=0, progress=False).fit(corpus)


# ------------------------------------------------------------------ likelihood (eq. 1-4)
def test_document_probability_equals_brute_force(tiny):
    params, counts = tiny
    pi, tau, beta = params
    corpus = Corpus.from_dense(counts)
    got = np.asarray(doc_log_likelihood(_jax_params(params), theme_layout(corpus, 2), corpus.n_docs))
    for d, row in enumerate(counts):
        tokens = np.repeat(np.arange(row.size), row)  # the document as a sequence of words
        total = 0.0
        for j in range(pi.size):  # every theme ...
            for topics in itertools.product(range(tau.shape[1]), repeat=tokens.size):  # ... every topic per token
                total += pi[j] * np.prod([tau[j, t] * beta[t, w] for t, w in zip(topics, tokens)])
        np.testing.assert_allclose(got[d], np.log(total), rtol=2e-6)


def test_long_documents_do_not_underflow(tiny):
    params, counts = tiny
    long_counts = counts * 40_000  # ~160k tokens per document
    A = params[1] @ params[2]
    assert np.prod(A[0] ** long_counts[0]) == 0.0  # eq. 2 in linear space underflows even in float64
    corpus = Corpus.from_dense(long_counts)
    data = theme_layout(corpus, 2)
    got = np.asarray(doc_log_likelihood(_jax_params(params), data, corpus.n_docs))
    _, _, ref = _ref_posteriors(params, long_counts.astype(np.float64))
    assert np.all(np.isfinite(got)) and np.all(got < -1e5)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    post = np.asarray(theme_posterior(_jax_params(params), data, corpus.n_docs))
    assert np.all(np.isfinite(post))
    np.testing.assert_allclose(post.sum(1), 1.0, rtol=1e-5)


# ------------------------------------------------------------------ EM (eq. 6-11)
def test_em_step_matches_explicit_q_reference(tiny):
    params, counts = tiny
    corpus = Corpus.from_dense(counts)
    state = em_init(jax.random.key(0), 2, 3, 4, corpus.n_docs)._replace(params=_jax_params(params))
    new = em_step(state, theme_layout(corpus, 2))
    P, Q, ll = _ref_posteriors(params, counts.astype(np.float64))
    n = counts.astype(np.float64)
    pi_ref = P.sum(0) / n.shape[0]  # eq. 8
    tau_ref = np.einsum("ij,jkw,iw->jk", P, Q, n) / (P * n.sum(1)[:, None]).sum(0)[:, None]  # eq. 9-10
    beta_num = np.einsum("ij,jkw,iw->kw", P, Q, n)
    beta_ref = beta_num / beta_num.sum(1, keepdims=True)  # eq. 11
    np.testing.assert_allclose(new.params.pi, pi_ref, rtol=2e-5)
    np.testing.assert_allclose(new.params.tau, tau_ref, rtol=2e-5)
    np.testing.assert_allclose(new.params.beta, beta_ref, rtol=2e-5)
    np.testing.assert_allclose(new.doc_loglik, ll, rtol=2e-6)  # L of the parameters before the step


def test_em_log_likelihood_is_monotone(em_model):
    h = np.asarray(em_model.loglik_history_)
    assert h.size == em_model.n_iter_ + 1 == 151
    assert np.all(np.diff(h[:30]) > 0)  # strictly increasing while far from convergence
    # near convergence the changes reach the float32 evaluation noise of the per-document terms
    # (a few ulps of each log P(d), summed in float64): only decreases below it are allowed
    assert np.all(np.diff(h) >= -1e-7 * np.abs(h[1:]))
    assert h[-1] - h[0] > 0.1 * abs(h[0])


def test_em_log_likelihood_is_monotone_in_float64(shared):
    corpus, _ = shared
    with jax.enable_x64(True):
        data = theme_layout(corpus, 3)
        state = em_init(jax.random.key(0), 3, 4, corpus.n_words, corpus.n_docs, dtype=jnp.float64)
        lls = []
        for _ in range(80):
            state = em_step(state, data)
            assert state.doc_loglik.dtype == jnp.float64
            lls.append(np.sum(np.asarray(state.doc_loglik)))
    # in float64 every step increases L (80 iterations from this start are far from convergence)
    assert np.all(np.diff(lls) > 0)


def test_em_recovers_the_themes(shared, em_model):
    corpus, themes = shared
    assert adjusted_rand_score(themes, em_model.predict(corpus)) > 0.9


# ------------------------------------------------------------------ SGD (eq. 12-15)
def test_sgd_gradient_is_eq_13_to_15(tiny):
    params, counts = tiny
    pi, tau, beta = params
    corpus = Corpus.from_dense(counts)
    batch = make_batches(corpus, np.arange(corpus.n_docs), corpus.n_docs, 128)
    batch = type(batch)(*(jnp.asarray(x[0]) for x in batch))
    logits = TTMMParams(*(jnp.asarray(np.log(x), jnp.float32) for x in params))
    grads = jax.jit(jax.grad(batch_loss))(logits, batch)
    P, Q, _ = _ref_posteriors(params, counts.astype(np.float64))
    n = counts.astype(np.float64)
    nq = np.einsum("jkw,iw->ijk", Q, n)  # Σ_w Q_jkw n(w, d_i)
    # eq. 13-15 with the multiplier terms of the softmax constraints (∂/∂ln x of λ(1 - Σx) = -λx)
    g_a = (P - pi[None, :]).sum(0)
    g_b = np.einsum("ij,ijk->jk", P, nq - tau[None] * n.sum(1)[:, None, None])
    m_kw = np.einsum("ij,jkw,iw->kw", P, Q, n)
    g_c = m_kw - beta * m_kw.sum(1, keepdims=True)
    scale = -1.0 / n.sum()  # the loss is -L / tokens
    np.testing.assert_allclose(grads.pi, scale * g_a, atol=2e-6)
    np.testing.assert_allclose(grads.tau, scale * g_b, atol=2e-6)
    np.testing.assert_allclose(grads.beta, scale * g_c, atol=2e-6)


def test_sgd_reaches_em_log_likelihood(em_model, sgd_model):
    ll_em, ll_sgd = em_model.loglik_history_[-1], sgd_model.loglik_history_[-1]
    assert abs(ll_sgd - ll_em) <= 0.01 * abs(ll_em)
    assert sgd_model.loglik_history_[-1] > sgd_model.loglik_history_[0]


def test_minibatches_cover_every_entry_once(shared):
    corpus, _ = shared
    order = np.random.default_rng(0).permutation(corpus.n_docs)
    b = make_batches(corpus, order, 16, 700)
    assert b.count.sum() == corpus.n_tokens
    assert b.mask.sum() == corpus.n_docs and np.all(b.mask.sum(1) <= 16)
    # the count matrix rebuilt from the batches is the corpus's
    dense = np.zeros((corpus.n_docs, corpus.n_words))
    docs = order  # batches take the documents in order
    start = 0
    for i in range(b.mask.shape[0]):
        k = int(b.mask[i].sum())
        ids = docs[start : start + k]
        np.add.at(dense, (ids[b.doc[i]], b.word[i]), b.count[i])
        start += k
    np.testing.assert_array_equal(dense, corpus.to_dense())


# ------------------------------------------------------------------ inference (eq. 6, 18)
def test_topic_posterior_eq18_and_token_shares(tiny):
    params, counts = tiny
    pi, tau, beta = params
    corpus = Corpus.from_dense(counts)
    data = theme_layout(corpus, 2)
    assert data.doc is None  # the scans read each piece's document (layout.slot_docs)
    got = np.asarray(doc_topic_posterior(_jax_params(params), data, corpus.n_docs))
    joint = np.array([[np.prod(beta[k] ** row) * (pi @ tau)[k] for k in range(3)] for row in counts])  # eq. 18
    np.testing.assert_allclose(got, joint / joint.sum(1, keepdims=True), rtol=1e-5)
    shares = np.asarray(token_topic_shares(_jax_params(params), data, corpus.n_docs))
    P, Q, _ = _ref_posteriors(params, counts.astype(np.float64))
    ref = np.einsum("ij,jkw,iw->ik", P, Q, counts) / counts.sum(1, keepdims=True)
    np.testing.assert_allclose(shares, ref, rtol=1e-5)


def test_estimator_outputs(shared, em_model):
    corpus, _ = shared
    feats = em_model.transform(corpus)
    assert feats.shape == (corpus.n_docs, 4)
    np.testing.assert_allclose(feats.sum(1), 1.0, rtol=1e-5)
    proba = em_model.predict_proba(corpus)
    assert proba.shape == (corpus.n_docs, 3)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(em_model.predict(corpus), proba.argmax(1))
    ll = em_model.score_samples(corpus)
    assert ll.dtype == np.float64 and ll.shape == (corpus.n_docs,)
    assert float(ll.sum()) == pytest.approx(em_model.loglik_history_[-1], rel=1e-7)  # L of eq. 4
    assert em_model.score(corpus.to_sparse()) == pytest.approx(em_model.score(corpus), rel=1e-7)
    np.testing.assert_allclose(em_model.pi_.sum(), 1.0, rtol=1e-6)
    np.testing.assert_allclose(em_model.tau_.sum(1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(em_model.beta_.sum(1), 1.0, rtol=1e-5)
    assert len(em_model.top_words(3)) == 4
    assert clone(em_model).get_params() == em_model.get_params()
    with pytest.raises(ValueError, match="24"):
        em_model.transform(np.ones((2, 5)))


# ------------------------------------------------------------------ seeds and persistence
def test_same_seed_same_result(shared, em_model, sgd_model):
    corpus, _ = shared
    again = TTMM(4, n_themes=3, max_iter=150, tol=0, random_state=0, progress=False).fit(corpus)
    for name in ("pi_", "tau_", "beta_"):
        np.testing.assert_array_equal(getattr(again, name), getattr(em_model, name))
    assert again.loglik_history_ == em_model.loglik_history_
    sgd = TTMM(4, n_themes=3, solver="sgd", optimizer=optax.adam(0.05), batch_size=32, max_iter=40, tol=0,
               random_state=0, progress=False).fit(corpus)
    np.testing.assert_array_equal(sgd.beta_, sgd_model.beta_)
    other = TTMM(4, n_themes=3, max_iter=3, tol=0, random_state=1, progress=False).fit(corpus)
    assert not np.array_equal(other.beta_, em_model.beta_)


def test_save_load_round_trip(tmp_path, shared, em_model, sgd_model):
    corpus, _ = shared
    em_model.save(tmp_path / "em")
    loaded = TTMM.load(tmp_path / "em")
    for name in ("pi_", "tau_", "beta_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(em_model, name))
    assert loaded.loglik_history_ == em_model.loglik_history_ and loaded.n_iter_ == em_model.n_iter_
    assert loaded.get_params() == em_model.get_params()
    np.testing.assert_array_equal(loaded.transform(corpus), em_model.transform(corpus))
    # the optimiser is not JSON: it is left out and supplied again to load
    sgd_model.save(tmp_path / "sgd")
    assert "optimizer" not in (tmp_path / "sgd" / "meta.json").read_text()
    opt = optax.adam(0.01)
    loaded = TTMM.load(tmp_path / "sgd", optimizer=opt)
    assert loaded.optimizer is opt and loaded.solver == "sgd"
    np.testing.assert_array_equal(loaded.predict(corpus), sgd_model.predict(corpus))


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(n_themes=0), r"n_themes must be an integer >= 1, got 0"),
        (dict(n_components=0), r"n_components must be an integer >= 1, got 0"),
        (dict(n_themes=2.5), r"n_themes must be an integer >= 1, got 2.5"),
        (dict(solver="lbfgs"), r"solver must be one of 'em', 'sgd', got 'lbfgs'"),
        (dict(optimizer=optax.sgd(0.1)), r"optimizer is only used by solver='sgd'"),
        (dict(solver="sgd", optimizer="adam"),
         r"optimizer must be None or an optax GradientTransformation \(with init, update\), got 'adam'"),
    ],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TTMM(**{"n_themes": 2, "n_components": 2, "progress": False, **kwargs}).fit(np.ones((3, 4)))


def test_document_without_tokens_is_named():
    counts = np.array([[1, 2, 0], [0, 0, 0], [0, 1, 1]])
    with pytest.raises(CorpusError, match="document 1 has no tokens"):
        TTMM(2, n_themes=2, progress=False).fit(counts)


class _ScriptedSGD:
    """Plain SGD, ``x <- x - lr g``, whose ``lr`` and first NaN step (1-based; 0: none) are set
    on the object before a fit: ``init`` (called eagerly when a fit starts) puts them in the
    optimiser state, so one transformation -- one compiled SGD epoch -- serves every case below
    (an ``optax.sgd(lr)`` per learning rate would compile an epoch each)."""

    def __init__(self):
        self.lr, self.nan_step = 0.05, 0
        self.transform = optax.GradientTransformation(self._init, self._update)

    def set(self, lr: float, nan_step: int = 0):
        self.lr, self.nan_step = lr, nan_step
        return self.transform

    def _init(self, params):
        return jnp.zeros((), jnp.int32), jnp.int32(self.nan_step), jnp.float32(self.lr)  # 1e39 -> inf

    @staticmethod
    def _update(updates, state, params=None):
        count, nan_step, lr = state
        scale = jnp.where(count == nan_step - 1, jnp.nan, lr)
        return jax.tree.map(lambda g: -scale * g, updates), (count + 1, nan_step, lr)


_SGD = _ScriptedSGD()


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_non_finite_optimizer_stops_naming_the_step(shared):
    corpus, _ = shared  # 150 documents, batches of 32: 5 minibatches per epoch
    model = TTMM(4, n_themes=3, solver="sgd", optimizer=_SGD.set(0.05, nan_step=7), batch_size=32, max_iter=3,
                 progress=False)
    with pytest.raises(NumericalError, match=r"non-finite parameters at step 7 \(epoch 2, minibatch 2 of 5\)"):
        model.fit(corpus)
    assert not hasattr(model, "beta_")  # no NaN results are left behind
    # a learning rate that overflows float32 at the first update
    huge = TTMM(4, n_themes=3, solver="sgd", optimizer=_SGD.set(1e39), batch_size=32, max_iter=3, progress=False)
    with pytest.raises(NumericalError, match=r"at step 1 \(epoch 1, minibatch 1 of 5\); lower the learning rate"):
        huge.fit(corpus)


def test_diverging_sgd_warns(shared):
    # huge but finite steps saturate the softmax: parameters stay finite, the fit gets worse
    corpus, _ = shared
    with pytest.warns(RuntimeWarning, match="log-likelihood decreased"):
        TTMM(4, n_themes=3, solver="sgd", optimizer=_SGD.set(1e38), batch_size=32, max_iter=2,
             progress=False).fit(corpus)


# ------------------------------------------------------------------ experiment smoke run
def test_classification_experiment_quick(tmp_path, load_experiment):
    mod = load_experiment("ttmm_classification")
    out = tmp_path / "res.md"
    mod.main(["--quick", "--corpus", "synthetic", "--out", str(out)])
    text = out.read_text()
    assert "--quick" in text and "bag-of-words" in text and "p = 0.5" in text
