"""Peak resident memory of several measurements from one child interpreter: the child imports
what the measurements use once, then runs each measurement in a process forked from it.

A forked process's peak resident memory (``VmHWM``) starts at what the child held when it forked
(Linux sets a new process's high-water mark to its resident size at ``fork``), so every measurement
starts from the same baseline, as fresh interpreters at the same point would, and the difference
of two peaks is what the second measurement added -- without paying an interpreter's start and
its imports of JAX and topicjax once per measurement.  The child imports JAX but never starts its
backend (no array is made before the forks: a JAX backend does not survive a ``fork``); each
forked process starts its own, compiles its own programs and exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from child_env import measured_child_env, without_quick_flags

#: The XLA flags of a child whose peak memory is measured: XLA's default fusion emitters and
#: optimisation passes (what plans the programs' buffers: their arguments, outputs and temporaries
#: are those of users' programs), with LLVM at -O0 and each program's machine code generated in one
#: module, which change only how the kernels' machine code is generated.  Checked: XLA's
#: ``memory_analysis()`` (argument, output and temporary bytes) of a LIDA fit's sweep, masks,
#: post-sweep and log-likelihood programs (LIDA at K=512, FTM at K=256) and of the ARTM step on
#: 2,000 documents at T=64 is the same, byte for byte, as at XLA's defaults; the compiler took
#: 28 % less CPU time (95 s against 69 s for those programs), and their machine code runs slower.
#: Used where compiling outweighs running (CPU seconds of the test, same machine and hour, XLA's
#: defaults against these flags): tests/lida/test_lida_limits.py's peak of a fit 42 s / 25 s,
#: tests/test_memory_growth.py's eight fits 88 s / 74 s (its PTM fit of 16,000 documents: 26.3 s /
#: 26.9 s, compiling less and running longer), tests/scale/test_offline.py's store fits; not in
#: tests/scale/test_streaming.py, whose online pass over 120 batches took longer (13.4 s / 14.5 s).
#: Less compiling also peaks with less of the compiler's own memory: the difference of two peaks
#: that both include it cancels it, a peak reset after a warm-up fit excludes it, and where only
#: the first of two peaks includes it (test_offline.py's passes) the check is the stricter.
LEAN_CODEGEN = ("--xla_backend_optimization_level=0", "--xla_cpu_parallel_codegen_split_count=1")


def measured_env(**extra: str) -> dict:
    """:func:`child_env.measured_child_env` (no compilation cache, XLA's default fusions) with
    :data:`LEAN_CODEGEN`, plus ``extra``."""
    flags = " ".join([without_quick_flags(os.environ.get("XLA_FLAGS", "")), *LEAN_CODEGEN]).strip()
    return measured_child_env(XLA_FLAGS=flags, **extra)


#: the child: ``SETUP`` (argv[1]) run once, then each call of the JSON list argv[2] evaluated in a
#: forked process, whose JSON value comes back through a pipe; prints the list of values
_CHILD = r"""
import json, os, sys, traceback

def peak_bytes():
    # the process's peak resident memory (VmHWM), in bytes
    with open("/proc/self/status") as f:
        return int(next(l for l in f if l.startswith("VmHWM")).split()[1]) * 1024

namespace = {"peak_bytes": peak_bytes}
exec(sys.argv[1], namespace)
if "jax" in sys.modules:  # a backend started before a fork would hang the forked process
    from jax._src import xla_bridge
    if xla_bridge._backends:
        sys.exit("the measurements' setup started JAX's backend; it must not make arrays")
values = []
for call in json.loads(sys.argv[2]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked process: evaluate the call, send its value, exit without cleanup
        os.close(read)
        try:
            out, status = json.dumps({"value": eval(call, namespace)}), 0
        except BaseException:
            out, status = json.dumps({"error": f"{call}:\n{traceback.format_exc()}"}), 1
        with os.fdopen(write, "w") as f:
            f.write(out)
        os._exit(status)
    os.close(write)
    with os.fdopen(read) as f:
        reply = f.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not reply:
        sys.exit(json.loads(reply)["error"] if reply else f"{call}: the forked process ended with status {status}")
    values.append(json.loads(reply)["value"])
print(json.dumps(values))
"""


def measure_forked(setup: str, calls: list[str], env: dict, timeout: float = 900) -> list:
    """Run ``setup`` (Python source; it may use ``peak_bytes()``, the process's peak resident
    memory in bytes) once in a new interpreter with environment ``env``, then evaluate each
    expression of ``calls`` in a process forked from it, one after the other; returns their
    values (JSON round-tripped), in order.

    Raises ``AssertionError`` with the child's error output when the setup or a call fails (the
    failing call's traceback), or when ``setup`` started JAX's backend.
    """
    proc = subprocess.run([sys.executable, "-c", _CHILD, setup, json.dumps(calls)], capture_output=True, text=True,
                          env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
