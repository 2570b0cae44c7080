"""Saving and loading fitted models: a folder holding ``arrays.npz`` and ``meta.json``.

Arrays round-trip exactly (``np.savez`` keeps dtype and bits); metadata is JSON (hyper-parameters,
vocabulary, score histories).  Every model of the package saves through :func:`save_folder` and
loads through :func:`load_folder`; the ``"model"`` key of the metadata names the class so that
:func:`load` can dispatch.

>>> import tempfile, numpy as np
>>> d = tempfile.mkdtemp()
>>> save_folder(d, {"phi": np.eye(2)}, {"model": "Example", "n": 2})
>>> arrays, meta = load_folder(d)
>>> meta["n"], arrays["phi"].tolist()
(2, [[1.0, 0.0], [0.0, 1.0]])
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["save_folder", "load_folder", "load", "jsonable", "FORMAT_VERSION"]

FORMAT_VERSION = 1


def jsonable(x):
    """``x`` with numpy/JAX arrays and scalars turned into lists and Python numbers (for JSON)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if hasattr(x, "shape") and hasattr(x, "dtype"):  # jax arrays
        return np.asarray(x).tolist()
    return x


def save_folder(path, arrays: dict, meta: dict) -> None:
    """Write ``arrays`` (name -> array, ``None`` values skipped) and JSON ``meta`` to folder ``path``,
    atomically: both files are written to a temporary folder beside ``path``, which then replaces
    ``path`` by a rename, so an interrupted save never leaves a half-written model (an existing
    model at ``path`` is replaced only once the new one is complete)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} exists and is not a folder; a model is saved as a folder")
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    meta = dict(meta)
    meta.setdefault("format_version", FORMAT_VERSION)
    text = json.dumps(jsonable(meta), indent=1)  # fails before anything is written
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.saving-", dir=parent))
    try:
        np.savez(tmp / "arrays.npz", **{k: np.asarray(v) for k, v in arrays.items() if v is not None})
        (tmp / "meta.json").write_text(text, encoding="utf-8")
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=parent))
            old.rmdir()
            path.rename(old)
            tmp.rename(path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_folder(path) -> tuple[dict, dict]:
    """Read a folder written by :func:`save_folder`; a missing or corrupt file is a clear error."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a saved model folder")
    meta_file, arr_file = path / "meta.json", path / "arrays.npz"
    for f in (meta_file, arr_file):
        if not f.is_file():
            raise FileNotFoundError(f"{f} is missing: {path} is not a complete saved model")
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{meta_file}: corrupt JSON at line {e.lineno}: {e.msg}") from None
    try:
        with np.load(arr_file, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:  # zipfile.BadZipFile, ValueError, EOFError ...
        raise ValueError(f"{arr_file}: corrupt array file ({type(e).__name__}: {e})") from None
    return arrays, meta


def load(path):
    """Load any saved topicjax model, choosing the class from its metadata."""
    import topicjax

    _, meta = load_folder(path)
    name = meta.get("model")
    cls = getattr(topicjax, str(name), None)
    if cls is None or not hasattr(cls, "load"):
        raise ValueError(f"{path}: unknown model type {name!r}")
    return cls.load(path)
