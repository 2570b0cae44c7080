"""The LIDA estimator: recovery of planted topics, held-out perplexity by document completion,
growth of K_max, summaries (Figs. 9-10), seeds, save/load and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from topicjax.lida import state as lida_state
from topicjax.data.datasets import make_bars, sample_lda_corpus
from topicjax.lida import LIDA

from .common import check_invariants, est


def test_lda_recovers_planted_bars(bars, lda_bars):
    _, true_phi = bars
    model = lda_bars
    assert model.phi_.shape == (25, 10) and model.theta_.shape == (10, 300)
    np.testing.assert_allclose(model.phi_.sum(0), 1.0, rtol=1e-4)
    np.testing.assert_allclose(model.theta_.sum(0), 1.0, rtol=1e-6)
    dist = np.abs(true_phi[:, :, None] - model.phi_[:, None, :]).sum(0)  # L1, true x learned
    best = dist.min(1)
    assert np.all(best < 0.35), best
    assert len(set(dist.argmin(1))) == 10  # one learned topic per bar
    assert model.hyper_["alpha"] > 0 and len(model.hyper_trace_["alpha"]) == 120


def test_perplexity_document_completion_and_summaries(bars, lda_bars):
    corpus, true_phi = bars
    model = lda_bars
    test, _, _ = make_bars(n_docs=40, size=5, doc_length=60, alpha=0.5, seed=7)
    perp = model.perplexity(test)
    # planted model: 5 active pixels per bar, ~2 bars per document, so far below the 25 of uniform
    # oracle: the planted Φ and Θ of the test documents on the same held-out half
    test_true, _, theta_true = sample_lda_corpus(true_phi, 40, doc_length=60, alpha=0.5, seed=7)
    obs, held = test_true.completion_split("tokens", seed=0)
    p = np.einsum("nk,kn->n", true_phi[held.word_ids], theta_true[:, held.doc_ids])
    oracle = np.exp(-np.sum(held.counts * np.log(p)) / held.n_tokens)
    assert perp < 1.15 * oracle < 25.0, (perp, oracle)
    observed, held = test.completion_split("tokens", seed=0)
    ll, n = model.log_predictive(observed, held)
    assert n == held.n_tokens and np.isclose(np.exp(-ll / n), perp)
    theta = model.transform(test)
    assert theta.shape == (40, 10) and np.allclose(theta.sum(1), 1.0)
    assert np.all(model.topics_per_document() == 10)  # LDA: every topic in every document
    assert model.histogram(model.topics_per_word()).sum() == 25
    assert model.documents_per_topic().shape == (10,) and model.words_per_topic().shape == (10,)
    assert any("log_likelihood" in h for h in model.history_)


def test_growth_auto_and_error(small):
    corpus, _ = small
    kw = dict(init_topics=16, eta=1e4, max_iter=1, hyper_start=1, eval_every=0)
    ftm = est("ftm", **kw).fit(corpus)
    assert ftm.n_components_ > 16  # births found no free slot: K_max was grown (grow="auto")
    check_invariants(ftm.state_, ftm.tokens_, ftm.config_)
    assert ftm.n_topics_ > 16 and ftm.phi_.shape[0] == corpus.n_words and ftm.n_topics_ <= ftm.phi_.shape[1]
    with pytest.raises(ValueError, match="sweep 0: .* no free slot among K_max=16"):
        est("ftm", grow="error", **kw).fit(corpus)


def test_lida_fit_evaluate_and_summaries(small, fitted_lida):
    corpus, _ = small
    lida = fitted_lida
    assert np.isfinite(lida.perplexity(corpus))
    T = lida.phi_.shape[1]  # the averaged topics; n_topics_ counts the live ones among them
    assert lida.phi_bar_.shape == (corpus.n_words, T) and lida.theta_bar_.shape == (T, corpus.n_docs)
    assert np.all(lida.phi_ > 0)  # Rao-Blackwellised (47): every word keeps a positive probability
    np.testing.assert_allclose(lida.phi_.sum(0), 1.0, rtol=1e-6)  # finite vocabulary
    np.testing.assert_array_equal(lida.topics_per_document(), lida.theta_bar_.sum(0))
    assert lida.histogram(lida.topics_per_word()).sum() == corpus.n_words
    assert lida.documents_per_topic().sum() == lida.theta_bar_.sum() == lida.topics_per_document().sum()
    assert lida.words_per_topic().min() >= 1  # finite vocabulary: at least one word per topic
    assert set(lida.hyper_trace_) == set(lida_state.HYPER) and len(lida.hyper_trace_["gamma"]) == 8
    assert lida.hyper_trace_["gamma"][0] == 50.0 and lida.hyper_trace_["gamma"][-1] != 50.0  # hyper_start=2


def test_assigned_counts_match_a_loop_over_the_tokens(small, fitted_lida):
    # sec. 5.3's words / documents per topic for models without masks: distinct words and
    # documents holding a topic's tokens, here counted token by token from the last sample's z
    corpus, _ = small
    m = fitted_lida
    col = {int(s): t for t, s in enumerate(m.topic_slots_)}
    words, docs = [set() for _ in col], [set() for _ in col]
    tok = m.tokens_
    for z, d, w in zip(np.asarray(m.state_.z), np.asarray(tok.doc), np.asarray(tok.word)):
        words[col[int(z)]].add(int(w))
        docs[col[int(z)]].add(int(d))
    np.testing.assert_array_equal(m.words_per_topic("assigned"), [len(s) for s in words])
    np.testing.assert_array_equal(m.documents_per_topic("assigned"), [len(s) for s in docs])
    per_doc = np.zeros(corpus.n_docs, int)
    per_word = np.zeros(corpus.n_words, int)
    for t in range(len(col)):
        per_doc[list(docs[t])] += 1
        per_word[list(words[t])] += 1
    np.testing.assert_array_equal(m.topics_per_document("assigned"), per_doc)
    np.testing.assert_array_equal(m.topics_per_word("assigned"), per_word)
    # a token's topic is active in its document (eq. 28) and its word active in the topic (31)
    assert not np.any(m.theta_assigned_ & ~m.theta_bar_) and not np.any(m.phi_assigned_ & ~m.phi_bar_)
    assert m.words_per_topic("assigned").sum() < m.words_per_topic().sum()
    with pytest.raises(ValueError, match=r"^count must be 'active' .* or 'assigned' .*, got 'tokens'"):
        m.words_per_topic("tokens")


def test_seeds_reproduce(small):
    corpus, _ = small
    a = est("lda", random_state=3, max_iter=6).fit(corpus)
    b = est("lda", random_state=3, max_iter=6).fit(corpus)
    c = est("lda", random_state=4, max_iter=6).fit(corpus)
    np.testing.assert_array_equal(a.phi_, b.phi_)
    assert a.hyper_trace_ == b.hyper_trace_
    assert not np.array_equal(a.phi_, c.phi_)


def test_save_load_round_trip(tmp_path, small, fitted_lida):
    corpus, _ = small
    m = fitted_lida
    m.save(tmp_path / "m")
    m2 = LIDA.load(tmp_path / "m")
    for name in LIDA._saved_arrays:
        np.testing.assert_array_equal(getattr(m, name), getattr(m2, name))
    assert m2.hyper_ == m.hyper_ and m2.get_params() == m.get_params()
    assert m2.hyper_trace_ == m.hyper_trace_ and m2.history_ == m.history_
    assert m2.perplexity(corpus) == m.perplexity(corpus)


def test_bad_input(small):
    corpus, _ = small
    fit = lambda **kw: LIDA(**{"progress": False, "max_iter": 2, **kw}).fit(corpus)
    with pytest.raises(ValueError, match=r"^n_components must be an integer >= 1, got 0"):
        fit(n_components=0)
    with pytest.raises(ValueError, match=r"^variant must be one of 'lida', 'ftm', 'sstm', 'lda', got 'hdp'"):
        fit(variant="hdp")
    with pytest.raises(ValueError, match="sampler must be"):
        fit(sampler="fast")
    with pytest.raises(ValueError, match=r"^sigma must be a number in \[0, 1\), got 1.0"):
        fit(sigma=1.0)
    with pytest.raises(ValueError, match="delta must be > -sigma"):
        fit(delta=-0.5, sigma=0.2)
    with pytest.raises(ValueError, match="^fixed_hyper must be .*unknown hyperparameter 'tau'"):
        fit(fixed_hyper=("tau",))
    with pytest.raises(ValueError, match=r"^alpha must be a number > 0.0, got 0.0"):
        fit(alpha=0.0)
    with pytest.raises(ValueError, match=r"^init_topics must be in \[1, n_components=16\], got 17"):
        fit(n_components=16, init_topics=17)
    with pytest.raises(ValueError, match="vocabulary must be"):
        fit(vocabulary="open")
    with pytest.raises(ValueError, match="not fitted"):
        LIDA().perplexity(corpus)
    with pytest.raises(ValueError, match="not fitted"):
        LIDA().words_per_topic("assigned")
    with pytest.raises(ValueError, match="topics is more than"):
        LIDA(variant="lda", n_components=10_000, progress=False).fit(corpus)
