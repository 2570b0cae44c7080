"""Checkpoint and resume (issue 16, part 5): a fit killed by SIGKILL in a subprocess, resumed from its
checkpoint folder, equals the uninterrupted fit bit for bit (CPU) -- for every family, PTM's order
sweep, TTMM's SGD (whose document order comes from a host generator) and a LIDA chain that grows
its topic slots included; and the folder
refuses another fit, a corrupt file and bad settings with clear errors.

The killed fits share one child interpreter (:data:`CHILD`): each stops for good at a fixed point,
right after a given checkpoint file is written, and the child then kills itself -- no clock, no
polling, and one interpreter's start instead of one per fit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest

import topicjax as tj
from topicjax.core import checkpoint as ck

#: among the suite's longest: run first (tests/conftest.py: pytest_collection_modifyitems)
pytestmark = pytest.mark.slow

# The fits, shared with the child process (which runs this text too).
SETUP = textwrap.dedent("""
    import topicjax as tj
    from topicjax import regularizers as R
    from topicjax.ptm import select_order

    corpus = tj.datasets.make_bars(n_docs=40, doc_length=30, seed=3)[0]


    def history_tau(iteration, history):  # a schedule of the score history: host state of the fit
        return 0.0 if not history else min(0.5, abs(history[-1]["objective"]) * 2e-5)


    FITS = {
        "PLSA": lambda **kw: tj.PLSA(4, max_iter=14, tol=0, progress=False).fit(corpus, **kw),
        "ARTM": lambda **kw: tj.ARTM(4, max_iter=14, progress=False, scores=("perplexity", "sparsity"),
                                     regularizers=[(R.sparse_theta(), R.Linear(1, 14, 0.0, 0.3)),
                                                   (R.decorrelate(), 1.0), (R.smooth_phi(), history_tau)]
                                     ).fit(corpus, **kw),
        "PTM": lambda **kw: tj.PTM(4, max_iter=10, tol=0, progress=False).fit(corpus, **kw),
        "select_order": lambda **kw: select_order(corpus, 5, 3, max_iter=6, tol=0, progress=False, **kw),
        "TTMM-EM": lambda **kw: tj.TTMM(4, n_themes=2, max_iter=14, tol=0, progress=False).fit(corpus, **kw),
        "TTMM-SGD": lambda **kw: tj.TTMM(4, n_themes=2, solver="sgd", batch_size=8, max_iter=14, tol=0,
                                         progress=False).fit(corpus, **kw),
        # K_max 4 with IBP births: the chain grows its slots, so a checkpoint may hold a larger state
        "LIDA": lambda **kw: tj.LIDA(4, variant="lida", max_iter=14, burn_in=6, hyper_start=2, eval_every=5,
                                     progress=False).fit(corpus, **kw),
    }
""")
#: The killed fits, all in one child interpreter: each fit runs in a thread of its own that stops
#: for good right after writing the checkpoint file named for it (a deterministic point, mid-run),
#: and once every fit has stopped the child kills itself with SIGKILL -- nothing of any fit runs
#: after its stop, no ``finally`` nor exit handler: what a kill at that instant leaves.
#: argv: (fit, folder, file of the stop) for each fit.
CHILD = SETUP + textwrap.dedent("""
    import os, signal, sys, threading
    from pathlib import Path
    from topicjax.core import checkpoint as ck

    write = ck.RunCheckpoint._write
    stops = {}  # checkpoint file -> set when its fit has written it (or ended without writing it)

    def write_then_stop(self, *args, **kwargs):  # a test-only hook: every save of save / save_host
        write(self, *args, **kwargs)
        reached = stops.get(str(self.path))
        if reached is not None and not reached.is_set():
            reached.set()
            threading.Event().wait()  # this fit stops here until the kill

    ck.RunCheckpoint._write = write_then_stop
    args = sys.argv[1:]
    for name, folder, stop in zip(args[0::3], args[1::3], args[2::3]):
        reached = stops[str(Path(folder) / stop)] = threading.Event()

        def fit(name=name, folder=folder, reached=reached):
            try:
                FITS[name](checkpoint=folder, checkpoint_every=4)
            finally:
                reached.set()  # ended (or failed) without its stop: the parent is told below

        thread = threading.Thread(target=fit, daemon=True)
        thread.start()
        reached.wait()
        if not thread.is_alive():
            thread.join()
            sys.exit(f"the {name} fit ended before its checkpoint {stop}")
        print("STOPPED", name, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")
NS: dict = {}
exec(SETUP, NS)  # noqa: S102 - our own fixed text
FITS = NS["FITS"]


def outcome(result) -> dict:
    """What must be equal between a resumed and an uninterrupted fit: every fitted array and the
    history (bit for bit; wall times excepted)."""
    def hist(h):
        return repr([{k: v for k, v in r.items() if k != "seconds"} for r in h])

    if hasattr(result, "orders"):  # an OrderSelection
        return {"orders": result.orders, "bics": repr(result.bics),
                **{f"{M}/{k}": v for M, m in result.models.items() for k, v in outcome(m).items()}}
    out = {"history": hist(result.history_), "n_iter": result.n_iter_, "phi": np.asarray(result.phi_),
           "theta": np.asarray(result.theta_)}
    for name in ("u_", "v_", "pi_", "tau_", "bic_history_", "loglik_history_", "scores_", "hyper_trace_",
                 "theta_bar_", "phi_bar_"):
        if hasattr(result, name):
            v = getattr(result, name)
            out[name] = hist(v) if name == "scores_" else (repr(v) if isinstance(v, (list, dict)) else np.asarray(v))
    return out


def assert_same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        else:
            assert a[k] == b[k], k


def run_meta(path: Path) -> dict:
    with np.load(path) as z:
        return json.loads(z["meta"].tobytes())


def kill_all(stops: dict) -> None:
    """Run the fits ``{name: (folder, file of the stop)}`` in one child (:data:`CHILD`), which
    kills itself with SIGKILL once each has stopped right after writing its file."""
    path = str(Path(tj.__file__).parents[1]) + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": path, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    args = [str(a) for name, (folder, stop) in stops.items() for a in (name, folder, stop)]
    proc = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, f"the child was not killed: {proc.stdout[-500:]} {proc.stderr[-3000:]}"
    assert proc.stdout.split() == [w for name in stops for w in ("STOPPED", name)], proc.stdout


@pytest.fixture
def restores(monkeypatch):
    """The ``done`` and ``finished`` of every checkpoint a run resumed from."""
    seen = []
    real, real_host = ck.RunCheckpoint.restore, ck.RunCheckpoint.restore_host

    def spy(self, state, prev):
        out = real(self, state, prev)
        seen.append((self.path.stem, None if out is None else (out[3], out[5])))
        return out

    def spy_host(self):  # a run of driver.run_host (LIDA's chains)
        out = real_host(self)
        seen.append((self.path.stem, None if out is None else (out[1], out[3])))
        return out

    monkeypatch.setattr(ck.RunCheckpoint, "restore", spy)
    monkeypatch.setattr(ck.RunCheckpoint, "restore_host", spy_host)
    return seen


FAMILIES = ["PLSA", "ARTM", "PTM", "TTMM-EM", "TTMM-SGD", "LIDA"]


def test_killed_fits_resume_to_the_same_model(tmp_path, restores):
    """Every family's fit killed (SIGKILL) right after its first checkpoint, and PTM's order sweep
    right after the first checkpoint of its second order, resume to the uninterrupted fit.

    The uninterrupted fits run first, in this process: the child then loads their programs from
    the run's shared compilation cache instead of compiling them again."""
    reference = {name: outcome(FITS[name]()) for name in [*FAMILIES, "select_order"]}
    folders = {name: tmp_path / name for name in reference}
    kill_all({**{name: (folders[name], "fit.npz") for name in FAMILIES},
              "select_order": (folders["select_order"], "order_4.npz")})
    failures = []
    for name in reference:
        restores.clear()
        try:
            (check_order_sweep if name == "select_order" else check_family)(name, folders[name], restores,
                                                                              reference[name])
        except AssertionError as e:
            failures.append(f"{name}: {e}")
    assert not failures, "\n\n".join(failures)


def check_family(family: str, folder: Path, restores: list, reference: dict) -> None:
    """A fit killed after its first checkpoint resumes from it to the uninterrupted fit."""
    meta = run_meta(folder / "fit.npz")
    assert 0 < meta["done"] and not meta["finished"], "the kill came after the fit had finished"
    resumed = FITS[family](checkpoint=folder, checkpoint_every=4)
    assert restores == [("fit", (meta["done"], False))]  # it resumed, it did not start over
    assert_same(outcome(resumed), reference)


def check_order_sweep(name: str, folder: Path, restores: list, reference: dict) -> None:
    """A sweep killed during its second order resumes at its order and iteration."""
    assert run_meta(folder / "order_5.npz")["finished"]
    meta4 = run_meta(folder / "order_4.npz")
    assert 0 < meta4["done"] < 6 and not meta4["finished"]
    assert not (folder / "order_3.npz").exists()
    resumed = FITS[name](checkpoint=folder, checkpoint_every=4)
    # order 5 restored finished (not refitted), order 4 at its saved iteration, order 3 fresh
    assert restores == [("order_5", (6, True)), ("order_4", (meta4["done"], False)), ("order_3", None)]
    assert_same(outcome(resumed), reference)


# ----------------------------------------------------------------------------- in-process behaviour
class Interrupt(BaseException):
    pass


def interrupted(make, folder, after_saves: int, monkeypatch, **kw):
    """Run ``make(checkpoint=folder)`` and stop it right after its ``after_saves``-th checkpoint."""
    real = ck.RunCheckpoint.save
    count = [0]

    def save(self, *args, **kwargs):
        real(self, *args, **kwargs)
        count[0] += 1
        if count[0] == after_saves:
            raise Interrupt

    monkeypatch.setattr(ck.RunCheckpoint, "save", save)
    with pytest.raises(Interrupt):
        make(checkpoint=folder, **kw)
    monkeypatch.undo()


@pytest.fixture(scope="module")
def corpus():
    return NS["corpus"]


def test_random_state_none_resumes_with_the_checkpoint_seed(corpus, tmp_path, monkeypatch):
    def make(**kw):
        return tj.PLSA(4, max_iter=12, tol=0, random_state=None, progress=False).fit(corpus, **kw)

    interrupted(make, tmp_path, 1, monkeypatch, checkpoint_every=5)
    seed = json.loads((tmp_path / "checkpoint.json").read_text())["seed"]
    resumed = make(checkpoint=tmp_path, checkpoint_every=5)
    assert resumed.seed_ == seed
    np.testing.assert_array_equal(resumed.phi_, tj.PLSA(4, max_iter=12, tol=0, random_state=seed,
                                                         progress=False).fit(corpus).phi_)


def test_a_finished_checkpoint_returns_the_model_at_once(corpus, tmp_path, restores, monkeypatch):
    first = tj.PLSA(4, max_iter=9, tol=0, progress=False).fit(corpus, checkpoint=tmp_path, checkpoint_every=4)
    from topicjax.core import driver

    monkeypatch.setattr(driver, "_block", None)  # any iteration would fail
    again = tj.PLSA(4, max_iter=9, tol=0, progress=False).fit(corpus, checkpoint=tmp_path, checkpoint_every=4)
    assert restores[-1] == ("fit", (9, True))
    assert_same(outcome(again), outcome(first))


def test_convergence_is_resumed_too(corpus, tmp_path, monkeypatch):
    """The stopping rule's last measure is part of the checkpoint: a run that converges after the
    resume stops at the same iteration."""
    def make(**kw):
        return tj.TTMM(4, n_themes=2, max_iter=200, tol=1e-4, progress=False).fit(corpus, **kw)

    reference = make()
    assert 2 < reference.n_iter_ < 200
    interrupted(make, tmp_path, 1, monkeypatch, checkpoint_every=2)
    assert_same(outcome(make(checkpoint=tmp_path, checkpoint_every=2)), outcome(reference))


def test_a_resumed_fit_runs_the_programs_of_the_fresh_one(corpus, tmp_path, monkeypatch, caplog):
    """The restored state is placed as a fresh fit's (uncommitted arrays), so the resumed fit
    compiles nothing more: a state committed to its device was another program for XLA, which
    every resume compiled again (or loaded from the persistent cache)."""
    def make(**kw):
        return tj.PLSA(4, max_iter=9, tol=0, progress=False).fit(corpus, **kw)

    fresh = make()
    interrupted(make, tmp_path, 1, monkeypatch, checkpoint_every=4)
    with caplog.at_level("WARNING"), jax.log_compiles(True):
        resumed = make(checkpoint=tmp_path, checkpoint_every=4)
    assert [r.getMessage()[:60] for r in caplog.records if r.getMessage().startswith("Compiling")] == []
    assert_same(outcome(resumed), outcome(fresh))


def test_another_fit_is_refused(corpus, tmp_path):
    tj.PLSA(4, max_iter=3, progress=False).fit(corpus, checkpoint=tmp_path)
    with pytest.raises(ValueError, match=rf"checkpoint {tmp_path} was written by another fit \(params.max_iter "
                                         r"differs: 3 there, 4 now\); use another folder or delete it"):
        tj.PLSA(4, max_iter=4, progress=False).fit(corpus, checkpoint=tmp_path)
    other = tj.datasets.make_bars(n_docs=40, doc_length=30, seed=4)[0]
    with pytest.raises(ValueError, match=r"was written by another fit \(corpus differs"):
        tj.PLSA(4, max_iter=3, progress=False).fit(other, checkpoint=tmp_path)
    with pytest.raises(ValueError, match=r"was written by another fit \(model differs: 'PLSA' there, 'PTM' now\)"):
        tj.PTM(4, max_iter=3, progress=False).fit(corpus, checkpoint=tmp_path)
    # the progress bar is not part of the fit
    tj.PLSA(4, max_iter=3, progress=True).fit(corpus, checkpoint=tmp_path)


def test_corrupt_checkpoints_are_named(corpus, tmp_path):
    tj.PLSA(4, max_iter=3, progress=False).fit(corpus, checkpoint=tmp_path)
    (tmp_path / "fit.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match=rf"checkpoint {tmp_path / 'fit.npz'} is corrupt \(.*\); delete it"):
        tj.PLSA(4, max_iter=3, progress=False).fit(corpus, checkpoint=tmp_path)
    (tmp_path / "checkpoint.json").write_text("{")
    with pytest.raises(ValueError, match=rf"checkpoint {tmp_path / 'checkpoint.json'} is corrupt"):
        tj.PLSA(4, max_iter=3, progress=False).fit(corpus, checkpoint=tmp_path)


def test_checkpoint_settings_are_validated(corpus, tmp_path):
    with pytest.raises(ValueError, match=r"^checkpoint_every must be an integer >= 1, got 0"):
        tj.PLSA(4, max_iter=3, progress=False).fit(corpus, checkpoint=tmp_path, checkpoint_every=0)
    with pytest.raises(ValueError, match=r"^checkpoint_every must be an integer >= 1, got 2.5"):
        tj.TTMM(4, n_themes=2, max_iter=3, progress=False).fit(corpus, checkpoint_every=2.5)
    with pytest.raises(ValueError, match=r"^checkpoint must be a folder path \(str or os.PathLike\), got 3"):
        tj.PTM(4, max_iter=3, progress=False).fit(corpus, checkpoint=3)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"exists and is not a folder"):
        tj.PLSA(4, max_iter=3, progress=False).fit(corpus, checkpoint=tmp_path / "file")


def test_history_and_host_values_round_trip_exactly(tmp_path):
    import jax.numpy as jnp

    value = {"a": [1, 2.5, float("nan"), None, True, "x", (3, np.float32(0.1))], "b": np.arange(3.0),
             "big": 2**100, "g": np.int64(7)}
    got = {}
    run = ck.RunCheckpoint(tmp_path / "x.npz", 1, get_host=lambda: value, set_host=got.update)
    run.save(jnp.arange(2.0), {"m": jnp.zeros(())}, True, 1, [value, {"iteration": 2}], finished=False)
    state, prev, has_prev, done, history, finished = run.restore(jnp.zeros(2), {"m": jnp.ones(())})
    assert repr(history) == repr([value, {"iteration": 2}]) and repr(got) == repr(value)
    assert type(history[0]["a"][6][1]) is np.float32 and type(history[0]["g"]) is np.int64
    np.testing.assert_array_equal(state, [0.0, 1.0])
    assert float(prev["m"]) == 0.0 and has_prev and done == 1 and not finished
    with pytest.raises(ValueError, match="the saved state has another structure than this fit's"):
        run.restore((jnp.zeros(2),), {"m": jnp.ones(())})
    with pytest.raises(ValueError, match=r"state leaf 0 is float32\[2\], this fit has float32\[3\]"):
        run.restore(jnp.zeros(3), {"m": jnp.ones(())})


def test_a_sharded_fit_resumes_on_its_mesh(corpus, tmp_path, monkeypatch):
    """A fit sharded over all devices (1 in the suite, 4 in tests/test_gpu_paths.py's multi-device
    run) resumes to the uninterrupted fit; its folder records the mesh's number of devices and
    refuses an unsharded fit, and a mesh of another size."""
    from topicjax.scale.distributed import make_mesh

    n = len(jax.devices())

    def make(mesh=None, **kw):
        mesh = make_mesh() if mesh is None else mesh
        return tj.ARTM(4, max_iter=10, progress=False, scores=()).fit(corpus, mesh=mesh, **kw)

    interrupted(make, tmp_path, 1, monkeypatch, checkpoint_every=4)
    assert_same(outcome(make(checkpoint=tmp_path, checkpoint_every=4)), outcome(make()))
    with pytest.raises(ValueError, match=rf"another fit \(devices differs: {n} there, None now\)"):
        tj.ARTM(4, max_iter=10, progress=False, scores=()).fit(corpus, checkpoint=tmp_path)
    if n > 1:
        with pytest.raises(ValueError, match=rf"another fit \(devices differs: {n} there, 1 now\)"):
            make(mesh=make_mesh(jax.devices()[:1]), checkpoint=tmp_path)
