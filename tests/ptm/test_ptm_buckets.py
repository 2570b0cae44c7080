"""PTM shapes rounded up to buckets (issue 42 item 3): corpora of similar size share the compiled
GEM programs, and the padding documents change no result.

* :func:`topicjax.ptm.gem.doc_permutation` (the seed documents of sec. 6.3 over a bucket's rows)
  against ``jax.random.permutation`` of the real documents, across the change of its sorting rounds;
* fits with buckets (the default) against the same fits with ``TOPICJAX_BUCKETS=off`` (exact
  shapes), for the 2014 and 2020 BICs: Φ, Θ, the switches, the BIC history, the flips of every
  iteration, ``fit_many``, ``transform``, the log-likelihoods; the padding never appears;
* the BIC of a bucketed fit against 2014 eq. 26 / 2020 eq. 16 written out term by term for the
  real documents (``ref_bic`` of ``test_ptm_bic.py``): padding rows add neither ``log M`` nor a
  likelihood or cost term;
* corpora below the floors: one program, and the floored fit is the exact-shape fit;
* two corpora of different sizes in one bucket: the second fit (and its ``transform``) lowers no
  program; with exact shapes it lowers its own.
"""

from __future__ import annotations

import jax
import jax.monitoring
import numpy as np
import pytest

import topicjax as tj
from topicjax.core import layout as core_layout
from topicjax.ptm import gem
from topicjax.ptm.layout import ptm_data, real_docs

from test_ptm_bic import ref_bic
from shapes import bucketed_and_exact, lowered_programs, programs_per_run

#: 70 documents: a bucket of 80 rows (75 documents share it); 25 words of bars and 2 that no
#: document uses (words of the vocabulary, with beta0 = 0): 27, a bucket of 32
N_DOCS, N_WORDS = 70, 27


def _corpus(n_docs=N_DOCS, seed=3, n_words=N_WORDS):
    dense = tj.datasets.make_bars(n_docs=n_docs, doc_length=40, seed=seed)[0].to_dense()
    return tj.Corpus.from_dense(np.hstack([dense, np.zeros((n_docs, n_words - dense.shape[1]), dense.dtype)]))


@pytest.fixture(scope="module")
def corpus():
    return _corpus()


def _make(kind="2014"):
    return tj.PTM(4, bic=kind, max_iter=5, tol=0, random_state=0, progress=False)


@pytest.mark.parametrize("n, slots", [(1, 16), (5, 5), (70, 80), (163, 176), (1600, 1664), (1700, 1792)])
def test_seed_documents_are_jax_s_permutation_of_the_real_documents(n, slots):
    """1600 documents take one sorting round, a bucket of 1664 rows two: the rounds follow ``n``."""
    key = jax.random.PRNGKey(11)
    got = np.asarray(gem.doc_permutation(key, slots, jax.device_put(np.int32(n))))
    np.testing.assert_array_equal(got[:n], np.asarray(jax.random.permutation(key, n)))
    np.testing.assert_array_equal(got[n:], np.arange(n, slots))
    assert gem._shuffle_rounds(1600) == 1 and gem._shuffle_rounds(1664) == 2
    for k, start in enumerate(gem._ROUND_STARTS, 1):  # where the traced count of rounds changes
        assert gem._shuffle_rounds(start) == k and gem._shuffle_rounds(start - 1) == k - 1


def test_the_layout_pads_documents_and_chunks(corpus):
    data = ptm_data(corpus, block_tokens=64, buckets=True)
    exact = ptm_data(corpus, block_tokens=64)
    assert data.doc_length.shape == (80,) and exact.doc_length.shape == (N_DOCS,)
    assert data.beta0.shape == (32,) and exact.beta0.shape == (N_WORDS,) and int(data.n_words) == N_WORDS
    np.testing.assert_array_equal(np.asarray(data.beta0)[:N_WORDS], np.asarray(exact.beta0))
    assert not np.asarray(data.beta0)[25:].any()  # the two unused words and the padding
    assert real_docs(data) == real_docs(exact) == N_DOCS
    np.testing.assert_array_equal(np.asarray(data.doc_length)[:N_DOCS], corpus.doc_lengths)
    assert not np.asarray(data.doc_length)[N_DOCS:].any()
    for rows, ex in ((data.docs, exact.docs), (data.words, exact.words)):
        C = ex.item.shape[0]
        assert rows.item.shape[0] == core_layout.bucket_size(C)  # chunks of 4 rows: many, rounded up
    # no token in a padding row: the counts are the corpus's, every document's in its own rows
    assert float(np.asarray(data.docs.count).sum()) == corpus.n_tokens
    assert np.asarray(data.docs.item)[np.asarray(data.docs.count).sum(-1) > 0].max() == N_DOCS - 1


def _assert_same(a, b, test):
    assert a.theta_.shape == b.theta_.shape == (4, N_DOCS) and a.v_.shape == (4, N_DOCS)
    assert a.u_.shape == a.beta_.shape == (4, N_WORDS) and a.phi_.shape == (N_WORDS, 4)
    np.testing.assert_array_equal(a.u_, b.u_)
    np.testing.assert_array_equal(a.v_, b.v_)
    np.testing.assert_allclose(a.phi_, b.phi_, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(a.theta_, b.theta_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(a.bic_history_, b.bic_history_, rtol=1e-7)  # float32 sums over more zeros
    assert a.n_iter_ == b.n_iter_
    assert [(h["u_flips"], h["v_flips"]) for h in a.history_] == [(h["u_flips"], h["v_flips"]) for h in b.history_]
    np.testing.assert_allclose(a.transform(test), b.transform(test), rtol=1e-5, atol=1e-7)
    assert a.transform(test).shape == (test.n_docs, 4)
    assert a.log_likelihood(test) == pytest.approx(b.log_likelihood(test), rel=1e-6)
    alpha = np.full((4, test.n_docs), 0.25)
    assert a.log_likelihood(test, alpha) == pytest.approx(b.log_likelihood(test, alpha), rel=1e-6)
    assert a.score(test) == pytest.approx(b.score(test), rel=1e-6)


@pytest.mark.parametrize("kind", ["2014", "2020"])
def test_a_bucketed_fit_is_the_exact_shape_fit(monkeypatch, corpus, kind):
    bucketed, exact = bucketed_and_exact(monkeypatch, lambda: _make(kind).fit(corpus))
    assert bucketed.n_iter_ == 5 and bucketed.history_[0]["v_flips"] + bucketed.history_[0]["u_flips"] > 0
    _assert_same(bucketed, exact, _corpus(9, seed=5))


def test_restarts_with_buckets_are_the_exact_shape_restarts(monkeypatch, corpus):
    (a0, a1), (b0, b1) = bucketed_and_exact(monkeypatch, lambda: _make().fit_many(corpus, seeds=[0, 1]))
    for a, b in ((a0, b0), (a1, b1)):
        np.testing.assert_array_equal(a.v_, b.v_)
        np.testing.assert_allclose(a.theta_, b.theta_, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(a.bic_history_, b.bic_history_, rtol=1e-7)  # float32 sums over more zeros


@pytest.mark.parametrize("kind", ["2014", "2020"])
def test_the_bic_of_a_bucketed_fit_counts_the_real_documents(monkeypatch, corpus, kind):
    """BIC of the fitted switches and parameters written out from the printed equation over the 70
    documents and 27 words; the fit's state has 80 rows (10 with no document) and 32 words (5 not
    in the vocabulary, whose count N would enter the 2014 prior and the 2020 shared costs)."""
    monkeypatch.delenv("TOPICJAX_BUCKETS", raising=False)
    model = _make(kind).fit(corpus)
    assert model.last_state_.v.shape[0] == 80 and model.last_state_.u.shape[1] == 32
    dense = corpus.to_dense().astype(np.float64)
    beta = np.asarray(model.beta_, np.float64)
    beta0 = np.asarray(model.beta0_, np.float64)
    want = ref_bic(kind, dense, model.u_, model.v_, np.asarray(model.theta_, np.float64), beta, beta0)
    assert model.bic_ == pytest.approx(want, rel=1e-6)


def test_sizes_in_one_bucket_share_the_programs(monkeypatch):
    """70 documents over 27 words and 75 over 30 (80 rows and 32 words both, other tokens and
    pieces): the second corpus's fit, transform and log-likelihood lower no program; with exact
    shapes it lowers its own."""
    small, large = _corpus(70, seed=1), _corpus(75, seed=2, n_words=30)
    assert small.n_tokens != large.n_tokens

    def run(c):
        m = _make().fit(c)
        m.transform(c)
        m.log_likelihood(c)

    counts, exact = programs_per_run(monkeypatch, [lambda: run(small), lambda: run(large)],
                                     lambda: _make().fit(_corpus(72, seed=4)))
    assert counts[1] == 0, counts
    assert exact


def test_below_the_floors_one_program_and_the_exact_shape_fit(monkeypatch):
    """12 documents over 14 words and 30 over 27: their buckets differ without the floors (16 and
    32 documents, 16 and 32 words), with them (:data:`topicjax.ptm.layout.PTM_DOC_FLOOR`,
    ``PTM_WORD_FLOOR``: 32) both pad to 32 documents and 32 words.  The floored fit of the small
    corpus is its exact-shape fit (switches, Φ, Θ, BIC history, transform); the larger corpus's fit
    and transform then lower no program."""
    def _make2():
        return tj.PTM(2, max_iter=5, tol=0, random_state=0, progress=False)

    bars = tj.datasets.make_bars(n_docs=12, doc_length=40, seed=8)[0].to_dense()
    dense = bars[:, :14].copy()
    dense[:, :11] += bars[:, 14:]  # 25 bars words folded onto 14: every token kept
    small, large = tj.Corpus.from_dense(dense), _corpus(30, seed=9)
    assert [core_layout.bucket_size(n, core_layout.DOC_STEP) for n in (12, 14, 30, 27)] == [16, 16, 32, 32]
    bucketed, exact = bucketed_and_exact(monkeypatch, lambda: _make2().fit(small))
    assert bucketed.last_state_.v.shape[0] == 32 and bucketed.last_state_.u.shape[1] == 32
    assert bucketed.theta_.shape == exact.theta_.shape == (2, 12) and bucketed.phi_.shape == (14, 2)
    np.testing.assert_array_equal(bucketed.u_, exact.u_)
    np.testing.assert_array_equal(bucketed.v_, exact.v_)
    np.testing.assert_allclose(bucketed.phi_, exact.phi_, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(bucketed.theta_, exact.theta_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(bucketed.bic_history_, exact.bic_history_, rtol=1e-7)
    assert bucketed.n_iter_ == exact.n_iter_
    np.testing.assert_allclose(bucketed.transform(small), exact.transform(small), rtol=1e-5, atol=1e-7)
    with lowered_programs() as lowered:
        model = _make2().fit(large)
        assert model.transform(large).shape == (30, 2)
        assert lowered == [], len(lowered)
