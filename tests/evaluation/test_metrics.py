"""Metrics against hand-computed examples."""

import numpy as np
import pytest

from topicjax import Corpus, metrics


@pytest.fixture(scope="module")
def small():
    # 4 documents over 4 words.
    dense = np.array([[2, 1, 0, 0], [0, 1, 3, 0], [1, 0, 0, 2], [0, 0, 1, 1]])
    return Corpus.from_dense(dense, vocab=["a", "b", "c", "d"])


@pytest.fixture(scope="module")
def model(small):
    rng = np.random.default_rng(0)
    phi = rng.dirichlet(np.ones(4), size=2).T  # W x T
    theta = rng.dirichlet(np.ones(2), size=4).T  # T x D
    return phi, theta


def test_log_likelihood_and_perplexity_by_hand(small, model):
    phi, theta = model
    dense = small.to_dense()
    ll = sum(dense[d, w] * np.log(phi[w] @ theta[:, d]) for d in range(4) for w in range(4) if dense[d, w])
    assert metrics.log_likelihood(phi, theta, small) == pytest.approx(ll, rel=1e-12)
    assert metrics.perplexity(phi, theta, small) == pytest.approx(np.exp(-ll / dense.sum()), rel=1e-12)
    per_doc = metrics.log_likelihood(phi, theta, small, per_document=True)
    assert per_doc.shape == (4,) and per_doc.sum() == pytest.approx(ll)


def test_zero_probability_token_gives_infinite_perplexity(small):
    phi = np.zeros((4, 1)); phi[0, 0] = 1.0
    theta = np.ones((1, 4))
    assert np.isinf(metrics.perplexity(phi, theta, small))


def test_shape_errors(small, model):
    phi, theta = model
    with pytest.raises(ValueError, match="3 words but the corpus has 4"):
        metrics.log_likelihood(phi[:3], theta, small)
    with pytest.raises(ValueError, match="non-finite"):
        bad = phi.copy(); bad[0, 0] = np.nan
        metrics.log_likelihood(bad, theta, small)


def test_heldout_uses_theta_from_observed_part(small, model):
    phi, _ = model
    obs, held = small.completion_split("tokens", seed=0)
    theta = metrics.fold_in(phi, obs, n_iter=50)
    ll = metrics.heldout_log_likelihood(phi, obs, held, theta=theta)
    assert ll == pytest.approx(metrics.log_likelihood(phi, theta, held))
    assert metrics.heldout_perplexity(phi, obs, held, n_iter=50) == pytest.approx(
        np.exp(-metrics.log_likelihood(phi, theta, held) / held.n_tokens), rel=1e-5)
    other = Corpus.from_dense(np.ones((4, 3), int))
    with pytest.raises(ValueError, match="different vocabulary"):
        metrics.heldout_log_likelihood(phi, obs, other)


def test_coherence_by_hand(small):
    # Topic 0's top words a, b; topic 1's top words c, d.
    phi = np.array([[0.6, 0.0], [0.3, 0.1], [0.1, 0.5], [0.0, 0.4]])
    D = 4
    # S(a)=2, S(b)=2, S(a,b)=1; S(c)=2, S(d)=2, S(c,d)=1.
    pmi = np.log(1 * D / (2 * 2))
    np.testing.assert_allclose(metrics.coherence(phi, small, k=2, measure="pmi"), [pmi, pmi])
    npmi = pmi / -np.log(1 / D)
    np.testing.assert_allclose(metrics.coherence(phi, small, k=2, measure="npmi"), [npmi, npmi])
    # UMass (PTM eq. 33): log((S(w2, w1) + 1) / S(w1)) with w1 the higher-ranked word.
    np.testing.assert_allclose(metrics.coherence(phi, small, k=2, measure="umass"), [np.log(2 / 2)] * 2)
    # Pairs never together: NPMI -1; PMI skipped (nan when no pair left) or eps-smoothed.
    phi2 = np.array([[0.6, 0.0], [0.0, 0.0], [0.4, 0.1], [0.0, 0.9]])  # a & c never co-occur
    assert metrics.coherence(phi2, small, k=2, measure="npmi")[0] == pytest.approx(-1.0)
    assert np.isnan(metrics.coherence(phi2, small, k=2, measure="pmi")[0])
    assert metrics.coherence(phi2, small, k=2, measure="pmi", eps=0.5)[0] == pytest.approx(np.log(0.5 * 4 / 4))


def test_kernel_coherence_uses_kernel_words(small):
    phi = np.array([[0.5, 0.0], [0.5, 0.1], [0.0, 0.5], [0.0, 0.4]])
    ker = metrics.coherence(phi, small, k=None, kernel=True, measure="pmi")
    top = metrics.coherence(phi, small, k=2, measure="pmi")
    np.testing.assert_allclose(ker, top)


def test_sparsity():
    m = np.array([[0.0, 1.0], [0.0, 0.0], [1e-12, 2.0]])
    assert metrics.sparsity(m) == pytest.approx(3 / 6)
    assert metrics.sparsity(m, threshold=1e-9) == pytest.approx(4 / 6)
    assert metrics.sparsity(m, columns=[1]) == pytest.approx(1 / 3)


def test_background_ratio_by_hand(small, model):
    phi, theta = model
    dense = small.to_dense()
    num = sum(dense[d, w] * phi[w, 1] * theta[1, d] / (phi[w] @ theta[:, d])
              for d in range(4) for w in range(4) if dense[d, w])
    assert metrics.background_ratio(phi, theta, small, [1]) == pytest.approx(num / dense.sum())
    assert metrics.background_ratio(phi, theta, small, [0, 1]) == pytest.approx(1.0)


def test_kernel_scores_by_hand():
    phi = np.array([[0.7, 0.1], [0.2, 0.2], [0.1, 0.7]])
    ks = metrics.kernel_scores(phi, delta=0.25)
    # p(t|w) with uniform p(t): w0 -> (.875, .125); w1 -> (.5, .5); w2 -> (.125, .875).
    np.testing.assert_array_equal(ks["size"], [2, 2])
    np.testing.assert_allclose(ks["purity"], [0.9, 0.9])
    np.testing.assert_allclose(ks["contrast"], [(0.875 + 0.5) / 2] * 2)
    ks = metrics.kernel_scores(phi, topic_weights=[3, 1], delta=0.25)
    # w1: p(1|w1) = .25 exactly -> not in topic 1's kernel (strict >).
    np.testing.assert_array_equal(ks["size"], [3, 1])  # w2: p(0|w2) = .075/.25 = .3 > .25


def test_class_consistency_single_and_multi_label():
    theta_tr = np.array([[1.0, 0.9, 0.0, 0.1], [0.0, 0.1, 1.0, 0.9]])
    y_tr = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], bool)
    theta_te = np.array([[0.8, 0.3], [0.2, 0.7]])
    y_te = np.array([[1, 0], [0, 1]], bool)
    out = metrics.class_consistency(theta_tr, y_tr, theta_te, y_te)
    # p_j(c) by eq. 34: topic 0 -> (1.9, 0.1)/2, topic 1 -> (0.1, 1.9)/2.
    np.testing.assert_allclose(out["p_label"], [[0.95, 0.05], [0.05, 0.95]])
    assert out["accuracy"] == 1.0
    y_te_multi = np.array([[1, 1], [0, 1]], bool)
    out = metrics.class_consistency(theta_tr, y_tr, theta_te, y_te_multi)
    # Scores Σ_j θ_jd p_j(c): doc 0 (0.77, 0.23), doc 1 (0.32, 0.68); 3 true labels.  As ν falls
    # from 1 the (recall, precision) curve visits (0, 1), (1/3, 1), (2/3, 1), (2/3, 2/3), (1, 3/4):
    # area 1/3 + 1/3 + 0 + (2/3 + 3/4)/2 · 1/3 = 65/72.
    assert out["auc"] == pytest.approx(65 / 72, abs=1e-12)


def test_top_words_and_recovery():
    phi = np.array([[0.1, 0.6], [0.9, 0.4]])
    assert metrics.top_words(phi, ["x", "y"], 1) == [["y"], ["x"]]
    rec = metrics.topic_recovery(phi[:, ::-1], phi)
    assert rec["distance"] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_array_equal(rec["matching"], [1, 0])
    assert metrics.hellinger([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0)


def test_heldout_ignores_words_unseen_in_training(small):
    """ARTM sec. 5: held-out terms that did not appear in the training documents are ignored."""
    phi = np.array([[0.5, 0.2], [0.5, 0.3], [0.0, 0.5], [0.0, 0.0]])  # word d never seen
    obs, held = small.completion_split("tokens", seed=3)
    theta = np.full((2, 4), 0.5)
    ll = metrics.heldout_log_likelihood(phi, obs, held, theta=theta)
    dense = held.to_dense()
    ref = sum(dense[d, w] * np.log(phi[w] @ theta[:, d]) for d in range(4) for w in range(3) if dense[d, w])
    assert ll == pytest.approx(ref)
    n = dense[:, :3].sum()
    assert metrics.heldout_perplexity(phi, obs, held, theta=theta) == pytest.approx(np.exp(-ref / n))
    assert metrics.heldout_log_likelihood(phi, obs, held, theta=theta, unseen="keep") == -np.inf
