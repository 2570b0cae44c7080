"""Saving and loading fitted models: a folder holding ``arrays.npz`` and ``meta.json``.

Arrays round-trip exactly (``np.savez`` keeps dtype and bits); metadata is JSON (hyper-parameters,
vocabulary, score histories).  Every model of the package saves through :func:`save_folder` and
loads through :func:`load_folder`; the ``"model"`` key of the metadata names the class so that
:func:`load` can dispatch.

What a save may overwrite: a new folder is created; an empty folder is filled; a folder that
holds a topicjax model (``meta.json`` naming a model and its ``format_version``, beside
``arrays.npz``) has those two files replaced, atomically, and everything else in it (notes,
reports, sub-folders the user put there) is kept.  Anything else -- ``.``, ``..``, a file, any
other non-empty folder -- is refused with :class:`SaveRefusedError` before anything is written.
Saves to one folder take its lock (``.NAME.lock`` beside it, an ``flock`` that dies with its
process): a second save while one runs is refused, and whoever next holds the lock (a save, or a
load that finds leftovers) removes what killed saves left, finishing a replacement killed between
its two renames (the two files carry one ``save_id``, so a reader never mixes two saves).

>>> import tempfile, numpy as np
>>> d = tempfile.mkdtemp()
>>> save_folder(d, {"phi": np.eye(2)}, {"model": "Example", "n": 2})
>>> arrays, meta = load_folder(d)
>>> meta["n"], arrays["phi"].tolist()
(2, [[1.0, 0.0], [0.0, 1.0]])
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from topicjax import _families
from topicjax._outputs import OutputRefusedError, check_file
from topicjax.core.plain import jsonable

try:
    import fcntl
except ImportError:  # not POSIX: saves are not locked and leftovers are not removed
    fcntl = None

__all__ = ["save_folder", "load_folder", "load", "register_model", "MODEL_CLASSES", "jsonable", "FORMAT_VERSION", "SavedModelError", "ArraySpec",
           "check_arrays", "check_meta", "check_save_target", "SaveRefusedError", "holds_model",
           "describing_file", "record_describing", "drop_describing", "DESCRIBING_MANIFEST", "check_simplex"]

FORMAT_VERSION = 1

#: the array of ``arrays.npz`` holding the save's id (``meta.json`` has it as ``save_id``)
SAVE_ID_ARRAY = "__save_id__"
_SAVE_ID = re.compile(r"[0-9a-f]{16}\Z")
#: hidden files of a save in progress inside a model folder (``.meta.json.saving-ID``, ...)
_PENDING = (".arrays.npz.saving-", ".meta.json.saving-")
#: seconds a save waits for a folder's lock (held briefly by a load that cleans up) before refusing
LOCK_PATIENCE = 0.5


class SavedModelError(ValueError):
    """A saved model folder whose contents are not a valid model of the class loading it (the
    message names the folder and the field)."""


class SaveRefusedError(OutputRefusedError):
    """A save refused before anything was written: its folder is ``.``, a file, a folder holding
    something other than a topicjax model, or one that another process is saving to."""


# ----------------------------------------------------------------------------- what a save may overwrite
def holds_model(path) -> bool:
    """Whether folder ``path`` holds a saved topicjax model: ``arrays.npz`` beside a ``meta.json``
    that is a JSON object naming a ``model`` and its integer ``format_version`` (what every save
    writes); only such a folder is ever overwritten by a save."""
    path = Path(path)
    if not (path / "arrays.npz").is_file():
        return False
    meta = _meta_or_none(path / "meta.json")
    return (meta is not None and isinstance(meta.get("model"), str) and isinstance(meta.get("format_version"), int)
            and not isinstance(meta.get("format_version"), bool))


def _meta_or_none(file: Path):
    try:
        meta = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def check_save_target(path) -> Path:
    """``path`` as a :class:`~pathlib.Path` if a model may be saved there -- a new folder, an empty
    folder or a folder that :func:`holds_model` (the save replaces that model) -- else a
    :class:`SaveRefusedError` naming it; writes nothing (callers check before long work)."""
    p = Path(path)
    if p.name in ("", ".."):
        raise SaveRefusedError(f"cannot save a model to {str(path)!r}: a model is saved to a folder of its own "
                               f"(e.g. {p / 'model'}), and a save never fills the working or a parent folder")
    if p.is_symlink() and not p.exists():
        raise SaveRefusedError(f"{p} is a broken symbolic link; save the model to another folder")
    if p.exists():
        if not p.is_dir():
            raise SaveRefusedError(f"{p} exists and is not a folder: a model is saved as a folder, and a save never "
                                   "overwrites a file")
        if not holds_model(p):
            with os.scandir(p) as entries:
                other = sorted(e.name for e in entries if not e.name.startswith(_PENDING))
            if other:
                raise SaveRefusedError(f"{p} is a folder that does not hold a topicjax model (it holds "
                                       f"{_some(other)}); "
                                       "a save only creates a folder, fills an empty one or replaces a saved model: "
                                       "choose another folder")
    return p


# ----------------------------------------------------------------------------- the lock of a save
_BUSY, _UNLOCKED = "busy", "unlocked"


def _real(path: Path) -> Path:
    """The one name of a folder that locks and leftovers go by (``.``, links and ``..`` resolved)."""
    return Path(os.path.realpath(path))


def _lock_file(path: Path) -> Path:
    return path.parent / f".{path.name}.lock"


def _acquire(lock_file: Path, patience: float):
    """The descriptor of the held lock; ``_BUSY`` when another process holds it for ``patience``
    seconds; ``_UNLOCKED`` where files cannot be locked (no ``fcntl``, a read-only folder, a file
    system without ``flock``)."""
    if fcntl is None:
        return _UNLOCKED
    deadline = time.monotonic() + patience
    while True:
        try:
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return _UNLOCKED
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                return _BUSY
            time.sleep(0.02)
            continue
        except OSError:
            os.close(fd)
            return _UNLOCKED
        try:  # the holder before us removes the file when done: lock the file the name now shows
            st, now = os.fstat(fd), os.stat(lock_file)
            current = (st.st_ino, st.st_dev) == (now.st_ino, now.st_dev)
        except FileNotFoundError:
            current = False
        if current:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


def _release(fd, lock_file: Path) -> None:
    try:
        lock_file.unlink(missing_ok=True)  # while held: nobody holds the name we remove
    finally:
        os.close(fd)


def _holder(lock_file: Path) -> str:
    try:
        pid = lock_file.read_text().strip()
    except OSError:
        return ""
    return f" (process {pid})" if pid.isdigit() else ""


@contextlib.contextmanager
def _save_lock(real: Path, shown: Path):
    lock_file = _lock_file(real)
    fd = _acquire(lock_file, LOCK_PATIENCE)
    if fd == _BUSY:
        raise SaveRefusedError(f"another process{_holder(lock_file)} is saving to {shown}; this save wrote nothing "
                               "(save again when it has finished, or to another folder)")
    try:
        yield fd != _UNLOCKED
    finally:
        if fd != _UNLOCKED:
            _release(fd, lock_file)


# ----------------------------------------------------------------------------- leftovers of killed saves
def _leftovers(path: Path) -> tuple[list[Path], list[Path]]:
    """Pieces that saves to ``path`` leave while they run: folders ``.NAME.saving-*`` beside it
    (``.NAME.old-*`` too, left by earlier topicjax versions, whose saves renamed the folder away) and
    ``.arrays.npz.saving-*`` / ``.meta.json.saving-*`` inside it."""
    beside, inside = [], []
    prefixes = (f".{path.name}.saving-", f".{path.name}.old-")
    with contextlib.suppress(OSError), os.scandir(path.parent) as entries:
        beside = sorted(Path(e.path) for e in entries if e.name.startswith(prefixes))
    if path.is_dir():
        with contextlib.suppress(OSError), os.scandir(path) as entries:
            inside = sorted(Path(e.path) for e in entries if e.name.startswith(_PENDING))
    return beside, inside


def _arrays_save_id(file: Path):
    try:
        with np.load(file, allow_pickle=False) as z:
            return _save_id_of(z[SAVE_ID_ARRAY]) if SAVE_ID_ARRAY in z.files else None
    except Exception:  # missing or corrupt: load says which
        return None


def _save_id_of(a):
    a = np.asarray(a)
    value = str(a[()]) if a.shape == () and a.dtype.kind == "U" else None
    return value if value is not None and _SAVE_ID.match(value) else None


def _recover(path: Path) -> None:
    """Finish or remove what killed saves to ``path`` left.  Only with the lock held: then no save to
    ``path`` is running, so every leftover is provably stale."""
    beside, inside = _leftovers(path)
    saving = [p for p in beside if p.name.startswith(f".{path.name}.saving-")]
    old = [p for p in beside if p.name.startswith(f".{path.name}.old-")]
    if old and not os.path.lexists(path):  # an old save killed between renaming the model away and the new in
        done = [p for p in saving if (p / "meta.json").is_file() and (p / "arrays.npz").is_file()]
        chosen = max(done or old, key=lambda p: p.stat().st_mtime)
        os.rename(chosen, path)
    if inside:  # a replacement killed after its first rename is finished; anything else is dropped
        new_id = _arrays_save_id(path / "arrays.npz")
        pending = path / f".meta.json.saving-{new_id}"
        old_id = (_meta_or_none(path / "meta.json") or {}).get("save_id")
        if new_id is not None and pending in inside and old_id != new_id:
            os.replace(pending, path / "meta.json")
        for p in inside:
            p.unlink(missing_ok=True)
    if old and holds_model(path):
        for p in old:
            shutil.rmtree(p, ignore_errors=True)
    for p in saving:
        if p.exists():
            shutil.rmtree(p, ignore_errors=True)


def _clean_up(path: Path) -> None:
    """What a load does before reading: remove leftovers of killed saves (their lock's file too) when
    no save runs (the lock is free); a save in progress, or a folder it cannot write, is left alone."""
    lock_file = _lock_file(path)
    if fcntl is None or not (any(_leftovers(path)) or lock_file.exists()):
        return
    fd = _acquire(lock_file, 0.0)
    if fd in (_BUSY, _UNLOCKED):
        return
    try:
        _recover(path)
    except OSError:
        pass  # best effort: the next save reports what stops it
    finally:
        _release(fd, lock_file)


# ----------------------------------------------------------------------------- save
def _stage(name: str, path: Path) -> None:
    """A point of a save that tests stop at (``"written"``: the new files are complete, nothing is
    renamed; ``"arrays-replaced"``: a replacement between its two renames).  Does nothing."""


def _write_file(file: Path, write) -> None:
    with open(file, "xb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())


def _write_model(folder: Path, arrays: dict, text: str, save_id: str, names=("arrays.npz", "meta.json")) -> None:
    _write_file(folder / names[0], lambda fh: np.savez(fh, **arrays, **{SAVE_ID_ARRAY: np.array(save_id)}))
    _write_file(folder / names[1], lambda fh: fh.write(text.encode("utf-8")))


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_folder(path, arrays: dict, meta: dict) -> None:
    """Write ``arrays`` (name -> array, ``None`` values skipped) and JSON ``meta`` to folder ``path``.

    Only a new folder, an empty one or one that :func:`holds_model` is written (see
    :func:`check_save_target`; anything else is a :class:`SaveRefusedError` and nothing is
    written).  A new folder is written as a hidden folder beside ``path`` and renamed into place; a
    model folder gets its two files written as hidden files inside it and renamed over the old ones
    (everything else in the folder is kept).  Either way a save that fails or is killed leaves the
    previous state, and a reader sees the old model or the new one, never a mix.  A save while
    another process saves to ``path`` is refused."""
    path = check_save_target(path)
    arrays = {k: np.asarray(v) for k, v in arrays.items() if v is not None}
    if SAVE_ID_ARRAY in arrays:
        raise ValueError(f"array name {SAVE_ID_ARRAY!r} is reserved for the save's id")
    save_id = secrets.token_hex(8)
    meta = {**meta, "save_id": save_id}
    meta.setdefault("format_version", FORMAT_VERSION)
    text = json.dumps(jsonable(meta), indent=1)  # fails before anything is written
    path.parent.mkdir(parents=True, exist_ok=True)
    real = _real(path)
    with _save_lock(real, path) as locked:
        if locked:
            with contextlib.suppress(OSError):  # what it cannot remove does not stop this save
                _recover(real)
        check_save_target(path)  # again, now that no other save can change it
        if path.is_dir():
            _replace(path, arrays, text, save_id)
        else:
            _create(path, arrays, text, save_id)


def _create(path: Path, arrays: dict, text: str, save_id: str) -> None:
    tmp = path.parent / f".{path.name}.saving-{save_id}"
    tmp.mkdir()
    try:
        _write_model(tmp, arrays, text, save_id)
        _stage("written", path)
        os.rename(tmp, path)  # fails if a folder with files appeared there meanwhile
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _sync_folder(path.parent)


def _replace(path: Path, arrays: dict, text: str, save_id: str) -> None:
    new_arrays, new_meta = path / f".arrays.npz.saving-{save_id}", path / f".meta.json.saving-{save_id}"
    try:
        _write_model(path, arrays, text, save_id, names=(new_arrays.name, new_meta.name))
        _stage("written", path)
        os.replace(new_arrays, path / "arrays.npz")  # from here on the new model is the saved one
        _stage("arrays-replaced", path)
        os.replace(new_meta, path / "meta.json")
        _stage("replaced", path)
    except BaseException:
        if new_meta.exists() and not new_arrays.exists():  # between the renames: finish (or the next save, load)
            with contextlib.suppress(OSError):
                os.replace(new_meta, path / "meta.json")
        else:
            for f in (new_arrays, new_meta):
                f.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # what described the replaced model is not left beside the new one
        drop_describing(path)
    _sync_folder(path)


# ----------------------------------------------------------------------------- files that describe a saved model
#: A hidden file of a model folder listing the files written beside the model to describe it
#: (``topicjax fit``'s summary, ``topicjax report``'s pages and charts) with the save id of the model
#: they describe.  Only listed files are ever overwritten or removed by those writers, and a save
#: that replaces the model removes them all: nothing beside a model describes another model.
DESCRIBING_MANIFEST = ".topicjax-describing.json"


def _manifest(folder: Path) -> dict:
    m = _meta_or_none(folder / DESCRIBING_MANIFEST) or {}
    files = m.get("files")
    return {"save_id": m.get("save_id"), "files": sorted(f for f in files if isinstance(f, str) and "/" not in f
                                                          and f not in ("", ".", "..")) if isinstance(files, list) else []}


def _write_manifest(folder: Path, manifest: dict) -> None:
    tmp = folder / f"{DESCRIBING_MANIFEST}.{secrets.token_hex(4)}"
    tmp.write_text(json.dumps(manifest), encoding="utf-8")
    os.replace(tmp, folder / DESCRIBING_MANIFEST)


def describing_file(folder, name: str, what: str) -> Path:
    """The path of file ``name`` in model folder ``folder`` if a describing file may be written
    there: a new file, or one listed in the folder's manifest (written there earlier by topicjax to
    describe a model).  A file of the user's with that name is never overwritten: an
    :class:`~topicjax._outputs.OutputRefusedError` naming it (``what``: e.g. ``"the report"``)."""
    folder = Path(folder)
    if not holds_model(folder):
        raise OutputRefusedError(f"{folder} does not hold a saved topicjax model; {what} is written beside a model")
    listed = set(_manifest(folder)["files"])
    return check_file(folder / name, owns=lambda p: p.name in listed, kind=f"{what} written by topicjax")


def record_describing(folder, names) -> None:
    """List ``names`` (files just written in model folder ``folder``) as describing its current
    model, so that a later save replacing the model removes them."""
    folder = Path(folder)
    save_id = (_meta_or_none(folder / "meta.json") or {}).get("save_id")
    m = _manifest(folder)
    _write_manifest(folder, {"save_id": save_id, "files": sorted(set(m["files"]) | set(names))})


def drop_describing(folder, names=None) -> list[str]:
    """Remove the listed describing files of model folder ``folder`` (all, or those of ``names``
    that are listed) and unlist them; returns the names removed.  Unlisted files are untouched."""
    folder = Path(folder)
    m = _manifest(folder)
    if not m["files"] and not (folder / DESCRIBING_MANIFEST).exists():
        return []
    gone = [f for f in m["files"] if names is None or f in set(names)]
    for f in gone:
        (folder / f).unlink(missing_ok=True)
    rest = [f for f in m["files"] if f not in gone]
    if rest:
        _write_manifest(folder, {"save_id": m["save_id"], "files": rest})
    else:
        (folder / DESCRIBING_MANIFEST).unlink(missing_ok=True)
    return gone


# ----------------------------------------------------------------------------- load
def _interrupted_save(path: Path) -> str:
    """A hint when ``path`` is missing but a killed save left its pieces (ones that no load could
    clean up: a save in progress, or a folder it cannot write)."""
    if not path.parent.is_dir():
        return ""
    old = sorted(path.parent.glob(f".{path.name}.old-*"))
    new = [p for p in sorted(path.parent.glob(f".{path.name}.saving-*")) if (p / "meta.json").is_file()]
    if not (old or new):
        return ""
    parts = ([f"the previous model is in {old[-1]}"] if old else []) + ([f"the new one in {new[-1]}"] if new else [])
    return f" (a save was interrupted: {' and '.join(parts)}; rename one to {path.name})"


def _read_meta(meta_file: Path) -> dict:
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
    return meta


def _read_arrays(arr_file: Path) -> tuple[dict, str | None]:
    try:
        with np.load(arr_file, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:  # zipfile.BadZipFile, ValueError, EOFError ...
        raise SavedModelError(f"{arr_file}: corrupt array file, truncated or not written by save "
                              f"({type(e).__name__}: {e})") from None
    if SAVE_ID_ARRAY not in arrays:
        return arrays, None  # written before save ids, or by hand: nothing to match
    save_id = _save_id_of(arrays.pop(SAVE_ID_ARRAY))
    if save_id is None:
        raise SavedModelError(f"{arr_file}: array {SAVE_ID_ARRAY!r} is not a save id (16 hexadecimal digits)")
    return arrays, save_id


def load_folder(path) -> tuple[dict, dict]:
    """Read a folder written by :func:`save_folder`; a missing or corrupt file is a clear error
    (``FileNotFoundError`` for missing files, :class:`SavedModelError` for corrupt ones).  Leftovers
    of killed saves are removed first when no save to ``path`` is running; a replacement in progress
    reads as the model it replaces or the new one, never a mix."""
    path = Path(path)
    _clean_up(_real(path))
    if not path.is_dir():
        if path.exists():
            raise FileNotFoundError(f"{path} is a file, not a saved model folder")
        raise FileNotFoundError(f"{path} does not exist{_interrupted_save(path)}")
    meta_file, arr_file = path / "meta.json", path / "arrays.npz"
    for f in (meta_file, arr_file):
        if not f.is_file():
            raise FileNotFoundError(f"{f} is missing: {path} is not a saved model folder (a model folder holds "
                                    "meta.json and arrays.npz)")
    for _ in range(50):  # a save replacing the model renames arrays.npz, then meta.json
        meta = _read_meta(meta_file)
        arrays, save_id = _read_arrays(arr_file)
        if save_id is None or meta.get("save_id") == save_id:
            return arrays, meta
        with contextlib.suppress(FileNotFoundError):  # the new meta.json, not yet renamed into place
            pending = _read_meta(path / f".meta.json.saving-{save_id}")
            if pending.get("save_id") == save_id:
                return arrays, pending
        time.sleep(0.01)
    raise SavedModelError(f"{path}: arrays.npz and meta.json come from different saves (save ids {save_id!r} and "
                          f"{meta.get('save_id')!r}); save the model again")


#: The model classes :func:`load` reopens, by the name a save writes in ``"model"``: every public
#: estimator class of the package, registered by :class:`topicjax.estimator.TopicModelBase` as each
#: family's class is defined (this module, below the estimators, imports none of them at its top:
#: :func:`load` imports the packages of the family registry, :mod:`topicjax._families`, by name
#: when a class is not registered yet).
MODEL_CLASSES: dict[str, type] = {}


def register_model(cls: type) -> type:
    """Add a public estimator class of the package to :data:`MODEL_CLASSES` (classes defined
    elsewhere, such as a test's subclass, or private ones are not reopened by :func:`load`)."""
    if cls.__module__.startswith("topicjax.") and not cls.__name__.startswith("_"):
        MODEL_CLASSES[cls.__name__] = cls
    return cls


def load(path):
    """Load any saved topicjax model, choosing the class from its metadata (``"model"``)."""
    _, meta = load_folder(path)
    name = meta.get("model")
    if isinstance(name, str) and name not in MODEL_CLASSES:
        for family in _families.FAMILIES:  # ``import topicjax`` loads the families at first use, not at import
            importlib.import_module(family.package)
    cls = MODEL_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise SavedModelError(f"{path}: meta.json field 'model' is {name!r}, not a topicjax model "
                              f"({', '.join(sorted(MODEL_CLASSES))})")
    return cls.load(path)


# ----------------------------------------------------------------------------- validation of loaded models
class ArraySpec(NamedTuple):
    """What a saved array must be: ``dims`` (ints or symbol names such as ``"W"``, bound by the
    loader or by the first array using them), dtype ``kind`` (numpy kind letters: ``"f"`` floats,
    ``"b"`` bool, ``"iu"`` integers), whether it must be present, and whether its values must be
    non-negative (floats are always checked finite).  ``simplex``: the axis along which the array
    holds distributions (every sum 1, or 0 for an empty topic or document; Φ's columns are
    ``simplex=0``; a family whose distributions are grouped, such as Φ's rows by modality, checks
    them itself with :func:`check_simplex` once the labels are checked)."""

    dims: tuple
    kind: str = "f"
    required: bool = True
    nonneg: bool = False
    simplex: int | None = None


#: How far a saved distribution's sum may be from 1 (float32 sums over 10^5-10^6 entries stay
#: within 1e-4; an altered array is off by far more).
SIMPLEX_TOL = 1e-3


def check_simplex(path, name: str, a, axis: int, labels=None) -> None:
    """Check that array ``name`` holds distributions along ``axis`` -- every sum 1 within
    :data:`SIMPLEX_TOL`, or 0 (an empty topic or document) -- separately for each value of
    ``labels`` (integers, one per entry along ``axis``: Φ's rows by modality) when given.  Raises
    :class:`SavedModelError` naming the folder, the array and the first bad sum."""
    a = np.asarray(a)
    parts = [(None, a)] if labels is None else [(g, np.take(a, np.flatnonzero(labels == g), axis=axis))
                                                for g in np.unique(labels)]
    for g, part in parts:
        sums = part.sum(axis=axis, dtype=np.float64)
        bad = ~((np.abs(sums - 1.0) <= SIMPLEX_TOL) | (sums == 0.0))
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            where = f" (the entries of label {g})" if g is not None else ""
            raise SavedModelError(f"{path}: array {name!r} is not a distribution along axis {axis}{where}: the sum "
                                  f"at index {at} is {float(sums[at]):.6g}, not 1 (altered after it was saved?)")


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
            if spec.simplex is not None:
                check_simplex(path, name, a, spec.simplex)
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
