"""The prepared device check (experiments/device_check.py, issue 30): its dry run on CPU, its
comparison and its trace summary."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from child_env import quick_child_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))


@pytest.mark.slow
def test_dry_run_writes_every_section(tmp_path):
    out = tmp_path / "gpu_dry.md"
    # every section runs the same code (its checks compare two runs on the one CPU, compiled alike)
    env = quick_child_env()
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "device_check.py"), "--dry-run", "--out", str(out),
                           "--out-dir", str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = out.read_text()
    for heading in ("## 1. Checks", "### PLSA EM pass", "### NYTimes-sized", "### Many models in one call",
                    "### LDA Gibbs sweep", "### PTM: one GEM iteration", "### Tuner: one step", "## 3. Issue 30's targets",
                    "## 4. Profile"):
        assert heading in text, heading
    assert "## Errors" not in text and "**NO**" not in text
    data = json.loads(out.with_suffix(".json").read_text())
    assert len(data["checks"]) >= 10 and not data["errors"]
    assert (tmp_path / "out" / out.name).exists()


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
