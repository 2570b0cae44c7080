"""``JAX_ENABLE_X64=1`` (common in research notebooks, issue 26): every family fits, and gives the
model it gives without it.

With x64 enabled JAX makes 64 bits the default of every array created without a dtype:
``jax.random.uniform`` draws float64 (other bits: another chain), ``jnp.arange``, ``argmax`` and sums
of counts or booleans give int64 (a ``while_loop`` whose carry starts int32 then fails), Python
floats passed to a jitted function and ``jnp.where(c, -1.0, 1.0)`` become float64 (reduced, they
promote float32 work to float64).  The estimators create their arrays with explicit dtypes, so they
still compute in float32 and draw the same random numbers.

The same script fits every family in sequence on a small bars corpus and writes the models'
arrays to an ``.npz``: without x64 in the test's own process (its x64 is off: no JAX start of its
own), then with ``JAX_ENABLE_X64=1`` in a subprocess (the setting is read when JAX starts).  Their
compilations are most of the cost; the second loads from the run's compilation cache
(tests/conftest.py) the programs that x64 leaves unchanged, the small ones (75 of its 140
compilations; the sweeps, GEM blocks and tuner steps all differ: x64 changes their index types).
The test compares the arrays family by family:

* PLSA, ARTM (pool regularizers with schedules), ``fit_many``, PTM (an order selection: fits and a
  warm-started reduction), TTMM EM, the online algorithm (``partial_fit``, ``fit_online``) and
  every ``transform``: the same float32 arrays to float32 round-off (today: the same bits);
* LIDA: its uniforms are drawn as float32 and its counts are int32 in both settings, so a seed
  gives the same chain: the assignments ``z`` are compared exactly, and with them everything
  computed from the chain (posterior means, hyperparameters, ``transform``) to 16 float32 ulps
  (the suite's -O0 rounds float32 logarithms by index type; at XLA's defaults: the same bits).  Every mode and the
  code of every variant: ``lida`` in the parallel mode (the compiled CPU sweep, through the
  command line below: topic and word activations, all six hyperparameter updates, the
  document-completion sampler with topic masks; ``ftm`` runs the same topic step), ``lda`` exact,
  ``sstm`` stale with MH steps (word activations without topic masks), ``lda`` parallel with MH
  steps (the XLA sweep);
* TTMM SGD and the tuner use optax's Adam, whose bias correction ``1 - b**t`` optax computes in
  the default float type (float64 with x64): a rounding difference per step that Adam's normalised
  updates carry on (the log-likelihood agrees to 1e-7 relative, the parameters to 1e-4);
* the command line, ``topicjax fit --model lida`` on the bundled bars corpus: status 0, the same
  printed report (times aside) and the same saved model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import contextlib, io, json, sys, warnings
    import numpy as np, jax
    import topicjax as tj
    import topicjax.cli
    from topicjax import regularizers as R
    from topicjax.regularizers.schedules import Step, Table
    from topicjax.scale import online
    from topicjax.tune import heldout_perplexity_loss, tune

    # JAX's dtype warnings (an int64 scatter into int32 counts: an error in later JAX releases)
    warnings.filterwarnings("error", category=FutureWarning, module=r"jax\\.")


    def fit_everything(folder):
        # every family fitted; their arrays to folder/results.npz; returns whether x64 was on
        out = {}

        def keep(name, **arrays):
            for key, value in arrays.items():
                out[f"{name}/{key}"] = np.asarray(value)

        def objective(model):
            return [h["objective"] for h in model.history_]

        corpus, _, _ = tj.datasets.make_bars(n_docs=60, seed=0)
        train, test = corpus.train_test_split(12, seed=0)
        kw = dict(progress=False)

        m = tj.PLSA(5, max_iter=10, **kw).fit(train)
        keep("plsa", phi=m.phi_, theta=m.theta_, objective=objective(m), transform=m.transform(test))
        regs = [(R.smooth_phi(), Table([0.1, 0.2, 0.3])), (R.sparse_theta(), 0.05), (R.decorrelate(), Step(3, 2.0))]
        m = tj.ARTM(5, regularizers=regs, max_iter=10, **kw).fit(train)
        keep("artm", phi=m.phi_, theta=m.theta_, objective=objective(m), transform=m.transform(test))
        a, b = tj.PLSA(5, max_iter=6, **kw).fit_many(train, seeds=[1, 2])
        keep("fit_many", phi1=a.phi_, phi2=b.phi_)

        sel = tj.ptm.select_order(train, 5, 4, max_iter=4, progress=False)
        for order, model in sel.models.items():
            keep(f"ptm/{order}", phi=model.phi_, theta=model.theta_, bic=model.bic_)
        keep("ptm", transform=sel.models[4].transform(test))

        for solver in ("em", "sgd"):
            m = tj.TTMM(5, n_themes=3, solver=solver, max_iter=6, **kw).fit(train)
            keep(f"ttmm_{solver}", phi=m.phi_, theta=m.theta_, objective=objective(m), transform=m.transform(test))

        for variant, mode, mh in (("lda", "exact", 0), ("sstm", "stale", 2), ("lda", "parallel", 2)):
            m = tj.LIDA(8, variant=variant, max_iter=6, sampler=mode, mh_steps=mh, **kw).fit(train)
            keep(f"lida_{variant}_{mode}", z=m.state_.z, phi=m.phi_, theta=m.theta_, transform=m.transform(test),
                 hyper=[m.hyper_[h] for h in sorted(m.hyper_)], objective=objective(m))

        m = tj.ARTM(5, **kw)
        m.partial_fit(train.subset(np.arange(24)))
        m.partial_fit(train.subset(np.arange(24, train.n_docs)))
        fitted = online.fit_online(online.write_store([train], folder + "/store", batch_size=16), 5, passes=2, **kw)
        keep("online", partial_fit=m.phi_, fit_online=fitted.phi_)

        model = tj.ARTM(5, regularizers=[(R.smooth_phi(), 0.01), (R.sparse_theta(), 0.01)], max_iter=6, scores=(), **kw)
        res = tune(model, train, heldout_perplexity_loss(*test.completion_split(seed=0)),
                   {"smooth_phi": (1e-3, 1.0), "sparse_theta": (1e-3, 1.0)}, n_steps=2, progress=False)
        keep("tune", phi=res.model.phi_, objective=[h["objective"] for h in res.history])

        report = io.StringIO()
        with contextlib.redirect_stdout(report):
            status = topicjax.cli.main(["fit", "--model", "lida", "--variant", "lida", "--sampler", "parallel",
                                        "--docs", "60", "--topics", "8", "--iterations", "6", "--quiet",
                                        "--out", folder + "/cli"])
        lines = [s.replace(folder, "OUT") for s in report.getvalue().splitlines()
                 if not s.startswith(("fitted in", "total time"))]
        m = tj.persistence.load(folder + "/cli")
        keep("cli", status=status, report="\\n".join(lines), phi=m.phi_, theta=m.theta_,
             hyper=[m.hyper_[h] for h in sorted(m.hyper_)])

        np.savez(folder + "/results.npz", **out)
        return bool(jax.config.jax_enable_x64)


    if __name__ == "__main__":
        print(json.dumps({"x64": fit_everything(sys.argv[1])}))
    """
)

#: (rtol, atol) by family; LIDA and the command line are compared exactly (the same chain)
TOLERANCE = {"ttmm_sgd": (1e-4, 1e-4), "tune": (1e-4, 1e-6)}
DEFAULT_TOLERANCE = (1e-5, 1e-7)
FAMILIES = ["plsa", "artm", "fit_many", "ptm", "ttmm_em", "ttmm_sgd", "lida_lda_exact", "lida_sstm_stale",
            "lida_lda_parallel", "online", "tune", "cli"]


def _start(folder: Path, x64: bool) -> subprocess.Popen:
    folder.mkdir()
    # TOPICJAX_THREADS=1 (and one thread in _fit_here): each runs beside the other tests of a parallel run, and a pool
    # of two threads, handing each of the compiled kernels' tiny calls over between its threads,
    # waits at every call for cores that the other processes hold
    env = dict(os.environ, JAX_ENABLE_X64="1" if x64 else "0", XLA_PYTHON_CLIENT_PREALLOCATE="false",
               TOPICJAX_THREADS="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(folder)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _fit_here(folder: Path) -> dict:
    """The fits without x64 in this process, whose x64 is off: no interpreter of its own to start
    (importing JAX and topicjax), and the programs it compiles go to the run's compilation cache
    as a child's would.  The compiled kernels on one thread as in the child (the same results on
    any number: tests/core/test_kernels.py), JAX's warnings filter of the script kept to it."""
    import warnings

    from topicjax.core import kernels

    folder.mkdir()
    namespace = {"__name__": "test_x64_script"}
    threads = kernels.get_threads()
    kernels.set_threads(1)
    try:
        with warnings.catch_warnings():
            exec(compile(SCRIPT, "<tests/test_x64.py SCRIPT>", "exec"), namespace)
            assert namespace["fit_everything"](str(folder)) is False
    finally:
        kernels.set_threads(threads)
    with np.load(folder / "results.npz") as f:
        return {k: f[k] for k in f.files}


def _fit_everything(base: Path) -> tuple[dict, dict]:
    """``(without x64, with x64)``: the arrays of every family's fits, ``{"family/.../name": array}``.
    Without x64 in this process when its x64 is off (else in a child), then with x64 in a child:
    one setting after the other, so that the second loads the programs they share from the
    compilation cache that the first filled, instead of compiling them at the same time."""
    import jax

    procs, results = {}, {}
    try:
        for x64 in (False, True):
            if not x64 and not jax.config.jax_enable_x64:
                results[x64] = _fit_here(base / "x64_0")
                continue
            proc = procs[x64] = _start(base / f"x64_{int(x64)}", x64)
            stdout, stderr = proc.communicate(timeout=900)
            assert proc.returncode == 0, f"JAX_ENABLE_X64={int(x64)}: the fits failed:\n{stderr[-4000:]}"
            assert stdout.strip().splitlines()[-1] == f'{{"x64": {str(x64).lower()}}}', stdout[-2000:]
            with np.load(base / f"x64_{int(x64)}" / "results.npz") as f:
                results[x64] = {k: f[k] for k in f.files}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results[False], results[True]


def _differences(family: str, plain: dict, x64: dict) -> list[str]:
    """What differs between the two settings in ``family``'s arrays (empty: the same model)."""
    rtol, atol = TOLERANCE.get(family, DEFAULT_TOLERANCE)
    exact = family.startswith("lida") or family == "cli"
    # LIDA's assignments exactly; its float32 values (objective, hyperparameters, means) to their
    # last bits: at the suite's -O0 (tests/conftest.py) x64's other index types change how float32
    # logarithms round (measured: the objective's last bit, 4.9e-4 of 15,450, and a hyperparameter
    # by 9.5e-7 relative); at XLA's default settings, a user's, the two give the same bits
    ulps = 16 * np.finfo(np.float32).eps
    found = []
    for key in sorted(k for k in plain if k.split("/")[0] == family):
        a, b = plain[key], x64[key]
        if a.dtype.kind == "U":
            if str(a) != str(b):
                found.append(f"{key}: the text differs")
            continue
        # float32 stays float32 (float64 would be work done in float64; LIDA's posterior means
        # are float64 host arrays in both settings)
        if a.dtype != b.dtype or a.shape != b.shape:
            found.append(f"{key}: {a.dtype}{list(a.shape)} without x64, {b.dtype}{list(b.shape)} with it")
            continue
        if exact and a.dtype.kind in "fc":
            same = np.allclose(b, a, rtol=ulps, atol=0.0)
        else:
            same = (np.array_equal(a, b) if exact or a.dtype.kind not in "fc"
                    else np.allclose(b, a, rtol=rtol, atol=atol))
        if not same:
            worst = float(np.max(np.abs(b.astype(np.float64) - a.astype(np.float64)))) if a.size else 0.0
            bound = (f"to rtol {ulps:.2g}" if a.dtype.kind in "fc" else "exactly") if exact else f"rtol {rtol:g}, atol {atol:g}"
            found.append(f"{key}: differs by up to {worst:.3g} (compared {bound})")
    return found


@pytest.mark.slow
def test_every_family_gives_the_same_model_with_x64(tmp_path):
    """One test (its two subprocesses are the cost, so a parallel run must not repeat them)."""
    plain, x64 = _fit_everything(tmp_path)
    assert sorted(plain) == sorted(x64)
    assert sorted({k.split("/")[0] for k in plain}) == sorted(FAMILIES)
    problems = [d for family in FAMILIES for d in _differences(family, plain, x64)]
    assert not problems, "JAX_ENABLE_X64=1 changed the model:\n" + "\n".join(problems)
    # the command line under x64: status 0 and the report of the plain run (compared above)
    assert int(x64["cli/status"]) == 0
    report = str(x64["cli/report"])
    assert "hold-out perplexity" in report and "topicjax: error" not in report
