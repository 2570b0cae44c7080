"""Multi-process start-up (issue 40, item 6): a coordinator or peer that never comes is a one-line
:class:`~topicjax.scale.distributed.StartupError` naming the address and the process after the
timeout -- not five minutes of waiting and a C++ abort -- and processes that do come start."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.child_env import quick_child_env
from tests.multidevice import free_port
from topicjax.scale import distributed

CHILD = """
import sys
from topicjax.scale import distributed
try:
    distributed.initialize("127.0.0.1:{port}", num_processes={n}, process_id=int(sys.argv[1]), timeout={timeout})
    import jax
    print("started", jax.process_index(), jax.process_count())
except distributed.StartupError as e:
    print("StartupError:", e)
"""


def run_children(ids, n, timeout, stagger=0.0):
    port = free_port()
    code = CHILD.format(port=port, n=n, timeout=timeout)
    procs = []
    for pid in ids:
        procs.append(subprocess.Popen([sys.executable, "-c", code, str(pid)], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=quick_child_env()))
        time.sleep(stagger)
    outs = [p.communicate(timeout=120) for p in procs]
    return port, [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


def test_a_peer_without_its_coordinator_is_told_so_at_the_timeout():
    t0 = time.monotonic()
    port, [(rc, out, err)] = run_children([1], 2, 2)
    assert rc == 0 and "Check failure" not in err, err
    assert out.strip().startswith(f"StartupError: coordinator 127.0.0.1:{port} did not answer process 1 of 2 within "
                                  "2 s"), out
    assert out.count("\n") == 1 and time.monotonic() - t0 < 60


def test_a_coordinator_without_its_peers_names_the_missing_ones():
    port, [(rc, out, err)] = run_children([0], 3, 2)
    assert rc == 0 and "Check failure" not in err, err
    assert out.strip().startswith(f"StartupError: coordinator 127.0.0.1:{port} (process 0 of 3): process(es) 1, 2 "
                                  "did not connect within 2 s"), out


def test_processes_that_come_start_whichever_comes_first():
    _, results = run_children([1, 0], 2, 60, stagger=1.0)  # the peer first: it waits for the coordinator
    assert [out.strip() for _, out, _ in results] == ["started 1 2", "started 0 2"], results


@pytest.mark.parametrize("kwargs, says", [
    (dict(timeout=0), "timeout must be a number of seconds > 0"),
    (dict(process_id=2), r"process_id must be in \[0, 2\)"),
    (dict(coordinator_address="localhost"), "coordinator_address must be 'host:port'"),
])
def test_bad_arguments_are_named(kwargs, says):
    args = dict(coordinator_address="127.0.0.1:1", num_processes=2, process_id=1, timeout=1) | kwargs
    with pytest.raises(ValueError, match=says):
        distributed.initialize(**args)
