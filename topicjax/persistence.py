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
import math
import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["save_folder", "load_folder", "load", "jsonable", "FORMAT_VERSION", "SavedModelError", "ArraySpec",
           "check_arrays", "check_meta"]

FORMAT_VERSION = 1


class SavedModelError(ValueError):
    """A saved model folder whose contents are not a valid model of the class loading it (the
    message names the folder and the field)."""


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


def _interrupted_save(path: Path) -> str:
    """A hint when ``path`` is missing but an interrupted :func:`save_folder` left its pieces."""
    if not path.parent.is_dir():
        return ""
    old = sorted(path.parent.glob(f".{path.name}.old-*"))
    new = [p for p in sorted(path.parent.glob(f".{path.name}.saving-*")) if (p / "meta.json").is_file()]
    if not (old or new):
        return ""
    parts = ([f"the previous model is in {old[-1]}"] if old else []) + ([f"the new one in {new[-1]}"] if new else [])
    return f" (a save was interrupted: {' and '.join(parts)}; rename one to {path.name})"


def load_folder(path) -> tuple[dict, dict]:
    """Read a folder written by :func:`save_folder`; a missing or corrupt file is a clear error
    (``FileNotFoundError`` for missing files, :class:`SavedModelError` for corrupt ones)."""
    path = Path(path)
    if not path.is_dir():
        if path.exists():
            raise FileNotFoundError(f"{path} is a file, not a saved model folder")
        raise FileNotFoundError(f"{path} does not exist{_interrupted_save(path)}")
    meta_file, arr_file = path / "meta.json", path / "arrays.npz"
    for f in (meta_file, arr_file):
        if not f.is_file():
            raise FileNotFoundError(f"{f} is missing: {path} is not a saved model folder (a model folder holds "
                                    "meta.json and arrays.npz)")
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise SavedModelError(f"{meta_file}: corrupt JSON at line {e.lineno}: {e.msg}") from None
    except UnicodeDecodeError as e:
        raise SavedModelError(f"{meta_file}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if not isinstance(meta, dict):
        raise SavedModelError(f"{meta_file}: expected a JSON object, got a JSON {type(meta).__name__}")
    version = meta.get("format_version", FORMAT_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version > FORMAT_VERSION:
        raise SavedModelError(f"{meta_file}: format_version {version!r} is not one this topicjax reads "
                              f"(<= {FORMAT_VERSION}); a newer topicjax wrote it")
    try:
        with np.load(arr_file, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:  # zipfile.BadZipFile, ValueError, EOFError ...
        raise SavedModelError(f"{arr_file}: corrupt array file, truncated or not written by save "
                              f"({type(e).__name__}: {e})") from None
    return arrays, meta


def load(path):
    """Load any saved topicjax model, choosing the class from its metadata (``"model"``)."""
    import topicjax
    from topicjax.estimator import TopicModelBase

    _, meta = load_folder(path)
    name = meta.get("model")
    cls = getattr(topicjax, name, None) if isinstance(name, str) else None
    if not (isinstance(cls, type) and issubclass(cls, TopicModelBase)):
        known = sorted(n for n in topicjax.__all__
                       if isinstance(getattr(topicjax, n), type) and issubclass(getattr(topicjax, n), TopicModelBase))
        raise SavedModelError(f"{path}: meta.json field 'model' is {name!r}, not a topicjax model ({', '.join(known)})")
    return cls.load(path)


# ----------------------------------------------------------------------------- validation of loaded models
class ArraySpec(NamedTuple):
    """What a saved array must be: ``dims`` (ints or symbol names such as ``"W"``, bound by the
    loader or by the first array using them), dtype ``kind`` (numpy kind letters: ``"f"`` floats,
    ``"b"`` bool, ``"iu"`` integers), whether it must be present, and whether its values must be
    non-negative (floats are always checked finite)."""

    dims: tuple
    kind: str = "f"
    required: bool = True
    nonneg: bool = False


def check_arrays(path, arrays: dict, specs: dict, sizes: dict) -> dict:
    """Check ``arrays`` against ``specs`` (name -> :class:`ArraySpec`); ``sizes`` binds symbols
    (e.g. ``{"W": len(vocab), "T": n_components}``) and receives those bound here.  Raises
    :class:`SavedModelError` naming the folder and the array."""
    for name, spec in specs.items():
        if name not in arrays:
            if spec.required:
                raise SavedModelError(f"{path}: arrays.npz has no array {name!r}")
            continue
        a = arrays[name]
        if a.dtype.kind not in spec.kind:
            want = {"f": "floats", "b": "booleans", "iu": "integers"}.get(spec.kind, spec.kind)
            raise SavedModelError(f"{path}: array {name!r} has dtype {a.dtype}, expected {want}")
        if a.ndim != len(spec.dims):
            raise SavedModelError(f"{path}: array {name!r} has shape {a.shape}, expected {len(spec.dims)} dimensions "
                                  f"({' x '.join(map(str, spec.dims))})")
        for axis, (dim, n) in enumerate(zip(spec.dims, a.shape)):
            want = dim if isinstance(dim, int) else sizes.setdefault(dim, n)
            if n != want:
                shown = " x ".join(str(d) if isinstance(d, int) else f"{d}={sizes.get(d, '?')}" for d in spec.dims)
                raise SavedModelError(f"{path}: array {name!r} has shape {a.shape}, expected {shown} "
                                      f"({_symbols_doc(spec.dims)})")
        if a.dtype.kind == "f" and a.size:
            bad = ~np.isfinite(a)
            if bad.any():
                raise SavedModelError(f"{path}: array {name!r} holds non-finite values (first at index "
                                      f"{tuple(int(i) for i in np.argwhere(bad)[0])})")
            if spec.nonneg and (a < 0).any():
                raise SavedModelError(f"{path}: array {name!r} holds negative values (first at index "
                                      f"{tuple(int(i) for i in np.argwhere(a < 0)[0])})")
    return sizes


_SYMBOLS = {"W": "W = len(vocab)", "T": "T = n_components", "J": "J = n_themes"}


def _symbols_doc(dims) -> str:
    known = [text for d, text in _SYMBOLS.items() if d in dims]
    return ", ".join(known) if known else "sizes shared with the other arrays"


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_META_KINDS = {
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a non-negative integer"),
    "number": (lambda v: _is_number(v) and math.isfinite(v), "a finite number"),
    "numbers": (lambda v: isinstance(v, list) and all(_is_number(x) for x in v), "a list of numbers"),
    "ints": (lambda v: isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
             "a list of integers"),
    "strings": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings"),
    "records": (lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v), "a list of records (objects)"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "str": (lambda v: isinstance(v, str), "a string"),
}


def check_meta(path, meta: dict, specs: dict) -> None:
    """Check the fields ``specs`` (name -> kind, a key of ``_META_KINDS``: ``"int"``, ``"number"``,
    ``"numbers"``, ``"ints"``, ``"strings"``, ``"records"``, ``"list"``, ``"str"``) of ``meta``
    where present; :class:`SavedModelError` naming the folder and the field otherwise."""
    for name, kind in specs.items():
        if name in meta:
            ok, what = _META_KINDS[kind]
            if not ok(meta[name]):
                v = repr(meta[name])
                raise SavedModelError(f"{path}: meta.json field {name!r} must be {what}, got "
                                      f"{v if len(v) <= 60 else v[:57] + '...'}")
