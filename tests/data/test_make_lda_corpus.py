"""datasets.make_lda_corpus / lda_corpus_parts: the scale generator's public entry points."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from topicjax import datasets
from topicjax.data import synthetic
from topicjax.scale.store import BatchStore, write_store


def test_shapes_truth_and_seed():
    corpus, phi, theta = datasets.make_lda_corpus(300, 500, 60.0, n_topics=7, seed=2, chunk_docs=128)
    assert (corpus.n_docs, corpus.n_words) == (300, 500)
    assert phi.shape == (500, 7) and theta.shape == (7, 300)
    np.testing.assert_allclose(phi.sum(0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(theta.sum(0), 1.0, rtol=1e-5)
    again = datasets.make_lda_corpus(300, 500, 60.0, n_topics=7, seed=2, chunk_docs=128)
    assert again.corpus.equals(corpus) and np.array_equal(again.theta, theta)
    other = datasets.make_lda_corpus(300, 500, 60.0, n_topics=7, seed=3, chunk_docs=128)
    assert not other.corpus.equals(corpus)
    assert list(corpus.vocab[:3]) == ["w0", "w1", "w2"]


def test_expected_word_counts_follow_the_generative_process():
    """E[n_w] = sum_d n_d sum_k phi_wk theta_kd (LDA with fixed topics): the observed counts of the
    frequent words are within 5 standard deviations (Poisson approximation) of it."""
    corpus, phi, theta = datasets.make_lda_corpus(2000, 300, 80.0, n_topics=5, seed=0, alpha=0.5)
    n_d = corpus.doc_lengths.astype(np.float64)
    expected = phi @ (theta.astype(np.float64) @ n_d)
    observed = np.bincount(corpus.word_ids, weights=corpus.counts, minlength=corpus.n_words)
    frequent = expected > 50
    assert frequent.sum() > 50
    z = (observed[frequent] - expected[frequent]) / np.sqrt(expected[frequent])
    assert np.abs(z).max() < 5.0
    assert abs(n_d.mean() - 80.0) < 4.0


def test_presets_fill_sizes_and_explicit_sizes_override():
    c = datasets.make_lda_corpus(preset="kos", n_docs=40, n_topics=3).corpus
    assert (c.n_docs, c.n_words) == (40, synthetic.PRESETS["kos"]["n_words"])
    with pytest.raises(ValueError, match="preset must be one of"):
        datasets.make_lda_corpus(preset="nyt", n_topics=3)
    with pytest.raises(TypeError, match="make_lda_corpus needs n_words, mean_length"):
        datasets.make_lda_corpus(10, n_topics=3)
    with pytest.raises(ValueError, match="chunk_docs"):
        datasets.make_lda_corpus(10, 20, 5.0, n_topics=2, chunk_docs=0)
    with pytest.raises(ValueError, match="n_topics"):
        datasets.make_lda_corpus(10, 20, 5.0, n_topics=0)


def test_parts_are_the_same_documents_and_stream_into_a_store(tmp_path):
    args = dict(n_docs=450, n_words=200, mean_length=30.0, n_topics=4, seed=9, chunk_docs=100)
    whole = datasets.make_lda_corpus(**args)
    parts, phi = datasets.lda_corpus_parts(**args)
    np.testing.assert_array_equal(phi, whole.phi)
    store = write_store(parts, tmp_path / "store", batch_size=64)
    back = BatchStore(tmp_path / "store").corpus()
    assert back.n_docs == 450
    np.testing.assert_array_equal(back.doc_offsets, whole.corpus.doc_offsets)
    np.testing.assert_array_equal(back.word_ids, whole.corpus.word_ids)
    np.testing.assert_array_equal(back.counts, whole.corpus.counts)
    assert store.n_batches == 8  # ceil(450 / 64)


def _streamed_peak(tmp_path, n_docs: int) -> int:
    parts, _ = datasets.lda_corpus_parts(n_docs, 2000, 60.0, n_topics=10, seed=1, chunk_docs=200)
    tracemalloc.start()
    try:
        write_store(parts, tmp_path / f"s{n_docs}", batch_size=500)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_streaming_memory_does_not_grow_with_the_corpus(tmp_path):
    """numpy reports its allocations to tracemalloc: the peak while streaming 20x more documents
    stays that of one part (the corpus is never held)."""
    small = _streamed_peak(tmp_path, 400)
    large = _streamed_peak(tmp_path, 8000)
    assert large < 1.5 * small, (small, large)
