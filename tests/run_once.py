"""Work that several tests check, done once per pytest run: :func:`once` runs ``compute(folder)``
the first time any test asks for ``name`` and keeps its JSON result; under pytest-xdist the
workers of one run share it through a lock file in the run's common temporary folder (the first
one to take the lock computes, the others read), as tests/test_docs.py shares its site build."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

_DONE: dict[str, object] = {}


def once(tmp_path_factory, name: str, compute: Callable[[Path], object]) -> tuple[Path, object]:
    """``(folder, result)``: ``compute(folder)``'s JSON-able result, computed in ``folder`` (new,
    empty) by one process of the run only.  An exception in ``compute`` propagates and leaves
    nothing behind: the next test to ask computes again."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, result = shared / name, shared / f"{name}.json"
    if str(result) in _DONE:
        return folder, _DONE[str(result)]
    try:
        import fcntl
    except ImportError:  # no flock (Windows): every worker computes its own
        folder = tmp_path_factory.mktemp(name)
        _DONE[str(result)] = compute(folder)
        return folder, _DONE[str(result)]
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not result.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed attempt left
            folder.mkdir()
            result.write_text(json.dumps(compute(folder)), encoding="utf-8")
        _DONE[str(result)] = json.loads(result.read_text(encoding="utf-8"))
    return folder, _DONE[str(result)]
