"""Checkpoint and resume of long fits, for every family through the one driver.

``fit(X, checkpoint=DIR, checkpoint_every=N)`` (every estimator; also
:func:`topicjax.ptm.select_order`) keeps the progress of the fit in folder ``DIR``:

* ``DIR/checkpoint.json``: what the fit is (the estimator's class and parameters, a fingerprint
  of the corpus, ...) and its seed (the one drawn for ``random_state=None``);
* ``DIR/<run>.npz``: one file per run of :func:`topicjax.core.driver.run` (``fit``, or
  ``order_<M>`` for each order of a PTM sweep), holding the driver's whole state after the last
  checkpointed iteration: the algorithm's state pytree, the stopping rule's last measure, the
  history so far, and the family's host state (an ARTM coefficient table of a schedule of the
  score history, the random generator of TTMM's SGD document order); a run of
  :func:`topicjax.core.driver.run_host` (LIDA's chains, whose arrays change shape as K_max grows)
  holds its whole state as host values instead (:meth:`RunCheckpoint.save_host`).

The driver writes the run file every ``N`` iterations and once more when the run ends (marked
finished), each time atomically: a temporary file in ``DIR`` is written, flushed to disk, then
renamed over the previous one, so a fit killed at any instant (``SIGKILL`` included) leaves the
last complete checkpoint.  Calling the same fit again with the same ``DIR`` resumes: the initial
state is replaced by the saved one and the loop continues at the saved iteration; a finished run
returns at once.  The resumed fit is the uninterrupted one, bit for bit on CPU (the same compiled
blocks run on the same values; tested by killing a subprocess for each family) when it runs with
the same number of E-step threads (``TOPICJAX_THREADS``, :mod:`topicjax.core.kernels`: another
count sums in another order) on the same kind of device; on a GPU, where scatter-adds may run in
any order, it is the same fit up to round-off.  ``fit_many`` (one compiled batch) has no
checkpoints; checkpoint the separate fits instead.  A folder written
by another fit -- other parameters, another corpus -- is refused with an error naming what
differs; delete it (or use another folder) to start over.

>>> import tempfile, topicjax as tj
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=40, seed=0)
>>> folder = tempfile.mkdtemp()
>>> a = tj.PLSA(4, max_iter=12, tol=0, progress=False).fit(corpus, checkpoint=folder, checkpoint_every=5)
>>> b = tj.PLSA(4, max_iter=12, tol=0, progress=False).fit(corpus, checkpoint=folder)  # finished: at once
>>> bool((a.phi_ == b.phi_).all()), b.n_iter_
(True, 12)
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core.sharding import host_array
from topicjax.core.validation import check_int

__all__ = ["Checkpoint", "RunCheckpoint", "fingerprint", "describe", "open_checkpoint"]

INFO = "checkpoint.json"


def fingerprint(corpus) -> str:
    """A SHA-256 of a corpus's contents (entries, sizes, vocabulary, labels, modalities)."""
    h = hashlib.sha256()
    h.update(f"{corpus.n_docs} {corpus.n_words}".encode())
    for a in (corpus.doc_ids, corpus.word_ids, corpus.counts, corpus.labels, corpus.modalities):
        if a is not None:
            a = np.ascontiguousarray(a)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
    h.update("\n".join(corpus.vocab).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _is_key(x) -> bool:
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def describe(value):
    """A JSON description of a parameter value, equal for equal settings across processes:
    plain values as they are, keys by their data, arrays by content, callables by name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): describe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return [describe(v) for v in value]
    if _is_key(value):
        return {"key": np.asarray(jax.random.key_data(value)).tolist()}
    if isinstance(value, (np.ndarray, jax.Array)):
        a = np.asarray(value)
        return {"array": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest(), "dtype": a.dtype.str,
                "shape": list(a.shape)}
    if callable(value) and hasattr(value, "__qualname__"):
        return {"callable": f"{getattr(value, '__module__', '')}.{value.__qualname__}"}
    return {"object": f"{type(value).__module__}.{type(value).__qualname__}"}


def _first_difference(a, b, where: str = "") -> str | None:
    """The dotted path of the first difference between two JSON values (keys in saved order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{where}{k}"
            d = _first_difference(a[k], b[k], f"{where}{k}.")
            if d is not None:
                return d
        return None
    return None if a == b else where.rstrip(".") or "(the whole description)"


def _write_atomic(path: Path, write: Callable) -> None:
    """``write(file)`` into a temporary file beside ``path``, flushed to disk, renamed over ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ----------------------------------------------------------------------------- values <-> npz + JSON
def _encode(obj, arrays: dict, prefix: str):
    """``obj`` as JSON with its arrays moved to ``arrays`` (exact: floats by repr, arrays by bits)."""
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError(f"checkpoint: a dict with non-string keys at {prefix}")
        return {"d": {k: _encode(v, arrays, f"{prefix}/{k}") for k, v in obj.items()}}
    if isinstance(obj, (list, tuple)):
        return {"l" if isinstance(obj, list) else "t": [_encode(v, arrays, f"{prefix}/{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, (np.ndarray, np.generic, jax.Array)):
        arrays[prefix] = np.asarray(obj)
        return {"a": prefix, "s": isinstance(obj, np.generic)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}
    raise TypeError(f"checkpoint: cannot store a {type(obj).__name__} at {prefix}")


def _decode(enc, arrays):
    if "d" in enc:
        return {k: _decode(v, arrays) for k, v in enc["d"].items()}
    if "l" in enc:
        return [_decode(v, arrays) for v in enc["l"]]
    if "t" in enc:
        return tuple(_decode(v, arrays) for v in enc["t"])
    if "a" in enc:
        a = arrays[enc["a"]]
        return a[()] if enc["s"] else a
    return enc["v"]


def _leaves_to_arrays(tree, prefix: str, arrays: dict) -> tuple[str, list[int]]:
    leaves, treedef = jax.tree.flatten(tree)
    keys = []
    for i, x in enumerate(leaves):
        if _is_key(x):
            keys.append(i)
            x = jax.random.key_data(x)
        arrays[f"{prefix}/{i}"] = host_array(x)
    return str(treedef), keys


def _restore_like(template, prefix: str, arrays: dict, treedef: str, keys: list, where: str):
    leaves, tdef = jax.tree.flatten(template)
    if str(tdef) != treedef:
        raise ValueError(f"{where}: the saved {prefix} has another structure than this fit's; the checkpoint was "
                         "written by another version of the algorithm: delete it to start over")
    out = []
    for i, t in enumerate(leaves):
        a = arrays.get(f"{prefix}/{i}")
        if a is None:
            raise ValueError(f"{where}: {prefix} leaf {i} is missing")
        if i in keys:
            want = jax.random.key_data(t)
            if a.shape != want.shape or a.dtype != want.dtype:
                raise ValueError(f"{where}: {prefix} leaf {i} (a random key) does not match this fit")
            out.append(jax.random.wrap_key_data(jnp.asarray(a), impl=jax.random.key_impl(t)))
            continue
        shape, dtype = np.shape(t), np.asarray(t).dtype if not hasattr(t, "dtype") else t.dtype
        if a.shape != tuple(shape) or a.dtype != dtype:
            raise ValueError(f"{where}: {prefix} leaf {i} is {a.dtype}{list(a.shape)}, this fit has "
                             f"{dtype}{list(shape)}: the checkpoint is not of this fit (or was written "
                             "with another TOPICJAX_BUCKETS setting, whose shapes it keeps)")
        if isinstance(t, jax.Array):
            if getattr(t, "weak_type", False) and a.ndim == 0:
                out.append(jnp.asarray(a.item()))  # keep the weak type, so nothing recompiles
            elif t.committed:  # a sharded fit's state: where the template lies
                out.append(jax.device_put(a, t.sharding))
            else:
                # uncommitted like the fresh fit's state: a committed input is another program (its
                # sharding is part of it), which the resumed fit compiled again
                out.append(jax.device_put(a))
        elif isinstance(t, np.ndarray):
            out.append(a)
        else:
            out.append(type(t)(a.item()) if a.ndim == 0 else a)
    return jax.tree.unflatten(tdef, out)


# ----------------------------------------------------------------------------- the folder and its runs
class RunCheckpoint:
    """The checkpoint of one run of :func:`topicjax.core.driver.run`: file ``<folder>/<name>.npz``,
    written every ``every`` iterations; ``get_host() -> dict`` / ``set_host(dict)`` save and
    restore the family's host state (JSON values and numpy arrays)."""

    def __init__(self, path: Path, every: int, get_host: Callable | None = None, set_host: Callable | None = None):
        self.path = Path(path)
        self.every = int(every)
        self.get_host = get_host
        self.set_host = set_host

    def save(self, state, prev, has_prev: bool, done: int, history: list, finished: bool) -> None:
        arrays: dict = {}
        s_def, s_keys = _leaves_to_arrays(state, "state", arrays)
        p_def, p_keys = _leaves_to_arrays(prev, "prev", arrays)
        host = self.get_host() if self.get_host is not None else {}
        self._write(arrays, done, has_prev, finished, [s_def, s_keys], [p_def, p_keys], history, host)

    def save_host(self, state: dict, done: int, history: list, finished: bool) -> None:
        """Save a run of :func:`topicjax.core.driver.run_host`, whose whole state is host values
        (``state``: JSON values and numpy arrays, of any shapes)."""
        self._write({}, done, False, finished, None, None, history, state)

    def _write(self, arrays: dict, done, has_prev, finished, state_def, prev_def, history, host) -> None:
        meta = {"done": int(done), "has_prev": bool(has_prev), "finished": bool(finished),
                "state": state_def, "prev": prev_def,
                "history": _encode(list(history), arrays, "history"), "host": _encode(host, arrays, "host")}
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(self.path, lambda fh: np.savez(fh, **arrays))

    def _read(self, where: str):
        try:
            with np.load(self.path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
            history = _decode(meta["history"], arrays)
            host = _decode(meta["host"], arrays)
            done, has_prev, finished = int(meta["done"]), bool(meta["has_prev"]), bool(meta["finished"])
            state_def, prev_def = meta["state"], meta["prev"]
        except Exception as e:  # a corrupt file: zipfile, JSON, missing keys ...
            raise ValueError(f"{where} is corrupt ({type(e).__name__}: {e}); delete it to start over") from None
        return arrays, history, host, done, has_prev, finished, state_def, prev_def

    def restore(self, state, prev):
        """``(state, prev, has_prev, done, history, finished)`` from the file, shaped like the
        given templates; ``None`` when there is no checkpoint yet."""
        if not self.path.is_file():
            return None
        where = f"checkpoint {self.path}"
        arrays, history, host, done, has_prev, finished, state_def, prev_def = self._read(where)
        if state_def is None or prev_def is None:
            raise ValueError(f"{where} holds a host-level run, not a compiled one: the checkpoint is not of this fit")
        s_def, s_keys = state_def
        p_def, p_keys = prev_def
        state = _restore_like(state, "state", arrays, s_def, s_keys, where)
        prev = _restore_like(prev, "prev", arrays, p_def, p_keys, where)
        if self.set_host is not None:
            self.set_host(host)
        return state, prev, has_prev, done, history, finished

    def restore_host(self):
        """``(state, done, history, finished)`` of a run saved by :meth:`save_host`; ``None``
        when there is no checkpoint yet."""
        if not self.path.is_file():
            return None
        where = f"checkpoint {self.path}"
        _, history, host, done, _, finished, state_def, _ = self._read(where)
        if state_def is not None:
            raise ValueError(f"{where} holds a compiled run, not a host-level one: the checkpoint is not of this fit")
        return host, done, history, finished


class Checkpoint:
    """A checkpoint folder (see the module docstring): ``identity`` (JSON) says which fit it
    belongs to; :meth:`start` fixes the seed; :meth:`run` gives the checkpoint of one driver run.
    """

    def __init__(self, folder, every: int = 10, *, identity: dict):
        if not isinstance(folder, (str, os.PathLike)):
            raise ValueError(f"checkpoint must be a folder path (str or os.PathLike), got {folder!r}")
        self.folder = Path(folder)
        self.every = check_int(every, "checkpoint_every", 1)
        self.identity = json.loads(json.dumps(identity))
        self.seed = None
        self.resumed = False
        info = self.folder / INFO
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"checkpoint {self.folder} exists and is not a folder")
        if info.is_file():
            try:
                saved = json.loads(info.read_text(encoding="utf-8"))
                old = saved["identity"]
            except Exception as e:  # noqa: BLE001 - any corruption is reported the same way
                raise ValueError(f"checkpoint {info} is corrupt ({type(e).__name__}: {e}); delete the folder to "
                                 "start over") from None
            diff = _first_difference(old, self.identity)
            if diff is not None:
                raise ValueError(f"checkpoint {self.folder} was written by another fit ({diff} differs: "
                                 f"{_at(old, diff)!r} there, {_at(self.identity, diff)!r} now); use another folder or "
                                 "delete it to start over")
            self.seed = saved.get("seed")
            self.resumed = True

    def start(self, seed):
        """The seed of the fit: the saved one when resuming, else ``seed`` (recorded)."""
        if self.resumed:
            return self.seed if self.seed is not None else seed
        self.seed = int(seed) if isinstance(seed, (int, np.integer)) else None
        self.folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"identity": self.identity, "seed": self.seed}, indent=1).encode("utf-8")
        _write_atomic(self.folder / INFO, lambda fh: fh.write(text))
        self.resumed = True
        return seed

    def run(self, name: str = "fit", *, get_host: Callable | None = None,
            set_host: Callable | None = None) -> RunCheckpoint:
        return RunCheckpoint(self.folder / f"{name}.npz", self.every, get_host, set_host)


class _Absent:
    def __repr__(self):
        return "absent"


def _at(tree, dotted: str):
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return _Absent()
        tree = tree[part]
    return tree


def open_checkpoint(folder, every, identity: dict) -> Checkpoint | None:
    """A :class:`Checkpoint` (``None`` for ``folder=None``); refuses multi-process fits (every
    process would write the same folder)."""
    if folder is None:
        check_int(every, "checkpoint_every", 1)
        return None
    if jax.process_count() > 1:
        raise ValueError("checkpoint is not supported in a multi-process fit; checkpoint a single-process fit")
    return Checkpoint(folder, every, identity=identity)
