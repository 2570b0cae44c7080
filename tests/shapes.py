"""The same fit with shapes rounded up to buckets and with exact shapes (``TOPICJAX_BUCKETS=off``):
the comparison of the shape-bucket tests of every family (tests/core/test_buckets.py,
tests/ptm/test_ptm_buckets.py, tests/ttmm/test_ttmm_buckets.py), and a count of the programs a fit lowers."""

from __future__ import annotations

import contextlib


def bucketed_and_exact(monkeypatch, fit):
    """``fit()`` run with buckets (the default) and then with ``TOPICJAX_BUCKETS=off``; returns
    the two results in that order, the variable unset again."""
    monkeypatch.delenv("TOPICJAX_BUCKETS", raising=False)
    bucketed = fit()
    monkeypatch.setenv("TOPICJAX_BUCKETS", "off")
    exact = fit()
    monkeypatch.delenv("TOPICJAX_BUCKETS")
    return bucketed, exact


@contextlib.contextmanager
def lowered_programs():
    """Inside the ``with``: a list that gains an entry for every program JAX lowers (its
    ``/jax/core/compile/jaxpr_to_mlir_module_duration`` event), to count what a fit compiles."""
    import jax.monitoring

    lowered: list = []

    def on_event(name, secs, **kw):
        if name == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowered.append(name)

    jax.monitoring.register_event_duration_secs_listener(on_event)
    try:
        yield lowered
    finally:
        jax.monitoring.unregister_event_duration_listener(on_event)
