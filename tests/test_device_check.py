"""The prepared device check (experiments/device_check.py, issues 30 and 41): its dry run on CPU,
its comparison, its trace summary, its A/B children and its roofline ratios."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))


@pytest.mark.slow
def test_dry_run_writes_every_section(tmp_path, monkeypatch):
    import device_check as dc

    out = tmp_path / "gpu_dry.md"
    # in this process (a child interpreter would start JAX again); every section runs the same
    # code (its checks compare two runs on the one CPU, compiled alike).  A budget that a loaded
    # machine cannot exhaust: a section skipped for the time would fail the checks below.
    monkeypatch.setenv("TOPICJAX_THREADS", "1")  # the A/B children's kernels (tests/child_env.py: quick_child_env)
    assert dc.main(["--dry-run", "--budget", "3600", "--out", str(out), "--out-dir", str(tmp_path / "out")]) == 0
    text = out.read_text()
    for heading in ("## 1. Checks", "### PLSA EM pass", "### A/B: the E-step", "### NYTimes-sized",
                    "### Many models in one call", "### LDA Gibbs sweep", "### PTM: one GEM iteration", "### Tuner: one step",
                    "## 3. Targets", "every timing <= 3x its roofline limit", "## 4. Profile"):
        assert heading in text, heading
    assert "## Errors" not in text and "**NO**" not in text
    data = json.loads(out.with_suffix(".json").read_text())
    assert len(data["checks"]) >= 10 and not data["errors"]
    t = data["timings"]
    # every timing carries its roofline limit and ratio (the dry run's limits are an H100's, nominal)
    for row in t["passes"]:
        assert row["limit_ms"] > 0 and row["ratio"] == pytest.approx(row["ms"] / row["limit_ms"])
        assert row["loop_ratio"] == pytest.approx(row["loop_ms"] / row["limit_ms"])
    for row in [t["nytimes"], t["ptm"], t["tuner"], *t["lda"]]:
        assert row["limit_ms"] > 0 and row["ratio"] > 0
    assert t["grid"]["grid_ratio"] > 0 and t["grid"]["sequential_ratio"] > 0
    # the A/B children ran (or said why not), one per setting of the dry run
    assert [a["label"] for a in t["ab"]] == ["TOPICJAX_ESTEP=xla", "TOPICJAX_ESTEP=xla_scatter, --xla_gpu_ftz=true"]
    assert all(a["ok"] or a["error"] for a in t["ab"])
    assert (tmp_path / "out" / out.name).exists()


def test_an_ab_child_reports_its_result_or_its_error():
    import device_check as dc

    env = dict(os.environ)
    line = dc.AB_MARK + json.dumps({"T": 4, "call_ms": 1.5})
    ok = dc.run_ab_child([sys.executable, "-c", f"print('compiling'); print({line!r})"], env, 60)
    assert ok == {"ok": True, "T": 4, "call_ms": 1.5}
    bad = dc.run_ab_child([sys.executable, "-c", "import sys; print('x', file=sys.stderr); "
                           "raise ValueError('TOPICJAX_ESTEP must be one of auto, got nope')"], env, 60)
    assert not bad["ok"] and bad["error"] == "exit status 1: ValueError: TOPICJAX_ESTEP must be one of auto, got nope"
    slow = dc.run_ab_child([sys.executable, "-c", "import time; time.sleep(30)"], env, 0.5)
    assert not slow["ok"] and "timed out" in slow["error"]


def test_an_ab_child_with_an_unknown_estep_says_so(monkeypatch):
    """``--ab-child`` under an unknown ``TOPICJAX_ESTEP`` raises its ``ValueError`` before anything
    runs (in a child process: exit status 1 and the error last on stderr, which run_ab_child
    reports, above).  Run here: the setting is read on first use, so it is unread again first."""
    import device_check as dc
    from topicjax.core import kernels

    monkeypatch.setenv("TOPICJAX_ESTEP", "no_such_estep")
    monkeypatch.setattr(kernels, "_BACKEND", None)
    with pytest.raises(ValueError, match="TOPICJAX_ESTEP must be one of .*no_such_estep"):
        dc.main(["--ab-child", "--dry-run"])


def test_every_timing_ratio_is_in_the_targets():
    import device_check as dc

    t = {"passes": [{"corpus": "kos", "T": 100, "ratio": 12.0, "loop_ratio": 2.5, "loop_ms": 0.14}],
         "ab": [{"ok": True, "label": "a", "ratio": 4.0, "loop_ratio": 2.0}, {"ok": False, "label": "b", "error": "e"}],
         "grid": {"sequential_ratio": 100.0, "grid_ratio": 9.0, "speedup": 11.0},
         "lda": [{"sampler": "s", "ratio": 1.5, "mh_steps": 0, "mtok_s": 310.0}]}
    ratios = dict(dc.timing_ratios(t))
    assert ratios == {"pass kos T=100 per call": 12.0, "pass kos T=100 in a loop": 2.5, "A/B a per call": 4.0,
                      "A/B a in a loop": 2.0, "sequential fits": 100.0, "fit_many": 9.0, "LDA sweep, s": 1.5}

    class Ctx:
        results = {"timings": t}

    rows = {r[0]: r for r in dc.targets_table(Ctx())}
    assert rows["KOS T=100 pass <= 0.15 ms inside a compiled loop"][2] == "yes"
    assert rows["32 KOS ARTM fits in one call >= 10x 32 separate fits, end to end"][2] == "yes"
    assert rows["exact LDA sweep (dense draw) on KOS, K = 100, >= 300 M tokens/s"][2] == "yes"
    assert rows["every timing <= 3x its roofline limit"][1:] == ["3 of 7; worst 100.0x (sequential fits)", "no"]


def test_rel_diff_is_relative_to_the_reference():
    import device_check as dc

    a = {"x": np.array([1.0, 2.0]), "y": np.array([[10.0]])}
    b = {"x": np.array([1.0, 2.1]), "y": np.array([[10.0]])}
    assert dc.rel_diff(a, b) == pytest.approx(0.1 / 2.1)
    assert dc.rel_diff(b, b) == 0.0
    with pytest.raises(AssertionError, match="shape"):
        dc.rel_diff(np.zeros(2), np.zeros(3))


def test_trace_summary_counts_device_operations_only(tmp_path):
    import device_check as dc

    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/device:GPU:0"}},
        {"ph": "X", "pid": 1, "name": "host_work", "dur": 1000.0},
        {"ph": "X", "pid": 2, "name": "gather_fusion", "dur": 300.0},
        {"ph": "X", "pid": 2, "name": "gather_fusion", "dur": 100.0},
        {"ph": "X", "pid": 2, "name": "scatter", "dur": 100.0},
    ]
    folder = tmp_path / "plugins" / "profile" / "run"
    folder.mkdir(parents=True)
    with gzip.open(folder / "perfetto_trace.json.gz", "wt") as fh:
        json.dump({"traceEvents": events}, fh)
    rows = dc.summarize_trace(tmp_path)
    assert [r["name"] for r in rows] == ["gather_fusion", "scatter"]
    assert rows[0]["ms"] == pytest.approx(0.4) and rows[0]["count"] == 2 and rows[0]["share"] == pytest.approx(0.8)


def test_a_failed_check_fails_the_run(tmp_path, monkeypatch):
    import device_check as dc

    monkeypatch.setattr(dc, "CHECKS", [lambda ctx: [("planted difference", 1.0, 1e-3)]])
    out = tmp_path / "r.md"
    assert dc.main(["--dry-run", "--only", "checks", "--out", str(out)]) == 1
    assert "**NO**" in out.read_text()
