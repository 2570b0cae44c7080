"""Fixtures of the tuning tests: a small bars corpus with labels, split into training,
validation and test documents, and a float64 switch scoped to one test module."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import topicjax as tj


def bars_with_labels(n_docs: int = 80, seed: int = 0):
    """The bars corpus with a label per document: the index (mod 3) of the bar holding most of
    its tokens (three classes that the topics predict)."""
    corpus, phi, _ = tj.datasets.make_bars(n_docs=n_docs, seed=seed)
    mass = corpus.to_dense().astype(np.float64) @ (phi > 0)  # tokens of each document on each bar
    labels = np.argmax(mass, axis=1) % 3
    return corpus.with_labels([str(v) for v in labels], label_names=["0", "1", "2"])


@pytest.fixture(scope="session")
def bars_split():
    """``(train, valid, test)``: 60, 20 and 20 documents of a labelled bars corpus."""
    corpus = bars_with_labels(100, seed=0)
    rest, test = corpus.train_test_split(20, seed=1)
    train, valid = rest.train_test_split(20, seed=2)
    return train, valid, test


@pytest.fixture(scope="module")
def x64():
    """float64 for the tests of one module, restored afterwards (the other tests run in float32
    in the same process)."""
    old = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old)
