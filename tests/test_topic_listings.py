"""Issue 45 item 2: every family says which topics are live, empty or background
(``topic_live_``, ``empty_topics_``, ``background_topics_``), and the listings (``top_words``,
``print_topics``) leave the empty ones out and mark the background ones.  Expected words come from a
loop over the column, not from the listing code."""

from __future__ import annotations

import io

import numpy as np
import pytest

import topicjax as tj

import fitted_models as fm


@pytest.fixture(scope="module")
def corpus():
    return fm.corpus()  # shared with the estimator-wide tests (tests/fitted_models.py)


def by_loop(phi, vocab, j, n):
    col = np.asarray(phi)[:, j]
    return [vocab[i] for i in sorted(range(col.size), key=lambda i: (-col[i], i))[:n]]


def test_artm_marks_background_and_empty_topics(corpus):
    m = tj.ARTM(4, background_topics=1, max_iter=3, progress=False, random_state=0).fit(corpus)
    assert m.background_topics_ == ["background_0"] and m.topic_names_[3] == "background_0"
    assert m.empty_topics_ == [] and m.topic_live_.all()
    lines = m.print_topics(2, file=io.StringIO())
    assert lines[3] == f"background_0 (background): {' '.join(by_loop(m.phi_, corpus.vocab, 3, 2))}"
    assert lines[0] == f"topic_0: {' '.join(by_loop(m.phi_, corpus.vocab, 0, 2))}"

    # a topic removed by the fit (ARTM Notes 1-2): zero column, topic_alive_ 0
    phi, alive = m.phi_, m.topic_alive_
    try:
        m.phi_ = phi.copy()
        m.phi_[:, 1] = 0.0
        m.topic_alive_ = np.where(np.arange(4) == 1, 0, alive).astype(alive.dtype)
        assert m.empty_topics_ == ["topic_1"]
        np.testing.assert_array_equal(m.topic_live_, [True, False, True, True])
        assert m.top_words(2)[1] == [] and m.top_words(2)[2] == by_loop(m.phi_, corpus.vocab, 2, 2)
        assert m.print_topics(2, file=io.StringIO())[1] == "topic_1 (empty)"
    finally:
        m.phi_, m.topic_alive_ = phi, alive


@pytest.mark.parametrize("name", ["PLSA", "TTMM"])
def test_other_families_have_the_same_attributes(corpus, name):
    m = fm.fitted(name)
    assert m.background_topics_ == [] and m.topic_live_.dtype == bool and m.topic_live_.shape == (fm.T,)
    assert m.empty_topics_ == [str(n) for n, live in zip(m.get_feature_names_out(), m.topic_live_) if not live]
    assert len(m.print_topics(1, file=io.StringIO())) == fm.T


def test_unfitted_model_has_no_topic_attributes():
    m = tj.PLSA(3)
    for name in ("topic_live_", "empty_topics_", "background_topics_"):
        assert not hasattr(m, name)
