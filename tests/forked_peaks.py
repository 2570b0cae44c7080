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
import subprocess
import sys

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
