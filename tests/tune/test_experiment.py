"""Smoke test of experiments/tune_vs_grid.py: the ``--quick`` protocol end to end on the bars
corpus (grid, random search and tuner; table and plot written)."""

from __future__ import annotations

import numpy as np


def test_quick_run_writes_table_and_plot(load_experiment, tmp_path):
    mod = load_experiment("tune_vs_grid")
    out = tmp_path / "tune_vs_grid.md"
    rows = mod.main(["--quick", "--out", str(out)])
    assert [r["searcher"] for r in rows] == ["grid", "random", "tune"]
    grid, random, tuned = rows
    assert grid["fits"] == 8 and random["fits"] == 8 and tuned["fits"] == 4
    assert grid["to_grid"] == grid["time"]
    for r in rows:
        assert np.isfinite(r["value"]) and np.isfinite(r["test"])
        lo_hi = mod.box(mod.load("bars", mod.parse_args(["--quick"]))[0], 5)
        for name, (lo, hi) in lo_hi.items():
            assert lo * (1 - 1e-6) <= r["coefs"][name] <= hi * (1 + 1e-6)
    text = out.read_text(encoding="utf-8")
    assert "Command: `python experiments/tune_vs_grid.py --quick --out" in text
    assert "| bars | perplexity+coherence | tune | 4 |" in text
    assert out.with_suffix(".png").stat().st_size > 0


def test_small_and_default_outputs(load_experiment):
    """``--small`` is the full protocol with a coarser grid (random search as many fits);
    ``--quick`` writes next to, never over, the real table."""
    mod = load_experiment("tune_vs_grid")
    small = mod.parse_args(["--small"])
    assert (small.grid, small.random, small.corpora, small.steps) == (6, 216, ["kos", "20ng"], 30)
    assert small.objectives == ["perplexity", "perplexity+coherence"]
    assert mod.parse_args([]).out.endswith("experiments/results/tune_vs_grid.md")
    assert mod.parse_args(["--quick"]).out.endswith("experiments/results/tune_vs_grid_quick.md")
