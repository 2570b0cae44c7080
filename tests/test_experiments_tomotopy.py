"""Smoke test of experiments/time_to_quality_tomotopy.py (skipped without tomotopy, a comparison
tool that is never a dependency of topicjax)."""

from __future__ import annotations


import pytest

pytest.importorskip("tomotopy")


@pytest.fixture(scope="module")
def mod(load_experiment):
    return load_experiment("time_to_quality_tomotopy")


def test_helpers(mod):
    trace = [(1, 0.5, 30.0), (2, 1.0, 20.0), (3, 1.5, 10.0)]
    assert mod.first_reach(trace, 20.0) == (2, 1.0, 20.0)
    assert mod.first_reach(trace, 5.0) is None


def test_quick_run_writes_table(mod, tmp_path):
    out = tmp_path / "ttq.md"
    results = mod.main(["--quick", "--out", str(out)])
    text = out.read_text()
    assert "--quick" in text and "Load average" in text and "Machine:" in text
    assert "| corpus | T | tomotopy target" in text and "(chosen)" in text
    (r,) = results
    assert r["corpus"] == "bars" and r["T"] == 10
    # the target is tomotopy's last checkpoint, reached by tomotopy itself by construction
    assert r["tp_own"] is not None and r["tp_own"][2] <= r["target"]
    # either ours reached the target (ratio = its time / tomotopy's) or its best is above it
    if r["ours"] is not None:
        assert r["ours"][2] <= r["target"] and r["ratio"] == pytest.approx(r["ours"][1] / r["tp_time"])
    else:
        assert r["best"][2] > r["target"]
    # perplexities of a 25-word corpus lie between 1 and 25 (plus the 1e-9 uniform floor)
    assert 1.0 < r["target"] < 25.5 and 1.0 < r["best"][2] < 25.5


def test_smoothing_coefficients_reach_the_m_step(mod):
    """τ_φ, τ_θ of the script's ARTM are the additive terms of eq. 24: one carried-over step from
    Φ, Θ gives φ ∝ n_wt + τ_φ and θ ∝ n_td + τ_θ, with the counts from the plain E-step."""
    import numpy as np

    from topicjax import datasets
    from topicjax.core import estep

    corpus, _, _ = datasets.make_bars(n_docs=30, seed=0)
    m = mod.OursSmoothed(corpus, 4, "carried", 0)
    s0 = m.state
    _, g_phi, g_theta = estep.expected_counts(s0.phi, s0.theta, m.data)
    n_wt = np.asarray(s0.phi * g_phi, np.float64)
    n_td = np.asarray(s0.theta * g_theta, np.float64)
    new = m._step(s0, m.data, m._coefs((0.3, 0.7)), None, cfg=m.cfg)
    np.testing.assert_allclose(np.asarray(new.phi), (n_wt + 0.3) / (n_wt + 0.3).sum(0), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(np.asarray(new.theta), (n_td + 0.7) / (n_td + 0.7).sum(0), rtol=1e-4, atol=1e-7)
