"""Issue 45 item 4: every generator of a corpus with known topics returns the same truth, the
``SyntheticCorpus(corpus, phi, theta)`` of ``make_lda_corpus``, and the Θ returned is the one the
documents were drawn from (their word frequencies match Φ Θ written out by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from topicjax.data import datasets
from topicjax.data.datasets import SyntheticCorpus

# the bars of a 2 x 2 image, words r0c0 r0c1 r1c0 r1c1: two rows, then two columns, each uniform
HAND_BARS = np.array([[0.5, 0.0, 0.5, 0.0],
                      [0.5, 0.0, 0.0, 0.5],
                      [0.0, 0.5, 0.5, 0.0],
                      [0.0, 0.5, 0.0, 0.5]])


@pytest.mark.parametrize("make", [
    lambda: datasets.make_bars(n_docs=5, size=2, doc_length=20, seed=0),
    lambda: datasets.sample_lda_corpus(np.full((4, 2), 0.25), 5, doc_length=(3, 9), seed=0),
    lambda: datasets.make_lda_corpus(20, 30, 10.0, n_topics=3, seed=0),
], ids=["make_bars", "sample_lda_corpus", "make_lda_corpus"])
def test_generators_return_corpus_phi_theta(make):
    result = make()
    assert type(result) is SyntheticCorpus and result._fields == ("corpus", "phi", "theta")
    corpus, phi, theta = result
    T = phi.shape[1]
    assert phi.shape == (corpus.n_words, T) and theta.shape == (T, corpus.n_docs)
    np.testing.assert_allclose(phi.sum(0), 1.0, rtol=1e-6)
    np.testing.assert_allclose(theta.sum(0), 1.0, rtol=1e-5)
    assert result.corpus is corpus and result.phi is phi and result.theta is theta


def test_make_bars_truth_is_what_the_documents_were_drawn_from():
    corpus, phi, theta = datasets.make_bars(n_docs=6, size=2, doc_length=4000, alpha=1.0, seed=5)
    assert list(corpus.vocab) == ["r0c0", "r0c1", "r1c0", "r1c1"]
    np.testing.assert_array_equal(phi, HAND_BARS)
    counts = np.zeros((corpus.n_docs, corpus.n_words))
    np.add.at(counts, (corpus.doc_ids, corpus.word_ids), corpus.counts)
    freq = counts / counts.sum(1, keepdims=True)
    # 4,000 tokens: each frequency within 4.5 standard deviations (sqrt(1/4 * 3/4 / 4000) = 0.0068)
    np.testing.assert_allclose(freq, (HAND_BARS @ theta).T, atol=0.031)
    other = datasets.make_bars(n_docs=6, size=2, doc_length=4000, alpha=1.0, seed=6).theta
    assert np.abs(freq - (HAND_BARS @ other).T).max() > 0.05  # another seed's Θ does not fit them


def test_sample_lda_corpus_returns_the_topics_it_was_given():
    given = [[0.7, 0.1], [0.2, 0.1], [0.1, 0.8]]  # a list: returned as the float64 array of it
    corpus, phi, theta = datasets.sample_lda_corpus(given, 4, doc_length=6, seed=1)
    assert phi.dtype == np.float64 and np.array_equal(phi, np.asarray(given)) and theta.shape == (2, 4)
