"""``transform`` on awkward inputs (issue 16): documents without tokens get the topic distribution
of no evidence or are dropped when asked, in every family; a count matrix has no vocabulary, so
only its width can be checked (a Corpus carries its words and is checked or re-indexed)."""

from __future__ import annotations


import numpy as np
import pytest
import scipy.sparse as sp

import topicjax as tj
from topicjax.data.corpus import CorpusError

import fitted_models as fm

#: the families, each fitted once with the settings shared by the estimator-wide tests
#: (tests/fitted_models.py: 4 topics; ARTM with a Θ regularizer, which transform applies)
FAMILIES = ["PLSA", "ARTM", "PTM", "TTMM", "LIDA"]


@pytest.fixture(scope="module")
def corpus():
    return fm.corpus()


@pytest.fixture(scope="module")
def fitted(corpus):
    return {name: fm.fitted(name) for name in FAMILIES}


def no_evidence(model) -> np.ndarray:
    """The reference: what a document without words tells about its topics -- nothing."""
    if isinstance(model, tj.TTMM):  # eq. 18 with no words: P(t) = sum_j pi_j tau_jt
        prior = np.asarray(model.pi_, np.float64) @ np.asarray(model.tau_, np.float64)
        return prior / prior.sum()
    T = model.n_components
    alive = np.asarray(getattr(model, "topic_alive_", np.ones(T))) > 0
    return alive / alive.sum()


def family_params():
    return list(FAMILIES)


@pytest.mark.parametrize("name", family_params())
def test_documents_without_tokens(corpus, fitted, name):
    m = fitted[name]
    X = corpus.to_sparse().toarray()[:6]
    W = X.shape[1]
    with_empty = np.vstack([np.zeros((1, W)), X[:3], np.zeros((2, W)), X[3:]])
    kept = [1, 2, 3, 6, 7, 8]
    reference = m.transform(X)

    out = m.transform(with_empty)  # default "keep"
    assert out.shape == (9, 4)
    np.testing.assert_array_equal(out[kept], reference)
    for d in (0, 4, 5):
        np.testing.assert_allclose(out[d], no_evidence(m), rtol=1e-6)
    np.testing.assert_array_equal(m.transform(sp.csr_matrix(with_empty), empty_docs="drop"), reference)
    with pytest.raises(CorpusError, match=r"document 0 of X has no tokens \(3 such document\(s\)\).*"
                                          r"empty_docs='keep'.*empty_docs='drop'"):
        m.transform(with_empty, empty_docs="error")
    with pytest.raises(ValueError, match=r"^empty_docs must be one of 'keep', 'drop', 'error', got 'skip'"):
        m.transform(with_empty, empty_docs="skip")
    # only empty documents
    np.testing.assert_allclose(m.transform(np.zeros((2, W))), np.tile(no_evidence(m), (2, 1)), rtol=1e-6)
    assert m.transform(np.zeros((2, W)), empty_docs="drop").shape == (0, 4)
    # a Corpus holding an empty document (built directly: readers drop or refuse them)
    c = corpus.subset(np.arange(3))
    holed = tj.Corpus(doc_ids=np.where(c.doc_ids >= 1, c.doc_ids + 1, c.doc_ids), word_ids=c.word_ids,
                      counts=c.counts, vocab=c.vocab, n_docs=4)
    out = m.transform(holed)
    np.testing.assert_array_equal(out[[0, 2, 3]], m.transform(c))
    np.testing.assert_allclose(out[1], no_evidence(m), rtol=1e-6)


def test_no_evidence_is_uniform_over_the_topics_left(corpus, fitted):
    """ARTM removes over-regularized topics; a document without tokens gets none of them."""
    m = fitted["ARTM"]
    alive = np.array([1.0, 0.0, 1.0, 1.0], np.float32)
    saved = m.topic_alive_
    try:
        m.topic_alive_ = alive
        out = m.transform(np.zeros((1, corpus.n_words)))
    finally:
        m.topic_alive_ = saved
    np.testing.assert_allclose(out[0], [1 / 3, 0, 1 / 3, 1 / 3], rtol=1e-6)


@pytest.mark.parametrize("name", family_params())
def test_a_matrix_has_no_vocabulary_only_a_width(corpus, fitted, name):
    m = fitted[name]
    X = corpus.to_sparse()[:5]
    with pytest.raises(ValueError, match=r"X has 24 features, but \w+ is expecting 25 features as input: a matrix's "
                                         r"columns must be the model's words, in the order of vocab_ \(re-index a "
                                         r"Corpus with corpus.with_vocab\(model.vocab_\)\)"):
        m.transform(X[:, :-1])
    # A Corpus carries its words: the same documents over a permuted vocabulary are refused, and
    # re-indexed onto the model's vocabulary they give the same proportions.
    perm = np.random.default_rng(0).permutation(corpus.n_words)
    part = corpus.subset(np.arange(5))
    permuted = tj.Corpus.from_sparse(X[:, perm], vocab=[corpus.vocab[i] for i in perm])
    with pytest.raises(ValueError, match="vocab"):
        m.transform(permuted)
    np.testing.assert_array_equal(m.transform(permuted.with_vocab(m.vocab_)), m.transform(part))
