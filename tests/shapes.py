"""The same fit with shapes rounded up to buckets and with exact shapes (``TOPICJAX_BUCKETS=off``):
the comparison of the shape-bucket tests of every family (tests/core/test_buckets.py,
tests/ptm/test_ptm_buckets.py, tests/ttmm/test_ttmm_buckets.py), and counts of the programs fits lower."""

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


def programs_per_run(monkeypatch, runs, exact_run) -> tuple[list, int]:
    """The programs lowered by each of ``runs`` (callables, in order) with buckets on, and by
    ``exact_run`` with ``TOPICJAX_BUCKETS=off`` (a corpus of another size then lowers its own: the
    count is seen to work)."""
    monkeypatch.delenv("TOPICJAX_BUCKETS", raising=False)
    with lowered_programs() as lowered:
        counts = []
        for run in runs:
            lowered.clear()
            run()
            counts.append(len(lowered))
        monkeypatch.setenv("TOPICJAX_BUCKETS", "off")
        lowered.clear()
        exact_run()
        return counts, len(lowered)
