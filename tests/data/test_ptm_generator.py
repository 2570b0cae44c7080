"""datasets.sample_ptm_corpus draws from PTM's generative process (Soleimani & Miller 2014,
sec. 3): checked against the process's own statements, not against the generator's code."""

import numpy as np
import pytest

from topicjax import datasets


def test_truth_has_the_models_structure():
    data = datasets.sample_ptm_corpus(50, n_topics=4, n_words=60, n_specific=3, specific_mass=0.4, seed=2)
    M, W, K = 4, 60, 3
    assert data.phi.shape == (W, M) and data.theta.shape == (M, 50) and data.specific.shape == (M, W)
    np.testing.assert_allclose(data.phi.sum(0), 1.0)            # eq. 5's constraint: each topic a pmf
    np.testing.assert_allclose(data.shared.sum(), 1.0)
    np.testing.assert_allclose(data.shared[:M * K], 0.4 / (M * K))
    for j in range(M):
        # shared words take β_0 exactly; 2K specific words: K doubled, K absent
        off = ~data.specific[j]
        np.testing.assert_array_equal(data.phi[off, j], data.shared[off])
        assert data.specific[j].sum() == 2 * K
        ratio = data.phi[data.specific[j], j] / data.shared[data.specific[j]]
        assert sorted(ratio.tolist()) == [0.0] * K + [2.0] * K
    # each salient word: doubled by one topic, absent from one, shared by the others
    rows = data.phi[:M * K] / data.shared[:M * K, None]
    assert ((rows == 2).sum(1) == 1).all() and ((rows == 0).sum(1) == 1).all()
    # documents: 1 or 2 topics, proportions on the switched-on topics only, summing to 1
    on = (data.theta > 0).sum(0)
    assert on.min() >= 1 and on.max() <= 2
    np.testing.assert_allclose(data.theta.sum(0), 1.0)
    assert data.corpus.n_docs == 50 and data.corpus.n_words == W


def test_tokens_follow_the_topics_and_the_shared_model():
    # one topic per document: the pooled counts of a topic's documents estimate its pmf
    data = datasets.sample_ptm_corpus(1200, n_topics=3, n_words=40, n_specific=4, topics_per_doc=(1, 1),
                                      doc_length=(150, 250), seed=0)
    counts = np.asarray(data.corpus.to_dense())
    lengths = counts.sum(1)
    assert lengths.min() >= 150 and lengths.max() <= 250
    topic = data.theta.argmax(0)
    assert ((data.theta > 0).sum(0) == 1).all()
    for j in range(3):
        pooled = counts[topic == j].sum(0)
        n, p = pooled.sum(), data.phi[:, j]
        # every word within 5 binomial standard deviations of its probability; absent words never drawn
        assert (np.abs(pooled - n * p) <= 5 * np.sqrt(n * p * (1 - p)) + 1e-9).all(), j
        assert (pooled[p == 0] == 0).all()
    # topics used about equally often: the corpus frequencies estimate β_0 (eq. 11's premise)
    freq = counts.sum(0) / counts.sum()
    assert np.abs(freq - data.shared).max() < 0.2 * data.shared.max()


def test_seeded_and_bad_arguments_named():
    a = datasets.sample_ptm_corpus(10, n_topics=2, n_words=10, n_specific=2, seed=5)
    b = datasets.sample_ptm_corpus(10, n_topics=2, n_words=10, n_specific=2, seed=5)
    np.testing.assert_array_equal(a.theta, b.theta)
    for kwargs, name in [({"n_topics": 1}, "n_topics"), ({"n_words": 30}, "n_words"),
                         ({"specific_mass": 1.0}, "specific_mass"), ({"specific_mass": 0.0}, "specific_mass"),
                         ({"topics_per_doc": (0, 2)}, "topics_per_doc"), ({"topics_per_doc": (2, 1)}, "topics_per_doc"),
                         ({"topics_per_doc": (1, 7)}, "topics_per_doc"), ({"doc_length": (5, 1)}, "doc_length"),
                         ({"n_docs": 0}, "n_docs")]:
        with pytest.raises(ValueError, match=name):
            datasets.sample_ptm_corpus(**{"n_docs": 5, **kwargs})
