"""The same fit with shapes rounded up to buckets and with exact shapes (``TOPICJAX_BUCKETS=off``):
the comparison of the shape-bucket tests of every family (tests/core/test_buckets.py,
tests/ptm/test_ptm_buckets.py, tests/ttmm/test_ttmm_buckets.py)."""

from __future__ import annotations


def bucketed_and_exact(monkeypatch, fit):
    """``fit()`` run with buckets (the default) and then with ``TOPICJAX_BUCKETS=off``; returns
    the two results in that order, the variable unset again."""
    monkeypatch.delenv("TOPICJAX_BUCKETS", raising=False)
    bucketed = fit()
    monkeypatch.setenv("TOPICJAX_BUCKETS", "off")
    exact = fit()
    monkeypatch.delenv("TOPICJAX_BUCKETS")
    return bucketed, exact
