"""experiments/bench_coldstart.py, a new interpreter to a fitted model: a smoke run of its ``--quick``
mode (the bars corpus), in which the second process must load every program the first one wrote
to the cache and compile none, and ``import topicjax`` must be timed in fresh processes."""

from __future__ import annotations

import json
import math


def test_quick_run(load_experiment, tmp_path):
    mod = load_experiment("bench_coldstart")
    out = tmp_path / "coldstart.json"
    result = mod.main(["--quick", "--out", str(out)])
    assert json.loads(out.read_text())["ratio"] == result["ratio"]
    (first,), (second,) = result["runs"]["first"], result["runs"]["second"]
    assert first["loaded"] == 0 and first["written"] == first["compiled"] > 0
    assert second["compiled"] == 0 and second["written"] == 0 and second["loaded"] == first["written"]
    assert all(second[k] >= 0 and math.isfinite(second[k]) for k in (*mod.PHASES, "total"))
    assert math.isclose(result["ratio"], second["total"] / first["total"])
    assert len(result["import_s"]) == 3 and all(0 < t < 60 for t in result["import_s"])
