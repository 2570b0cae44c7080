"""experiments/bench_distributed.py, one model fitted by one process and by two that each read half
of a batch store: a smoke run of its ``--quick`` mode (a 600-document store, three child processes
under ``/usr/bin/time -v``), whose two models must agree and whose children must report their
peak memory and times."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def test_quick_run_reports_memory_time_and_the_same_model(load_experiment, tmp_path, capsys):
    mod = load_experiment("bench_distributed")
    runs = mod.main(["--quick", "--workdir", str(tmp_path)])
    assert [r["process_id"] for r in runs["1proc"]] == [0] and sorted(r["process_id"] for r in runs["2proc"]) == [0, 1]
    for results in runs.values():
        for r in results:
            assert r["devices"] == r["n_processes"] and r["fit_s"] > 0 and r["ru_maxrss"] > 0
            if Path("/usr/bin/time").exists():
                assert r["time_v_peak"] > 0
    assert runs["1proc"][0]["objective"] == pytest.approx(runs["2proc"][0]["objective"], rel=1e-6)
    phi1 = np.load(tmp_path / "1proc" / "phi.npy")
    phi2 = np.load(tmp_path / "2proc" / "phi.npy")
    np.testing.assert_allclose(phi1, phi2, rtol=1e-5, atol=1e-6)  # float32 sums in another order
    out = capsys.readouterr().out
    assert "max |phi_1proc - phi_2proc|" in out and "| 2proc | 1 |" in out and "store " in out
    # the store is written once, then reused
    folder = mod.store_folder(mod.parse(["--quick", "--workdir", str(tmp_path)]))
    before = (folder / "words.bin").stat().st_mtime_ns
    assert mod.prepare_store(mod.parse(["--quick", "--workdir", str(tmp_path)])) == folder
    assert (folder / "words.bin").stat().st_mtime_ns == before and capsys.readouterr().out == ""
