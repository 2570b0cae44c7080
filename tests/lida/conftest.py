"""Fixtures of the LIDA tests: a small bars corpus and fits shared between test modules."""

from __future__ import annotations

import pytest

from topicjax.data.datasets import make_bars
from topicjax.lida import LIDA

from .common import est


@pytest.fixture(scope="session")
def small():
    corpus, phi, _ = make_bars(n_docs=30, size=3, doc_length=12, alpha=0.5, seed=3)
    return corpus, phi


@pytest.fixture(scope="session")
def fitted_lida(small):
    corpus, _ = small
    return est("lida", max_iter=8, hyper_start=2, eval_every=4).fit(corpus)


@pytest.fixture(scope="session")
def bars():
    return make_bars(n_docs=300, size=5, doc_length=60, alpha=0.5, seed=0)[:2]  # (corpus, true Φ)


@pytest.fixture(scope="session")
def lda_bars(bars):
    corpus, _ = bars
    return LIDA(variant="lda", n_components=10, max_iter=120, burn_in=80, random_state=0, progress=False).fit(corpus)
