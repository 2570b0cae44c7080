"""topicjax's persistent compilation cache (``topicjax.core.jit_cache``) and a light ``import topicjax``.

The cache is process-wide and set once per process, and the suite's own JAX cache
(``tests/conftest.py``) would rule in this process, so what a user sees is checked in child
interpreters as a user's: no ``JAX_COMPILATION_CACHE_DIR`` nor JAX's thresholds, the cache folder
under a temporary ``XDG_CACHE_HOME``.  The programs compiled, loaded from the cache and written to
it are counted with ``jax.monitoring`` in each child.  The folder rule and the trim are checked in
this process on hand-made folders.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from child_env import quick_child_env
from topicjax.core import environment, jit_cache

ROOT = Path(__file__).resolve().parents[2]

#: a tiny PLSA fit, inside a record of warnings (the cache is turned on when ``tj.PLSA`` loads the
#: engine); prints the programs compiled from scratch, loaded and written, Φ, JAX's cache folder
#: and the cache's warnings
FIT = r"""
import json, sys, warnings
import jax, jax.monitoring, numpy as np
import topicjax as tj
if len(sys.argv) > 1:  # the user's own folder, set with jax.config
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
counts = {"compiled": 0, "loaded": 0, "written": 0}
def on_event(name, **_):
    key = {"/jax/compilation_cache/cache_hits": "loaded", "/jax/compilation_cache/cache_misses": "written"}.get(name)
    if key:
        counts[key] += 1
def on_duration(name, _secs, **_):
    if name == "/jax/core/compile/backend_compile_duration":  # recorded for a loaded program too
        counts["compiled"] += 1
jax.monitoring.register_event_listener(on_event)
jax.monitoring.register_event_duration_secs_listener(on_duration)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    corpus = tj.Corpus.from_dense(np.array([[2, 0, 1, 0], [0, 3, 0, 1], [1, 1, 1, 1]]))
    model = tj.PLSA(n_components=2, max_iter=3, random_state=0, progress=False).fit(corpus)
counts["compiled"] -= counts["loaded"]
print(json.dumps({**counts, "phi": np.asarray(model.phi_).tolist(), "dir": jax.config.jax_compilation_cache_dir,
                  "warnings": [str(w.message) for w in caught if "compilation cache" in str(w.message)]}))
"""


def run_child(code: str, *args: str, **env: str) -> dict:
    """``code`` in a child interpreter with a user's environment plus ``env``; its last line as JSON."""
    full = quick_child_env(**env)
    for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                 "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "JAX_ENABLE_COMPILATION_CACHE"):
        if name not in env:
            full.pop(name, None)
    if "TOPICJAX_CACHE" not in env:
        full.pop("TOPICJAX_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*-cache")) if folder.is_dir() else []


def test_a_fit_fills_the_cache_and_the_next_process_loads_it(tmp_path):
    xdg = tmp_path / "xdg"
    folder = xdg / "topicjax" / "jax"
    first = run_child(FIT, XDG_CACHE_HOME=str(xdg))
    assert first["dir"] == str(folder) and first["warnings"] == []
    # every program of the fit was compiled and stored (thresholds 0 s and every size)
    assert first["loaded"] == 0 and first["compiled"] > 0 and first["written"] == first["compiled"]
    assert len(entries(folder)) == first["written"]
    assert folder.stat().st_mode & 0o777 == 0o700  # JAX runs what it finds there: the user's only
    second = run_child(FIT, XDG_CACHE_HOME=str(xdg))
    assert second["compiled"] == 0 and second["written"] == 0 and second["loaded"] == first["written"]
    assert second["phi"] == first["phi"]  # the same programs: the same model, bit for bit
    assert len(entries(folder)) == first["written"]


def test_topicjax_cache_off_writes_nothing(tmp_path):
    xdg = tmp_path / "xdg"
    out = run_child(FIT, XDG_CACHE_HOME=str(xdg), TOPICJAX_CACHE="Off")
    assert out["dir"] is None and out["written"] == out["loaded"] == 0 and out["compiled"] > 0
    assert not xdg.exists()


def test_topicjax_cache_names_the_folder(tmp_path):
    folder = tmp_path / "mine"
    out = run_child(FIT, XDG_CACHE_HOME=str(tmp_path / "xdg"), TOPICJAX_CACHE=str(folder))
    assert out["dir"] == str(folder) and len(entries(folder)) == out["written"] > 0
    assert not (tmp_path / "xdg").exists()


@pytest.mark.parametrize("how", ["environment", "jax.config"])
def test_the_users_own_jax_cache_is_kept(tmp_path, how):
    """Set in ``JAX_COMPILATION_CACHE_DIR`` or with ``jax.config.update`` after ``import
    topicjax``: JAX's folder and the user's threshold stay; topicjax's folder is not made."""
    xdg, mine = tmp_path / "xdg", tmp_path / "users-own"
    if how == "environment":
        out = run_child(FIT, XDG_CACHE_HOME=str(xdg), JAX_COMPILATION_CACHE_DIR=str(mine),
                        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    else:
        out = run_child(FIT, str(mine), XDG_CACHE_HOME=str(xdg))
    assert out["dir"] == str(mine) and out["warnings"] == []
    assert len(entries(mine)) == out["written"] > 0
    assert not xdg.exists()


def test_an_unwritable_folder_warns_once_and_the_fit_runs(tmp_path):
    """A file where the folder should be (root may write anywhere, so no chmod)."""
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    (xdg / "topicjax").write_text("not a folder")
    out = run_child(FIT, XDG_CACHE_HOME=str(xdg))
    assert len(out["warnings"]) == 1 and str(xdg / "topicjax" / "jax") in out["warnings"][0]
    assert out["dir"] is None and out["written"] == 0 and out["compiled"] > 0
    for column in zip(*out["phi"]):  # a fitted model all the same: Φ's columns are distributions
        assert abs(sum(column) - 1) < 1e-5 and min(column) >= 0
    assert (xdg / "topicjax").read_text() == "not a folder"


IMPORTS = r"""
import json, sys
import topicjax
light = sorted(m for m in ("pandas", "sklearn", "matplotlib", "scipy", "jax") if m in sys.modules)
import topicjax.core, topicjax.data
engine = sorted(m for m in ("pandas", "sklearn", "matplotlib", "scipy.stats") if m in sys.modules)
print(json.dumps({"import": light, "engine": engine}))
"""


def test_import_topicjax_loads_no_heavy_library():
    """``import topicjax`` loads none of pandas, scikit-learn, matplotlib, SciPy or JAX (its names
    load at their first use), and the engine and the corpus do not load scikit-learn's pandas
    and ``scipy.stats`` (``CorpusVectorizer`` loads at its first use)."""
    out = run_child(IMPORTS)
    assert out == {"import": [], "engine": []}


# ------------------------------------------------------------------------------------- in process
def test_the_folder_follows_the_settings(monkeypatch, tmp_path):
    for name in ("TOPICJAX_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert environment.cache_folder() == tmp_path / "home" / ".cache" / "topicjax" / "jax"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG rule: absolute paths only
    assert environment.cache_folder() == tmp_path / "home" / ".cache" / "topicjax" / "jax"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert environment.cache_folder() == tmp_path / "xdg" / "topicjax" / "jax"
    monkeypatch.setenv("TOPICJAX_CACHE", "~/elsewhere")
    assert environment.cache_folder() == tmp_path / "home" / "elsewhere"
    monkeypatch.setenv("TOPICJAX_CACHE", "   ")  # blank counts as unset
    assert environment.cache_folder() == tmp_path / "xdg" / "topicjax" / "jax"
    for off in ("0", "off", "OFF", "None", " none "):
        monkeypatch.setenv("TOPICJAX_CACHE", off)
        assert environment.cache_folder() is None, off
        assert environment.check()["TOPICJAX_CACHE"] is None


def _entry(folder: Path, name: str, size: int, used: float, atime_file: bool = False) -> Path:
    path = folder / f"{name}-cache"
    path.write_bytes(b"x" * size)
    os.utime(path, (used, used))
    if atime_file:
        (folder / f"{name}-atime").write_bytes(b"12345678")
    return path


def test_trim_removes_the_least_recently_used_entries(tmp_path):
    now = time.time()
    # sizes 400, 300, 200, 100 bytes, used 4, 3, 2, 1 days ago; with a bound of 350 bytes the two
    # oldest go (1000 -> 300 bytes), then 300 <= 350
    old = _entry(tmp_path, "a", 400, now - 4 * 86400, atime_file=True)
    older = _entry(tmp_path, "b", 300, now - 3 * 86400)
    kept = [_entry(tmp_path, "c", 200, now - 2 * 86400), _entry(tmp_path, "d", 100, now - 86400)]
    other = tmp_path / "notes.txt"
    other.write_bytes(b"y" * 5000)  # not an entry of JAX's: never counted nor removed
    os.utime(other, (now - 99 * 86400,) * 2)
    assert jit_cache.trim(tmp_path, max_bytes=350) == 700
    assert not old.exists() and not (tmp_path / "a-atime").exists() and not older.exists()
    assert all(p.exists() for p in kept) and other.exists()
    assert jit_cache.trim(tmp_path, max_bytes=300) == 0  # within the bound: nothing to do


def test_the_trim_runs_once_a_day(tmp_path, monkeypatch):
    now = time.time()
    monkeypatch.setattr(jit_cache, "MAX_BYTES", 100)
    first = _entry(tmp_path, "a", 80, now - 2 * 86400)
    _entry(tmp_path, "b", 80, now - 86400)
    jit_cache._trim_now_and_then(tmp_path)  # no stamp yet: trims, leaves a stamp
    assert not first.exists() and (tmp_path / jit_cache._STAMP).exists()
    second = _entry(tmp_path, "c", 80, now)
    jit_cache._trim_now_and_then(tmp_path)  # trimmed less than a day ago: nothing
    assert len(entries(tmp_path)) == 2
    stamp_time = now - jit_cache.TRIM_EVERY - 60
    os.utime(tmp_path / jit_cache._STAMP, (stamp_time, stamp_time))
    jit_cache._trim_now_and_then(tmp_path)
    assert [p.name for p in entries(tmp_path)] == [second.name]
