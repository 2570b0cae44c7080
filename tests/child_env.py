"""Environments of a test's child interpreters: :func:`quick_child_env` for one whose work is
checked, not timed or compared bit for bit with another setting (the documented examples, the
device check's dry run); :func:`measured_child_env` for one whose peak memory is measured."""

from __future__ import annotations

import os

#: XLA's CPU compiler settings of the suite (tests/conftest.py, where they are explained): LLVM at
#: -O0, the classic fusion emitters, and each program's machine code generated as one LLVM module
#: (by default XLA splits it into parts compiled on its thread pool: for the suite's small programs
#: the parts' fixed costs, and on cores that the other processes of a run hold, the waits for the
#: pool's threads, outweigh the parallelism; tests/core/test_em.py, twice each on a loaded 2-core
#: machine: 30-33 s of CPU and 65-79 s of run time split, 26-27 s and 38-44 s not)
QUICK_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false",
                       "--xla_cpu_parallel_codegen_split_count=1")


def without_quick_flags(flags: str) -> str:
    """``XLA_FLAGS`` without :data:`QUICK_COMPILE_FLAGS`: XLA's default compiler settings."""
    return " ".join(f for f in flags.split() if f not in QUICK_COMPILE_FLAGS)


#: XLA's CPU backend at optimisation level 0: such children's small programs spend most of their
#: time compiling, and compile in about two thirds of the time; what runs is the same code.
FAST_COMPILE = "--xla_backend_optimization_level=0"


def quick_child_env(**extra: str) -> dict:
    """``os.environ`` on the CPU, at :data:`FAST_COMPILE`, with the compiled kernels on one thread
    (``TOPICJAX_THREADS=1``: no second thread to wait for at every call on cores that the suite's
    other processes hold), plus ``extra``."""
    return dict(os.environ, JAX_PLATFORMS="cpu", TOPICJAX_THREADS="1",
                XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip(), **extra)


def measured_child_env(**extra: str) -> dict:
    """``os.environ`` plus ``extra``, at XLA's default compiler settings, without the suite's shared compilation cache
    (``tests/conftest.py``) or topicjax's persistent one (``TOPICJAX_CACHE=off`` unless ``extra``
    names it): for children whose peak resident memory is measured, since a program
    loaded from the cache takes less memory than one compiled, and whether another test compiled
    it first depends on the order of the run."""
    env = dict(os.environ, **extra)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    # at XLA's default compiler settings (not the suite's quick ones, tests/conftest.py): their
    # fusions plan other temporaries, and the memory measured is what users' programs take
    if "XLA_FLAGS" not in extra:
        env["XLA_FLAGS"] = without_quick_flags(env.get("XLA_FLAGS", ""))
    env["TOPICJAX_TEST_QUICK_COMPILE"] = "0"
    env["TOPICJAX_CACHE"] = extra.get("TOPICJAX_CACHE", "off")  # nor topicjax's (topicjax.core.jit_cache)
    return env
