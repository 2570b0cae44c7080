"""The environment of a test's child interpreter whose work is checked, not timed or compared
bit for bit with another setting (the documented examples, the device check's dry run)."""

from __future__ import annotations

import os

#: XLA's CPU backend at optimisation level 0: such children's small programs spend most of their
#: time compiling, and compile in about two thirds of the time; what runs is the same code.
FAST_COMPILE = "--xla_backend_optimization_level=0"


def quick_child_env(**extra: str) -> dict:
    """``os.environ`` on the CPU, at :data:`FAST_COMPILE`, with the compiled kernels on one thread
    (``TOPICJAX_THREADS=1``: no second thread to wait for at every call on cores that the suite's
    other processes hold), plus ``extra``."""
    return dict(os.environ, JAX_PLATFORMS="cpu", TOPICJAX_THREADS="1",
                XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip(), **extra)
