"""Issue 45 item 4: a run over two processes reports once.  Process 0 alone shows the progress
bar; neither process's standard output gets gloo's connection line (``[Gloo] Rank r is connected
to ...``, written from C++), and what the script itself prints after ``initialize`` still gets
there.

The processes are those of the suite's one two-process run (tests/two_process_run.py): after
their start-up they fit a small corpus with the progress bar on (the default), then go on with
the sharded fits of tests/scale/test_distributed.py, which print nothing: every line of their
standard output is one the script printed."""

from __future__ import annotations

from two_process_run import REPORT_ITER, two_process_run


def test_only_process_0_reports_and_gloo_says_nothing(tmp_path_factory):
    run = two_process_run(tmp_path_factory)
    run.ok()
    for i, (out, err) in enumerate(zip(run.out, run.err)):
        lines = out.splitlines()
        assert lines[0].startswith("StartupError: ")  # tests/scale/test_startup.py
        # no "[Gloo] Rank ..." line, in the whole run
        assert lines[1:] == ["connecting"] * i + [f"started {i} 2", f"fitted {i} {REPORT_ITER}"], out
        assert "Gloo" not in err
    assert "ARTM: 100%" in run.err[0]  # the bar of process 0 (tqdm writes to the standard error)
    assert "ARTM" not in run.err[1] and "%|" not in run.err[1]
