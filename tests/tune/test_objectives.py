"""The differentiable objectives against independent references: the package's evaluation metrics
(held-out perplexity, fold-in, top-k NPMI coherence), a hand-written loop over word pairs, and a
logistic regression fitted by scipy."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import topicjax as tj
from topicjax.core import layout
from topicjax.evaluation import metrics
from topicjax.tune import objectives as O
from topicjax.tune.backend import differentiable


@pytest.fixture(scope="module")
def fitted(bars_split):
    train, valid, _ = bars_split
    model = tj.ARTM(6, max_iter=15, progress=False, scores=()).fit(train)
    return model, train, valid


def test_fold_in_equals_metrics_fold_in(fitted):
    model, _, valid = fitted
    observed, _ = valid.completion_split(seed=0)
    theta = O.differentiable_fold_in(jnp.asarray(model.phi_), differentiable(layout.prepare(observed)), observed.n_docs, 30)
    np.testing.assert_allclose(np.asarray(theta), metrics.fold_in(model.phi_, observed, n_iter=30), atol=2e-6)


def test_heldout_perplexity_equals_metrics(fitted):
    """exp(loss) is metrics.heldout_perplexity (document completion, ARTM sec. 5)."""
    model, _, valid = fitted
    observed, heldout = valid.completion_split(seed=3)
    obj = O.heldout_perplexity_loss(observed, heldout, n_iter=25)
    value, parts = obj(jnp.asarray(model.phi_), jnp.asarray(model.theta_))
    assert float(value) == float(parts["log_perplexity"])
    expected = metrics.heldout_perplexity(model.phi_, observed, heldout, n_iter=25)
    assert np.exp(float(value)) == pytest.approx(expected, rel=2e-5)


def test_heldout_perplexity_ignores_words_no_topic_produces(fitted):
    """A held-out word whose row of Φ is zero (unseen in training) is ignored, as the metric does."""
    model, _, valid = fitted
    observed, heldout = valid.completion_split(seed=3)
    phi = model.phi_.copy()
    w = int(heldout.word_ids[0])
    phi[w] = 0.0
    phi /= phi.sum(0, keepdims=True)
    value, _ = O.heldout_perplexity_loss(observed, heldout)(jnp.asarray(phi), jnp.asarray(model.theta_))
    assert np.isfinite(float(value))
    assert np.exp(float(value)) == pytest.approx(metrics.heldout_perplexity(phi, observed, heldout), rel=2e-5)


def test_coherence_of_uniform_topics_is_topk_npmi(bars_split):
    """A topic uniform over k words scores the mean NPMI of its word pairs, i.e.
    metrics.coherence(measure="npmi", k) (independent code: pair loop over co-document counts)."""
    train, _, _ = bars_split
    rng = np.random.default_rng(0)
    W, T, k = train.n_words, 4, 6
    phi = np.zeros((W, T))
    for t in range(T):
        phi[rng.choice(W, k, replace=False), t] = 1.0 / k
    expected = metrics.coherence(phi, train, k=k, measure="npmi")
    for power in (1.0, 2.5):
        value, _ = O.coherence_loss(train, power=power)(jnp.asarray(phi, jnp.float32), None)
        assert -float(value) == pytest.approx(float(np.mean(expected)), rel=1e-5)


def test_coherence_is_expected_npmi_of_sharpened_topics(bars_split):
    """For general Φ: the loss is minus the mean over topics of Σ_{i≠j} q_i q_j N_ij / Σ_{i≠j} q_i q_j
    with q ∝ φ^γ over the candidate words, written here as a loop over pairs."""
    train, _, _ = bars_split
    rng = np.random.default_rng(1)
    phi = rng.dirichlet(np.full(train.n_words, 0.3), size=3).T
    words = np.sort(np.argsort(-train.doc_frequency, kind="stable")[:12])
    npmi = O.npmi_matrix(train, words)
    per_topic = []
    for t in range(3):
        q = phi[words, t] ** 1.7
        num = den = 0.0
        for i, j in itertools.permutations(range(len(words)), 2):
            num += q[i] * q[j] * npmi[i, j]
            den += q[i] * q[j]
        per_topic.append(num / den)
    value, _ = O.coherence_loss(train, power=1.7, max_words=12)(jnp.asarray(phi, jnp.float32), None)
    assert -float(value) == pytest.approx(np.mean(per_topic), rel=1e-5)
    # a chosen subset of topics
    value, _ = O.coherence_loss(train, power=1.7, max_words=12, topics=[0, 2])(jnp.asarray(phi, jnp.float32), None)
    assert -float(value) == pytest.approx(np.mean([per_topic[0], per_topic[2]]), rel=1e-5)


def test_npmi_matrix_conventions():
    """Hand-computed NPMI: a pair never together scores -1, a pair in every document 1."""
    dense = np.array([[1, 1, 0, 1], [1, 0, 1, 1], [1, 1, 0, 1], [0, 0, 1, 1]])
    corpus = tj.Corpus.from_dense(dense)
    n = O.npmi_matrix(corpus, [0, 1, 2, 3])
    # words 0 and 1: S(0)=3, S(1)=2, S(0,1)=2, D=4
    assert n[0, 1] == pytest.approx(np.log(2 * 4 / (3 * 2)) / -np.log(2 / 4))
    assert n[1, 2] == -1.0  # never together
    assert n[0, 0] == 0.0
    # word 3 is in every document: S(0,3) = 3 -> PMI 0
    assert n[0, 3] == pytest.approx(0.0, abs=1e-12)


def _reference_logistic(X, y, C, l2):
    """The same penalised cross-entropy minimised by scipy's L-BFGS (float64, numpy)."""
    F = X.shape[1]

    def f(w):
        W = w.reshape(F, C)
        z = X @ W
        z = z - z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        p = np.exp(logp)
        onehot = np.eye(C)[y]
        loss = -np.mean(logp[np.arange(len(y)), y]) + l2 * np.sum(w * w)
        grad = X.T @ (p - onehot) / len(y) + 2 * l2 * W
        return loss, grad.ravel()

    res = scipy.optimize.minimize(f, np.zeros(F * C), jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "maxiter": 5000})
    return res.x.reshape(F, C)


def test_classification_loss_equals_reference_classifier(fitted):
    """The classifier's validation cross-entropy equals that of the same logistic regression
    fitted by scipy on the training Θ, evaluated on the folded-in validation Θ."""
    model, train, valid = fitted
    l2 = 1e-3
    obj = O.classification_loss(train, valid, l2=l2)
    value, _ = obj(jnp.asarray(model.phi_), jnp.asarray(model.theta_))
    X = np.hstack([model.theta_.T, np.ones((train.n_docs, 1))]).astype(np.float64)
    C = 3
    W = _reference_logistic(X, train.label_ids, C, l2)
    theta_v = metrics.fold_in(model.phi_, valid, n_iter=30)
    Xv = np.hstack([theta_v.T, np.ones((valid.n_docs, 1))])
    z = Xv @ W
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    expected = -np.mean(logp[np.arange(valid.n_docs), valid.label_ids])
    assert float(value) == pytest.approx(expected, rel=1e-4)
    assert expected < np.log(C)  # the topics carry information about the labels


def test_objective_arithmetic_and_checks(bars_split):
    train, valid, _ = bars_split
    observed, heldout = valid.completion_split(seed=0)
    a = O.heldout_perplexity_loss(observed, heldout)
    b = O.coherence_loss(train)
    obj = 2.0 * a + b + 0.5 * b
    assert obj.names == ("log_perplexity", "neg_npmi", "neg_npmi#2")
    assert obj.weights == (2.0, 1.0, 0.5)
    phi = jnp.full((train.n_words, 3), 1.0 / train.n_words)
    theta = jnp.full((3, train.n_docs), 1.0 / 3)
    total, parts = obj(phi, theta)
    assert float(total) == pytest.approx(2 * float(parts["log_perplexity"]) + 1.5 * float(parts["neg_npmi"]), rel=1e-6)
    with pytest.raises(ValueError, match="2 weights for 3 parts"):
        obj.reweighted([1.0, 2.0])
    with pytest.raises(ValueError, match="built for 25 words, the model has 30"):
        obj.check(30, train.n_docs)
    with pytest.raises(ValueError, match="labels for 60 training documents, the model is fitted on 10"):
        O.classification_loss(train, valid).check(train.n_words, 10)
    plain = O.as_objective(lambda phi, theta: jnp.sum(phi[0]))
    assert plain.names == ("<lambda>",)
    with pytest.raises(TypeError, match="an objective must be"):
        O.as_objective(3)
    with pytest.raises(ValueError, match="power must be a positive number"):
        O.coherence_loss(train, power=0)
    with pytest.raises(ValueError, match="1 validation labels for 20 validation documents"):
        O.classification_loss(train, valid, valid_labels=np.array([0]))
