"""The HDP-LDA row of experiments/lida_table1.py (issue 44 item 1): its document-completion scorer
against an enumerated posterior, the top-level weights τ against hand-computed table counts, the
read-out of tomotopy's ``HDPModel`` (a comparison system, never a dependency: those tests are
skipped without it) and the corpus concatenation of the ``--protocol joint`` hypothesis."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from topicjax.data.corpus import Corpus


@pytest.fixture(scope="module")
def mod(load_experiment):
    return load_experiment("lida_table1")


# two documents over V = 3 words: observed halves [0, 2] and [1, 1, 2], held-out halves [2] and [0]
PHI = np.array([[0.8, 0.1], [0.15, 0.3], [0.05, 0.6]])  # V x K', columns sum to one
PRIOR = np.array([0.6, 0.4])
OBSERVED = [[0, 2], [1, 1, 2]]
HELD = [[2], [0]]


def _corpus(docs, n_words=3):
    doc = [d for d, ws in enumerate(docs) for _ in ws]
    word = [w for ws in docs for w in ws]
    return Corpus.from_entries(doc, word, [1] * len(word), n_words=n_words, n_docs=len(docs))


def _enumerated_theta(words, phi, prior):
    """E[θ_d | observed words] by summing over every topic assignment: p(z) ∝ Π_i φ_{w_i z_i} times
    the Pólya urn Π_i (prior_{z_i} + #{j < i: z_j = z_i}) / (A + i), and θ(z) = (n(z) + prior) / (N + A)."""
    A, N, K = prior.sum(), len(words), len(prior)
    num, den = np.zeros(K), 0.0
    for z in itertools.product(range(K), repeat=N):
        p = 1.0
        for i, (w, k) in enumerate(zip(words, z)):
            p *= phi[w, k] * (prior[k] + sum(1 for j in range(i) if z[j] == k)) / (A + i)
        n = np.bincount(z, minlength=K)
        num += p * (n + prior) / (N + A)
        den += p
    return num / den


def test_completion_scorer_matches_the_enumerated_posterior(mod):
    expected = 0.0
    for obs, held in zip(OBSERVED, HELD):
        theta = _enumerated_theta(obs, PHI, PRIOR)
        expected -= sum(math.log(PHI[w] @ theta) for w in held)
    expected /= sum(len(h) for h in HELD)
    got, n = mod.completion_logperp(PHI, PRIOR, _corpus(OBSERVED), _corpus(HELD), n_sweeps=6000, burn_in=200, seed=3)
    assert n == 2
    # expected 1.2407; Monte Carlo error of 5,800 correlated sweeps ~2e-3.  Wrong estimators land far
    # off (enumerated the same way): θ without the prior in (46) 1.388, a flat prior (1, 1) 1.151
    assert got == pytest.approx(expected, abs=0.01)
    # and θ from the prior alone, ignoring the observed half, 0.982: the test can fail
    prior_only = -sum(math.log(PHI[w] @ (PRIOR / PRIOR.sum())) for h in HELD for w in h) / 2
    assert abs(prior_only - expected) > 0.05


def test_completion_scorer_refuses_bad_input(mod):
    obs, held = _corpus(OBSERVED), _corpus(HELD)
    with pytest.raises(ValueError, match="prior"):
        mod.completion_logperp(PHI, PRIOR[:1], obs, held, n_sweeps=4, burn_in=2, seed=0)
    with pytest.raises(ValueError, match="burn_in"):
        mod.completion_logperp(PHI, PRIOR, obs, held, n_sweeps=4, burn_in=4, seed=0)
    with pytest.raises(ValueError, match="vocabulary"):
        mod.completion_logperp(PHI[:2], PRIOR, obs, held, n_sweeps=4, burn_in=2, seed=0)


def test_expected_tables_and_global_weights_by_hand(mod):
    n_dk = np.array([[2, 0], [1, 3]])
    # Antoniak: E[m | n, a] = Σ_{j<n} a / (a + j); topic 0 (a = 1): 1 + 1/2 and 1; topic 1 (a = 0.5): 1 + 1/3 + 1/5
    np.testing.assert_allclose(mod.expected_tables(n_dk, [1.0, 0.5]), [2.5, 1 + 1 / 3 + 0.2], rtol=1e-12)
    alpha, gamma = 2.0, 1.5
    tau = mod.hdp_global_weights(n_dk, alpha, gamma)
    assert tau.shape == (3,) and tau.sum() == pytest.approx(1.0)
    # the fixed point: τ_k = m_k / (Σ m + γ), τ_new = γ / (Σ m + γ) with m_k at α τ_k, written out
    m = [sum(sum(alpha * tau[k] / (alpha * tau[k] + j) for j in range(n)) for n in n_dk[:, k]) for k in range(2)]
    np.testing.assert_allclose(tau, np.array([m[0], m[1], gamma]) / (sum(m) + gamma), rtol=1e-8)


def test_append_docs_keeps_both_corpora_in_order(mod):
    a, b = _corpus(OBSERVED), _corpus(HELD)
    both = mod.append_docs(a, b)
    assert both.n_docs == 4 and both.n_tokens == a.n_tokens + b.n_tokens
    np.testing.assert_array_equal(both.subset([2, 3]).to_dense(), b.to_dense())
    np.testing.assert_array_equal(both.subset([0, 1]).to_dense(), a.to_dense())


def test_hdp_readout_matches_tomotopy(mod):
    pytest.importorskip("tomotopy")
    import tomotopy as tp

    corpus = mod.quick_corpus()
    fit = mod.fit_hdp(corpus, sweeps=6, burn_in=5, seed=1, alpha=1.0, gamma=1.0, eta=0.1)
    V, K = corpus.n_words, fit["phi"].shape[1]
    assert fit["n_vk"].sum() == corpus.n_tokens and fit["n_kd"].sum(1).tolist() == fit["n_vk"].sum(0).tolist()
    np.testing.assert_array_equal(fit["n_kd"].sum(0), corpus.doc_lengths)
    # one averaged sample: φ = (n_vk + η) / (n_k + V η), what tomotopy itself reports for its topics
    # (the same seed and documents give the same chain); tomotopy's words are "w<id>" of ours
    mdl = tp.HDPModel(tw=tp.TermWeight.ONE, initial_k=2, alpha=1.0, eta=0.1, gamma=1.0, seed=1)
    mdl.optim_interval = 0
    for words in mod._tomotopy_words(corpus):
        mdl.add_doc(words)
    mdl.train(0, workers=1)
    for _ in range(6):
        mdl.train(1, workers=1)
    rows = np.array([int(w[1:]) for w in mdl.used_vocabs])
    live = [k for k in range(mdl.k) if mdl.is_live_topic(k)]
    assert len(live) == K
    ref = np.zeros((V, K))
    ref[rows] = np.array([mdl.get_topic_word_dist(k) for k in live]).T
    np.testing.assert_allclose(fit["phi"], ref, rtol=1e-5)
    np.testing.assert_allclose(fit["phi"].sum(0), 1.0, rtol=1e-12)
    assert fit["tau"].sum() == pytest.approx(1.0) and fit["alpha"] == 1.0 and fit["gamma"] == 1.0


def test_quick_run_has_an_hdp_row(mod, tmp_path):
    pytest.importorskip("tomotopy")
    out = tmp_path / "t.md"
    (r0, r1) = sorted(mod.main(["--quick", "--models", "hdp", "--out", str(out)]), key=lambda r: r["fold"])
    text = out.read_text()
    assert "| HDP-LDA | " in text and "HDP-LDA (tomotopy `HDPModel`" in text
    for r in (r0, r1):  # a 16-word corpus: below ln 16 nats (the uniform distribution)
        assert 0.0 < r["logperp"] < math.log(16) and r["backend"] == "tomotopy"


def test_estimator_variants_rescore_the_same_fit(mod, tmp_path):
    """``--extra-test-sweeps`` re-scores the fitted Φ: with the default number of sweeps (6 in
    ``--quick``) it gives the default figure again (the completion sampler is seeded); ``--protocol
    joint`` fits on the training documents plus the observed halves and scores the held-out halves
    with the chain's own θ."""
    out = tmp_path / "v.md"
    res = mod.main(["--quick", "--models", "lda", "--run-folds", "1", "--extra-test-sweeps", "6,30", "--out", str(out)])
    (r,) = res
    assert r["variants"]["6 test sweeps"] == pytest.approx(r["logperp"], abs=1e-12)
    assert r["variants"]["30 test sweeps"] != r["logperp"]
    assert "| bars | LDA | — | " in out.read_text().split("more sweeps")[1]
    (j,) = mod.main(["--quick", "--models", "lda", "--run-folds", "1", "--protocol", "joint", "--out", str(out)])
    # a different estimator on the same held-out tokens; both beat the uniform distribution
    assert j["variants"] == {} and j["logperp"] != r["logperp"]
    assert max(j["logperp"], r["logperp"]) < math.log(mod.quick_corpus().n_words)
