"""The chunked synthetic-corpus generator (topicjax.data.synthetic) against its generative process."""

from __future__ import annotations

import numpy as np
import pytest

from topicjax.data import synthetic


def small(**kw):
    args = dict(n_docs=400, n_words=300, mean_length=60.0, n_topics=6, seed=3)
    args.update(kw)
    return synthetic.LDAGenerator(**args)


def test_chunks_are_valid_csr_with_the_drawn_lengths():
    gen = small()
    seen = 0
    for chunk in gen.chunks(chunk_docs=150):
        n = len(chunk.lengths)
        assert chunk.first == seen
        assert chunk.offsets[0] == 0 and chunk.offsets[-1] == chunk.word_ids.size and np.all(np.diff(chunk.offsets) >= 1)
        for d in range(n):
            w = chunk.word_ids[chunk.offsets[d]:chunk.offsets[d + 1]]
            c = chunk.counts[chunk.offsets[d]:chunk.offsets[d + 1]]
            assert np.all(np.diff(w) > 0), "words of a document are sorted and distinct"
            assert c.min() >= 1 and int(c.sum()) == int(chunk.lengths[d])
        assert chunk.word_ids.min() >= 0 and chunk.word_ids.max() < gen.n_words
        np.testing.assert_allclose(chunk.theta.sum(0), 1.0, rtol=1e-5)
        seen += n
    assert seen == gen.n_docs


def test_same_arguments_same_corpus_and_seed_changes_it():
    a = [c.word_ids for c in small().chunks(100)]
    b = [c.word_ids for c in small().chunks(100)]
    c = [c.word_ids for c in small(seed=4).chunks(100)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(x.size == y.size and np.array_equal(x, y) for x, y in zip(a, c))


def test_phi_columns_are_zipf_laws_over_a_permutation():
    gen = small(zipf=1.2)
    phi = gen.phi()
    np.testing.assert_allclose(phi.sum(0), 1.0)
    ranks = np.arange(1, gen.n_words + 1, dtype=np.float64)
    expected = ranks ** -1.2 / np.sum(ranks ** -1.2)
    for k in range(gen.n_topics):
        np.testing.assert_allclose(np.sort(phi[:, k])[::-1], expected, rtol=1e-12)
    assert not np.allclose(phi[:, 0], phi[:, 1])


def test_mean_length_and_word_frequencies_follow_the_generative_process():
    """Over 3000 documents: the mean length is the requested one (lognormal + 1), and the corpus's
    word frequencies equal E[Σ_d n_d φ θ_d] = φ (Σ_d n_d θ_d) computed from the chunk's own θ,
    within a chi-square bound (independent of how the words were drawn)."""
    gen = small(n_docs=3000, n_words=200, mean_length=50.0, n_topics=4, seed=11)
    phi = gen.phi()
    observed = np.zeros(gen.n_words)
    expected = np.zeros(gen.n_words)
    lengths = []
    for chunk in gen.chunks(1000):
        np.add.at(observed, chunk.word_ids, chunk.counts)
        # tokens of each topic are multinomial(n_d, θ_d); their words follow φ_k
        expected += phi @ (chunk.theta * chunk.lengths[None, :]).sum(1)
        lengths.append(chunk.lengths)
    lengths = np.concatenate(lengths)
    assert lengths.mean() == pytest.approx(50.0, rel=0.05)
    keep = expected > 5
    chi2 = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    dof = int(keep.sum())
    # topic counts per document add variance beyond the multinomial: allow a generous factor
    assert chi2 < 3.0 * dof + 10 * np.sqrt(2 * dof), (chi2, dof)


def test_bad_arguments_are_named():
    for kw, name in ((dict(n_docs=0), "n_docs"), (dict(n_words=-1), "n_words"), (dict(n_topics=2.5), "n_topics"),
                     (dict(alpha=0.0), "alpha"), (dict(mean_length=0.5), "mean_length"),
                     (dict(spread=-1.0), "spread"), (dict(zipf=float("nan")), "zipf")):
        with pytest.raises(ValueError, match=name):
            small(**kw)
    with pytest.raises(ValueError, match="chunk_docs"):
        next(small().chunks(0))
