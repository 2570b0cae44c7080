"""Multi-process start-up (issue 40, item 6): a coordinator or peer that never comes is a one-line
:class:`~topicjax.scale.distributed.StartupError` naming the address and the process after the
timeout -- not five minutes of waiting and a C++ abort -- and processes that do come start.

The processes are those of the suite's one two-process run (tests/two_process_run.py): each
first tries a start-up that must fail (process 1 as a peer without its coordinator, process 0 as
a coordinator without its 2 peers), then the two start together, the peer first."""

from __future__ import annotations

import pytest
from two_process_run import STARTUP_TIMEOUT, two_process_run

from topicjax.scale import distributed


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run = two_process_run(tmp_path_factory)
    for pid in (0, 1):
        assert run.rc[pid] == 0 and "Check failure" not in run.err[pid], (pid, run.err[pid][-3000:])
    return run


def test_a_peer_without_its_coordinator_is_told_so_at_the_timeout(run):
    first, after = run.out[1].splitlines()[:2]
    assert first.startswith(f"StartupError: coordinator 127.0.0.1:{run.lone_peer} did not answer process 1 of 2 "
                            f"within {STARTUP_TIMEOUT} s"), run.out[1]
    assert after == "connecting", run.out[1]  # the error was one line, and the process went on
    assert run.report[1]["failed_start_s"] < 60


def test_a_coordinator_without_its_peers_names_the_missing_ones(run):
    first, after = run.out[0].splitlines()[:2]
    assert first.startswith(f"StartupError: coordinator 127.0.0.1:{run.lone_coordinator} (process 0 of 3): "
                            f"process(es) 1, 2 did not connect within {STARTUP_TIMEOUT} s"), run.out[0]
    assert after.startswith("started"), run.out[0]  # one line


def test_processes_that_come_start_whichever_comes_first(run):
    # process 1 (the peer) said "connecting" before process 0 (its coordinator) was even started
    assert [out.splitlines()[1 + (pid == 1)] for pid, out in enumerate(run.out)] == ["started 0 2", "started 1 2"], \
        run.out


@pytest.mark.parametrize("kwargs, says", [
    (dict(timeout=0), "timeout must be a number of seconds > 0"),
    (dict(process_id=2), r"process_id must be in \[0, 2\)"),
    (dict(coordinator_address="localhost"), "coordinator_address must be 'host:port'"),
])
def test_bad_arguments_are_named(kwargs, says):
    args = dict(coordinator_address="127.0.0.1:1", num_processes=2, process_id=1, timeout=1) | kwargs
    with pytest.raises(ValueError, match=says):
        distributed.initialize(**args)
