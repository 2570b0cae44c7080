"""experiments/numba_reference.py, the fused numba PLSA pass the benchmarks time our step against:
one pass equals a hand-written float64 numpy EM pass (ARTM eq. 7-8 and the normalisations) to
float32 precision, at one and two threads; its E-step alone gives the same gradients; its
blocks cover the documents with about equal work; its timing mode runs."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")


@pytest.fixture(scope="module")
def ref():
    import importlib.util
    import sys
    from pathlib import Path

    # imported as the benchmarks import it (``import numba_reference``): numba's on-disk cache of
    # the compiled functions is keyed by the module's name, and loading an entry imports it
    if "numba_reference" in sys.modules:
        return sys.modules["numba_reference"]
    path = Path(__file__).resolve().parents[1] / "experiments" / "numba_reference.py"
    spec = importlib.util.spec_from_file_location("numba_reference", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["numba_reference"] = mod
    spec.loader.exec_module(mod)
    return mod


def _corpus(D=41, W=67, seed=0):
    """A sparse count matrix (D, W) in which every document has a word, and its CSR arrays."""
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.25, (D, W)) * (rng.random((D, W)) < 0.5)
    dense[np.arange(D), rng.integers(0, W, D)] += 1 + rng.integers(0, 3, D)
    d, w = np.nonzero(dense)  # row-major: sorted by document
    offsets = np.concatenate([[0], np.cumsum(np.bincount(d, minlength=D))])
    return dense, offsets, w, dense[d, w]


def _start(W, D, T, seed=1):
    rng = np.random.default_rng(seed)
    phi = rng.random((W, T)) + 0.05
    theta = rng.random((T, D)) + 0.05
    return phi / phi.sum(0), theta / theta.sum(0)


def _numpy_pass(dense, phi, theta):
    """One PLSA EM pass in float64, written out from the equations on dense arrays:
    p_dw = Σ_t φ_wt θ_td; n_wt = φ_wt Σ_d n_dw θ_td / p_dw; n_td = θ_td Σ_w n_dw φ_wt / p_dw;
    φ_wt = n_wt / Σ_w n_wt; θ_td = n_td / Σ_t n_td.  Returns (L, Φ', Θ', ∂L/∂Φ, ∂L/∂Θ)."""
    N = dense.astype(np.float64)  # (D, W)
    ll, g_phi, g_theta = 0.0, np.zeros_like(phi), np.zeros_like(theta)
    for d in range(N.shape[0]):
        for w in np.flatnonzero(N[d]):
            p = float(phi[w] @ theta[:, d])
            ll += N[d, w] * np.log(p)
            g_phi[w] += N[d, w] / p * theta[:, d]
            g_theta[:, d] += N[d, w] / p * phi[w]
    n_wt, n_td = phi * g_phi, theta * g_theta
    return ll, n_wt / n_wt.sum(0), n_td / n_td.sum(0), g_phi, g_theta


def _threads():
    import numba

    return [n for n in (1, 2) if n <= numba.config.NUMBA_NUM_THREADS]


@pytest.mark.parametrize("n_threads", [1, 2])
def test_em_pass_equals_numpy_em_pass(ref, n_threads):
    if n_threads not in _threads():
        pytest.skip("numba has fewer threads")
    dense, off, w, n = _corpus()
    D, W = dense.shape
    T = 6
    phi, theta = _start(W, D, T)
    k = ref.NumbaEStep(off, w, n, W, n_threads)
    phi32 = phi.astype(np.float32)
    theta_t32 = np.ascontiguousarray(theta.T, np.float32)
    for _ in range(3):  # passes chain (the slabs are left zeroed for the next pass)
        phi, theta = phi32.astype(np.float64), theta_t32.T.astype(np.float64)  # the kernel's state
        ll, phi_new, theta_new, _, _ = _numpy_pass(dense, phi, theta)
        ll32, out_phi, out_theta_t = k.em_pass(phi32, theta_t32)
        # float32 C-contiguous arguments are updated in place and returned
        assert out_phi is phi32 and out_theta_t is theta_t32
        assert ll32 == pytest.approx(ll, rel=1e-5)
        np.testing.assert_allclose(out_phi, phi_new, rtol=2e-5, atol=1e-8)
        np.testing.assert_allclose(out_theta_t.T, theta_new, rtol=2e-5, atol=1e-8)
        np.testing.assert_allclose(out_phi.sum(0), 1.0, rtol=1e-5)
        np.testing.assert_allclose(out_theta_t.sum(1), 1.0, rtol=1e-5)
    assert not k._slabs.any()


def test_em_pass_copies_arguments_it_cannot_update(ref):
    dense, off, w, n = _corpus(seed=3)
    D, W = dense.shape
    phi, theta = _start(W, D, 5, seed=4)
    theta_t = theta.T  # float64 and not C-contiguous: copied, the caller's arrays untouched
    before = phi.copy(), theta_t.copy()
    k = ref.NumbaEStep(off, w, n, W, 1)
    _, phi2, theta2_t = k.em_pass(phi, theta_t)
    assert phi2.dtype == theta2_t.dtype == np.float32 and theta2_t.flags.c_contiguous
    np.testing.assert_array_equal(phi, before[0])
    np.testing.assert_array_equal(theta_t, before[1])
    _, want_phi, want_theta, _, _ = _numpy_pass(dense, phi, theta)
    np.testing.assert_allclose(phi2, want_phi, rtol=2e-5, atol=1e-8)
    np.testing.assert_allclose(theta2_t.T, want_theta, rtol=2e-5, atol=1e-8)


def test_estep_alone_gives_the_gradients(ref):
    dense, off, w, n = _corpus(seed=5)
    D, W = dense.shape
    phi, theta = _start(W, D, 7, seed=6)
    ll, _, _, g_phi, g_theta = _numpy_pass(dense, phi, theta)
    for n_threads in _threads():
        k = ref.NumbaEStep(off, w, n, W, n_threads)
        for th in (theta.astype(np.float32), np.ascontiguousarray(theta.T, np.float32).T):  # (T, D), C and F order
            ll32, gp, gt = k(phi.astype(np.float32), th)
            assert ll32 == pytest.approx(ll, rel=1e-5)
            np.testing.assert_allclose(gp, g_phi, rtol=2e-5)
            np.testing.assert_allclose(gt, g_theta.T, rtol=2e-5)


def test_blocks_cover_the_documents_with_equal_work(ref):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 200, 1000)
    lengths[:5] = 5000  # a few long documents at the start
    off = np.concatenate([[0], np.cumsum(lengths)])
    for n_blocks in (1, 2, 3, 8):
        b = ref.balanced_bounds(off, n_blocks)
        assert b[0] == 0 and b[-1] == lengths.size and len(b) == n_blocks + 1 and np.all(np.diff(b) >= 0)
        work = np.array([lengths[b[i]:b[i + 1]].sum() + (b[i + 1] - b[i]) for i in range(n_blocks)])
        assert work.max() - work.min() <= 2 * (lengths.max() + 1)
    assert list(ref.balanced_bounds(np.array([0, 3, 4]), 4)[[0, -1]]) == [0, 2]  # more blocks than documents


def test_rejects_bad_input(ref):
    with pytest.raises(ValueError, match="word ids"):
        ref.NumbaEStep(np.array([0, 2]), np.array([0, 5]), np.ones(2), 5, 1)
    with pytest.raises(ValueError, match="float32"):
        ref.NumbaEStep(np.array([0, 2]), np.array([0, 1]), np.ones(2), 5, 1, np.float64)
    k = ref.NumbaEStep(np.array([0, 2]), np.array([0, 1]), np.ones(2), 5, 1)
    with pytest.raises(ValueError, match="theta_t"):
        k.em_pass(np.full((5, 3), 0.2, np.float32), np.full((2, 3), 1 / 3, np.float32))


@pytest.mark.slow
def test_timing_mode_runs(ref):
    res = ref.main(["--time", "bars", "--topics", "5", "--threads", "1", "--rounds", "2", "--per-round", "1",
                    "--warmup", "1", "--estep", "--no-pin"])
    assert res["T"] == 5 and res["threads"] == 1 and res["nnz"] > 0
    for key in ("pass_ms", "estep_ms"):
        med, lo, cpu = res[key]
        assert 0 < lo <= med and cpu >= 0


@pytest.mark.slow
def test_own_process_benchmark_quick_run(load_experiment, tmp_path):
    """experiments/bench_own_process.py --quick: each system timed in a process of its own (two
    child processes), the table written with both runs and the ratio of the medians."""
    from topicjax.core import kernels

    if not kernels.available():
        pytest.skip(f"the C++ E-step is not built: {kernels.load_error()}")
    mod = load_experiment("bench_own_process")
    out = tmp_path / "own.md"
    (row,) = mod.main(["--quick", "--out", str(out), "--force"])
    assert row["corpus"] == "bars" and row["T"] == 10 and row["threads"] == 1
    assert row["ours"] > 0 and row["numba"] > 0 and row["ratio"] == pytest.approx(row["ours"] / row["numba"])
    text = out.read_text()
    assert "| bars | 10 | 1 |" in text and f"**{row['ratio']:.2f}**" in text and "Load average" in text


@pytest.mark.slow
def test_own_process_lda_benchmark_quick_run(load_experiment, tmp_path, capsys):
    """experiments/bench_own_process.py --lda --quick: our LDA estimator and tomotopy's, each fit
    timed in a process of its own, the table with both runs (ms per sweep, log-likelihood per
    token) and the ratio; without tomotopy (a comparison, never a dependency) it says so and
    stops."""
    import importlib.util

    mod = load_experiment("bench_own_process")
    out = tmp_path / "lda.md"
    if importlib.util.find_spec("tomotopy") is None:
        assert mod.main(["--lda", "--quick", "--out", str(out), "--force"]) == 2
        assert "tomotopy is not installed" in capsys.readouterr().out and not out.exists()
        return
    (row,) = mod.main(["--lda", "--quick", "--out", str(out), "--force"])
    assert row["corpus"] == "bars" and row["T"] == 10 and row["threads"] == 1
    assert row["ours"] > 0 and row["tomotopy"] > 0 and row["ratio"] == pytest.approx(row["ours"] / row["tomotopy"])
    for system in ("ours", "tomotopy"):
        (run,) = row["runs"][system]
        assert run["total_s"] > 0 and -10 < run["ll_per_token"] < 0
        assert run["median_ms"] == pytest.approx(1000 * run["total_s"] / 5)
    text = out.read_text()
    assert "| bars | 10 | 1 |" in text and f"**{row['ratio']:.2f}**" in text and "tomotopy" in text
