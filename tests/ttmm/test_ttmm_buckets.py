"""TTMM shapes rounded up to buckets (issue 42 item 3): corpora of similar size share the compiled
EM step, SGD epoch and sweeps, and the padding rows change no result.

* one EM step over a bucket's rows (128 for 70 documents) against eq. 6-11 written with numpy over
  the real documents: π's update and log P(d) leave the padding rows out;
* fits with buckets (the default) against the same fits with ``TOPICJAX_BUCKETS=off`` (exact
  shapes): EM, SGD (its minibatches padded with empty entries), ``fit_many``; π, τ, β, Θ, L of
  every iteration, and every inference (``transform``, ``predict_proba``, ``score_samples``,
  ``topic_shares``, ``score``), whose outputs have the documents' rows only;
* L of a bucketed fit against eq. 3-4 computed with numpy on its final parameters;
* two corpora of different sizes in one bucket: the second's EM fit and inference lower no program.
"""

from __future__ import annotations

import jax
import jax.monitoring
import numpy as np
import pytest
from scipy.special import logsumexp

from topicjax.ttmm import TTMM, TTMMParams, sample_corpus, synthetic_params
from topicjax.ttmm import em
from topicjax.ttmm.params import random_params
from topicjax.ttmm.sweeps import doc_rows, theme_layout
from shapes import bucketed_and_exact, lowered_programs, programs_per_run

N_DOCS, J, K, W = 70, 3, 4, 30
TRUTH = synthetic_params(J, K, W, concentration=0.3, seed=0)


def _corpus(n_docs=N_DOCS, seed=0):
    return sample_corpus(TRUTH, n_docs=n_docs, doc_length=(10, 40), seed=seed)[0]


@pytest.fixture(scope="module")
def corpus():
    return _corpus()


def _log_p_doc(params, dense):
    """log P(d | h=j) (eq. 2) and log P(d) (eq. 3) with numpy, float64."""
    pi, tau, beta = (np.asarray(x, np.float64) for x in params)
    log_dj = dense @ np.log(tau @ beta).T
    return log_dj, logsumexp(np.log(pi)[None, :] + log_dj, axis=1)


def test_an_em_step_over_padded_rows_is_eq_6_to_8_on_the_documents(corpus):
    rows = doc_rows(N_DOCS, True)
    assert rows == 128  # sweeps.DOC_FLOOR
    data = theme_layout(corpus, J, buckets=True)
    rng = np.random.default_rng(0)
    params = TTMMParams(*(jax.device_put(np.asarray(x / x.sum(-1, keepdims=True), np.float32)) for x in
                          (rng.uniform(0.2, 1, J), rng.uniform(0.2, 1, (J, K)), rng.uniform(0.2, 1, (K, W)))))
    state = em.TTMMEMState(params, jax.device_put(np.zeros(rows, np.float32)), jax.device_put(np.int32(0)))
    new = em.em_step(state, data, jax.device_put(np.int32(N_DOCS)))
    log_dj, log_d = _log_p_doc(params, corpus.to_dense().astype(np.float64))
    post = np.exp(np.log(np.asarray(params.pi, np.float64))[None, :] + log_dj - log_d[:, None])  # eq. 6
    np.testing.assert_allclose(np.asarray(new.params.pi), post.sum(0) / N_DOCS, rtol=2e-5)  # eq. 8 over D
    ll = np.asarray(new.doc_loglik)
    np.testing.assert_allclose(ll[:N_DOCS], log_d, rtol=2e-6)
    assert not ll[N_DOCS:].any()


def test_the_initial_topics_over_a_padded_vocabulary_are_the_exact_draw():
    """β's first 30 columns of a draw over 32 (a bucket) are the draw over 30; the others 0."""
    key = jax.random.PRNGKey(5)
    exact = random_params(key, J, K, W)
    padded = random_params(key, J, K, 32, real_words=jax.device_put(np.int32(W)))
    np.testing.assert_array_equal(np.asarray(padded.tau), np.asarray(exact.tau))
    np.testing.assert_allclose(np.asarray(padded.beta)[:, :W], np.asarray(exact.beta), rtol=1e-6)
    assert not np.asarray(padded.beta)[:, W:].any()


def _close(a, b, rtol=2e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize("solver", ["em", "sgd"])
def test_a_bucketed_fit_is_the_exact_shape_fit(monkeypatch, corpus, solver):
    test = _corpus(9, seed=1)

    def fit():
        m = TTMM(K, n_themes=J, solver=solver, batch_size=16, max_iter=6, tol=0, random_state=0,
                 progress=False).fit(corpus)
        return m, [m.transform(test), m.predict_proba(test), m.score_samples(test), m.topic_shares(test),
                   m.score(test)]

    (a, outs_a), (b, outs_b) = bucketed_and_exact(monkeypatch, fit)
    for name in ("pi_", "tau_", "beta_", "theta_"):
        _close(getattr(a, name), getattr(b, name))
    assert a.theta_.shape == (K, N_DOCS) and a.beta_.shape == (K, W) and a.n_iter_ == b.n_iter_ == 6
    assert a._words(W) == 128  # the vocabulary of 30 words padded to the floor (EM), not for SGD's softmax
    _close(a.loglik_history_, b.loglik_history_, rtol=1e-7, atol=0)
    assert [o.shape for o in outs_a[:4]] == [(9, K), (9, J), (9,), (9, K)]
    for x, y in zip(outs_a, outs_b):
        _close(x, y)
    # L of the last parameters: eq. 3-4 over the 70 documents (no padding row adds log Σ π)
    assert a.loglik_history_[-1] == pytest.approx(
        _log_p_doc((a.pi_, a.tau_, a.beta_), corpus.to_dense().astype(np.float64))[1].sum(), rel=1e-6)


def test_restarts_with_buckets_are_the_exact_shape_restarts(monkeypatch, corpus):
    (a0, a1), (b0, b1) = bucketed_and_exact(monkeypatch, lambda: TTMM(K, n_themes=J, max_iter=4, tol=0, progress=False)
                               .fit_many(corpus, seeds=[0, 1]))
    for a, b in ((a0, b0), (a1, b1)):
        _close(a.beta_, b.beta_)
        _close(a.theta_, b.theta_)
        _close(a.loglik_history_, b.loglik_history_, rtol=1e-7, atol=0)


def test_sizes_in_one_bucket_share_the_programs(monkeypatch):
    """100 and 105 documents (128 rows both) over 30 and 28 words (128 columns both, the floor): the second
    corpus's EM fit and inference lower no program; with exact shapes a corpus of another size
    lowers its own."""
    other = sample_corpus(synthetic_params(J, K, 28, concentration=0.3, seed=1), n_docs=105, doc_length=(10, 40),
                          seed=3)[0]

    def run(c):
        m = TTMM(K, n_themes=J, max_iter=3, progress=False).fit(c)
        m.transform(c)
        m.score_samples(c)

    first = _corpus(100, seed=2)
    counts, exact = programs_per_run(monkeypatch, [lambda: run(first), lambda: run(other)],
                                     lambda: TTMM(K, n_themes=J, max_iter=3, progress=False).fit(_corpus(102, seed=4)))
    assert counts[1] == 0, counts
    assert exact


def test_sizes_below_the_floors_share_one_program(monkeypatch):
    """20 documents over 30 words and 100 over 12: without the floors their words' and pieces'
    buckets differ (32 and 16 columns of β; about 30 and 100 pieces: 64 and 128), with them both
    pad to 128 columns and 256 pieces (and 128 rows): the second corpus's EM fit and inference
    lower no program."""
    from topicjax.core import layout

    small = _corpus(20, seed=5)
    other = sample_corpus(synthetic_params(J, K, 12, concentration=0.3, seed=1), n_docs=100, doc_length=(10, 40),
                          seed=6)[0]
    pieces = [int(np.sum(-(-np.diff(c.doc_offsets) // layout.PIECE))) for c in (small, other)]
    assert [layout.bucket_size(p, layout.PIECE_STEP) for p in pieces] == [64, 128]
    assert [layout.bucket_size(c.n_words, layout.DOC_STEP) for c in (small, other)] == [32, 16]
    monkeypatch.delenv("TOPICJAX_BUCKETS", raising=False)
    m = TTMM(K, n_themes=J, max_iter=3, progress=False).fit(small)
    m.transform(small)
    with lowered_programs() as lowered:
        m = TTMM(K, n_themes=J, max_iter=3, progress=False).fit(other)
        assert m.transform(other).shape == (100, K) and m.beta_.shape == (K, 12)
        assert lowered == [], len(lowered)
