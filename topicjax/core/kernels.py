"""The fused, multi-threaded CPU E-step: a C++ kernel called from jitted JAX code through XLA FFI.

It computes what :func:`topicjax.core.estep.expected_counts` computes with XLA (ARTM eq. 4, 7-8:
the log-likelihood and both gradients, the counts) in one pass over each document's non-zeros,
on all cores; every path that calls ``expected_counts`` uses it unchanged, and derivatives of any
order work with either kernel.

Which kernel runs is decided when a function is traced: ``TOPICJAX_ESTEP`` = ``auto`` (default:
this kernel on CPU when it is built, XLA elsewhere and for dtypes other than float32/float64),
``xla``, ``xla_scatter`` (the previous XLA E-step, for A/B checks) or ``ffi`` (an error where it
cannot run); in Python :func:`set_backend`, :func:`get_backend` or ``with backend("xla"): ...``
(changing it clears JAX's compilation caches).  Threads: ``TOPICJAX_THREADS`` (an integer in
[1, 4096]; default: the cores this process may run on) or :func:`set_threads` and
:func:`get_threads`, without recompiling.  Both variables are read when a kernel is first needed:
a bad value is a ``ValueError`` then (:mod:`topicjax.core.environment`).  Without a compiler at
install time the kernel is missing: ``auto`` falls back to XLA with a one-time warning, ``ffi``
raises.  For one thread count the results are the same bits run after run.

How it works (the arithmetic, threads and their slabs, the differentiation rules):
``docs/guides/internals.md``, "The fused CPU E-step".

Example
-------
>>> import jax, topicjax as tj
>>> from topicjax.core import kernels
>>> kernels.get_backend() in ("auto", "xla", "ffi")
True
>>> kernels.get_threads() >= 1
True
"""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import environment
from topicjax.core.numerics import EPS

__all__ = [
    "EPS",
    "BACKENDS",
    "available",
    "load_error",
    "build_info",
    "get_backend",
    "set_backend",
    "backend",
    "use_ffi",
    "estep_is_xla",
    "register",
    "get_threads",
    "set_threads",
    "default_threads",
    "release_buffers",
    "estep_counts",
    "estep_counts_models",
]

#: Accepted values of ``TOPICJAX_ESTEP`` and :func:`set_backend`.
BACKENDS = environment.ESTEP_BACKENDS

try:
    from topicjax.core import _estep_ffi as _lib

    _LOAD_ERROR: Exception | None = None
except ImportError as e:  # not built (no compiler at install time) or built for another Python
    _lib = None
    _built = sorted(p.name for p in Path(__file__).parent.glob("_estep_ffi*"))
    _LOAD_ERROR = ImportError(f"the kernel was not built ({e}); was there a C++17 compiler at install time?") if not _built \
        else ImportError(f"{', '.join(_built)} did not load: {e}")

_REGISTERED = False
_WARNED: set = set()
_THREADS_SET = False  # TOPICJAX_THREADS (or set_threads) applied to the pool


def available() -> bool:
    """Whether the compiled kernel was built and loads."""
    return _lib is not None


def load_error() -> Exception | None:
    """Why the compiled kernel is unavailable (the ImportError), or None."""
    return _LOAD_ERROR


def build_info() -> dict | None:
    """Compiler flags and source hash of the loaded kernel (None when it is unavailable)."""
    return None if _lib is None else dict(_lib.build_info())


def _source_hash(folder: Path) -> str:
    # The same hash as setup.py compiles in: names and contents of csrc/*, sorted.
    h = hashlib.sha256()
    for p in sorted(folder.glob("*")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _warn_once(key: str, msg: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _check_stale() -> None:
    """In a source checkout, warn when csrc/ changed after the kernel was built."""
    src = Path(__file__).resolve().parents[2] / "csrc"
    if _lib is None or not src.is_dir():
        return
    built = _lib.build_info().get("source_hash", "")
    if built and built != _source_hash(src):
        _warn_once("stale", "topicjax: the compiled E-step kernel is older than csrc/; rebuild it with "
                            "`pip install -e .` (or `python setup.py build_ext --inplace`)")


# ------------------------------------------------------------------------------------ backend
def _parse_backend(value: str, source: str) -> str:
    v = str(value).strip().lower()
    if v not in BACKENDS:
        raise ValueError(f"{source} must be one of {', '.join(BACKENDS)}, got {value!r}")
    return v


_BACKEND: str | None = None  # None: TOPICJAX_ESTEP not read yet (it is read on first use)


def get_backend() -> str:
    """The E-step backend setting: ``"auto"``, ``"xla"``, ``"ffi"`` or ``"xla_scatter"`` (``TOPICJAX_ESTEP`` until
    :func:`set_backend` is called; a ``ValueError`` when that variable holds something else)."""
    global _BACKEND
    if _BACKEND is None:
        _BACKEND = environment.backend_setting("TOPICJAX_ESTEP")
    return _BACKEND


def set_backend(name: str) -> str:
    """Select the E-step backend (``"auto"``, ``"xla"``, ``"ffi"``, ``"xla_scatter"``); returns the previous one.

    ``"ffi"`` raises at once when the kernel is unavailable.  A change clears JAX's compilation
    caches so that already compiled functions pick it up when next called.
    """
    global _BACKEND
    name = _parse_backend(name, "backend")
    if name == "ffi" and _lib is None:
        raise RuntimeError(f"the compiled E-step kernel is unavailable ({_LOAD_ERROR}); reinstall topicjax "
                           "with a C++17 compiler (`pip install -e .`) or use the 'xla' backend")
    old, _BACKEND = get_backend(), name
    if old != name:
        jax.clear_caches()
    return old


@contextlib.contextmanager
def backend(name: str):
    """``with kernels.backend("xla"): ...`` runs the block with another E-step backend."""
    old = set_backend(name)
    try:
        yield
    finally:
        set_backend(old)


def _ffi_dtype(dtype, theta_dtype=None) -> bool:
    return jnp.dtype(dtype) in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)) and (
        theta_dtype is None or jnp.dtype(theta_dtype) == jnp.dtype(dtype))


def estep_is_xla(dtype) -> bool:
    """Whether an E-step traced now for arrays of ``dtype`` runs the pure-JAX kernel: what
    :func:`use_ffi` decides, without its warning, its registration of the kernels or its errors
    (with ``ffi`` selected: False).  :func:`topicjax.core.layout.prepare` asks it whether to
    build the word-sorted mirror that only the pure-JAX E-step reads."""
    choice = get_backend()
    if choice in ("xla", "xla_scatter"):
        return True
    if choice == "ffi":
        return False
    return not (jax.default_backend() == "cpu" and _ffi_dtype(dtype) and _lib is not None)


def use_ffi(dtype, theta_dtype=None) -> bool:
    """Whether an E-step traced now for arrays of ``dtype`` runs the C++ kernel."""
    choice = get_backend()
    if choice in ("xla", "xla_scatter"):
        return False
    ok_dtype = _ffi_dtype(dtype, theta_dtype)
    on_cpu = jax.default_backend() == "cpu"
    if choice == "ffi":
        if _lib is None:
            raise RuntimeError(f"TOPICJAX_ESTEP=ffi but the compiled E-step kernel is unavailable ({_LOAD_ERROR})")
        if not on_cpu:
            raise RuntimeError(f"the FFI E-step runs on CPU only; the default backend is {jax.default_backend()!r} "
                               "(use TOPICJAX_ESTEP=auto or xla)")
        if not ok_dtype:
            raise TypeError(f"the FFI E-step takes float32 or float64 Φ and Θ of one dtype, got {dtype} and {theta_dtype}")
        return _register()
    if not on_cpu or not ok_dtype:
        return False
    if _lib is None:
        _warn_once("missing", f"topicjax: the compiled CPU E-step kernel is unavailable ({_LOAD_ERROR}); using the "
                              "pure-JAX E-step (several times slower on CPU). Reinstall with a C++17 compiler "
                              "(`pip install -e .`), or set TOPICJAX_ESTEP=xla to silence this warning.")
        return False
    return _register()


def register() -> bool:
    """Hand every kernel of the compiled module (E-step, PTM, LIDA sweep) to JAX, once; False when
    the module is unavailable.  :func:`use_ffi` does this for the E-step and PTM kernels; a family
    with a backend setting of its own (:mod:`topicjax.lida.kernel`) calls it directly."""
    return _lib is not None and _register()


def _register() -> bool:
    global _REGISTERED
    if not _REGISTERED:
        _check_stale()
        if not _THREADS_SET:  # TOPICJAX_THREADS, read before the first kernel call
            set_threads()
        for name, capsule in _lib.handlers().items():
            jax.ffi.register_ffi_target(name, capsule, platform="cpu")
        _REGISTERED = True
    return True


# ------------------------------------------------------------------------------------ threads
def default_threads() -> int:
    """``TOPICJAX_THREADS`` if set, else the number of cores this process may run on."""
    n = environment.threads()
    return environment.usable_cores() if n is None else n


def get_threads() -> int:
    """Threads of the C++ E-step (1 when the kernel is unavailable; ``TOPICJAX_THREADS`` is
    applied first if it was not yet)."""
    if _lib is None:
        return 1
    if not _THREADS_SET:
        set_threads()
    return int(_lib.get_threads())


def set_threads(n: int | None = None) -> int:
    """Set the threads of the C++ E-step (``None``: :func:`default_threads`); returns the previous
    number.  Takes effect from the next call, compiled functions included (no recompilation).
    More threads than the cores this process may run on warn once (``RuntimeWarning``)."""
    global _THREADS_SET
    old = int(_lib.get_threads()) if _lib is not None else 1
    if n is None:
        n = default_threads()
    elif isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"the number of threads must be a positive integer, got {n!r}")
    elif n > environment.MAX_THREADS:
        raise ValueError(f"the number of threads must be a positive integer <= {environment.MAX_THREADS}, got {n!r}")
    else:
        environment.warn_threads(int(n), "the number of threads")
    if _lib is not None:
        _lib.set_threads(int(n))
    _THREADS_SET = True
    return old


def release_buffers() -> None:
    """Free the per-thread ∂L/∂Φ slabs the kernel keeps between calls (they are re-made on need)."""
    if _lib is not None:
        _lib.release_buffers()



# ------------------------------------------------------------------------------------ calls
def _attrs(need_phi: bool, need_theta: bool) -> dict:
    return {"need_phi": np.int32(need_phi), "need_theta": np.int32(need_theta)}


def _ffi_one(phi, theta, data, need_phi, need_theta):
    W, T = phi.shape
    D = theta.shape[1]
    dt = phi.dtype
    shapes = [jax.ShapeDtypeStruct((), dt)]
    if need_phi:
        shapes.append(jax.ShapeDtypeStruct((W, T), dt))
    if need_theta:
        shapes.append(jax.ShapeDtypeStruct((T, D), dt))
    call = jax.ffi.ffi_call("topicjax_estep", shapes, vmap_method="sequential")
    return tuple(call(phi, theta, data.word.astype(jnp.int32), data.count.astype(dt),
                      data.piece_doc.astype(jnp.int32), **_attrs(need_phi, need_theta)))


def _ffi_models(phi, theta, count, data, need_phi, need_theta):
    """The batched call on the models' own layouts: Φ (G, W, T), Θ (G, T, D) (what ``jax.vmap``
    of the single-model E-step holds), counts (C, B, 1 or G)."""
    G, W, T = phi.shape
    D = theta.shape[2]
    dt = phi.dtype
    shapes = [jax.ShapeDtypeStruct((G,), dt)]
    if need_phi:
        shapes.append(jax.ShapeDtypeStruct((G, W, T), dt))
    if need_theta:
        shapes.append(jax.ShapeDtypeStruct((G, T, D), dt))
    call = jax.ffi.ffi_call("topicjax_estep_models", shapes, vmap_method="sequential")
    return tuple(call(phi, theta, data.word.astype(jnp.int32), count.astype(dt), data.piece_doc.astype(jnp.int32),
                      **_attrs(need_phi, need_theta)))


def _unpacked(out, need_phi, need_theta):
    it = iter(out)
    ll = next(it)
    return ll, (next(it) if need_phi else None), (next(it) if need_theta else None)


def estep_counts(phi, theta, data, need_phi: bool, need_theta: bool, *, xla):
    """One model's E-step on the sliced layout: ``(ll, ∂L/∂Φ (W, T) or None, ∂L/∂Θ (T, D) or None)``.

    ``data`` is a :class:`~topicjax.core.layout.DocWordCounts` with ``piece_doc``; ``xla(phi, theta,
    data, need_phi, need_theta)`` is the pure-JAX kernel with the same contract, used when the
    C++ kernel is not selected (:func:`use_ffi`).  Not differentiable itself (the FFI call has
    no derivative rules): :func:`topicjax.core.estep.expected_counts` wraps it.
    """
    if not use_ffi(phi.dtype, theta.dtype):
        return xla(phi, theta, data, need_phi, need_theta)
    return _unpacked(_ffi_one(phi, theta, data, need_phi, need_theta), need_phi, need_theta)


def estep_counts_models(phi, theta, count, data, need_phi: bool, need_theta: bool, *, xla):
    """The E-step of G models on one corpus layout: Φ (W, G, T), Θ rows (D, G, T), ``count``
    (C, B, G) or (C, B, 1) (shared).  Returns ``(ll (G,), ∂L/∂Φ (W, G, T) or None, ∂L/∂Θ
    (D, G, T) or None)``; ``xla`` is the pure-JAX kernel with the same contract."""
    if not use_ffi(phi.dtype, theta.dtype):
        return xla(phi, theta, count, data, need_phi, need_theta)
    # The kernel works on each model's own (W, T) and (T, D) arrays: the transposes here undo
    # those the caller made for the XLA kernel, and XLA cancels each pair (no copies).
    ll, g_phi, g_theta = _unpacked(
        _ffi_models(jnp.moveaxis(phi, 1, 0), jnp.transpose(theta, (1, 2, 0)), count, data, need_phi, need_theta),
        need_phi, need_theta)
    return (ll, None if g_phi is None else jnp.moveaxis(g_phi, 0, 1),
            None if g_theta is None else jnp.transpose(g_theta, (2, 0, 1)))
