"""The parallel token sweep as a compiled, multi-threaded CPU kernel (``csrc/lida_kernel.h``) called
from jitted JAX code through XLA FFI.

It computes what :func:`topicjax.lida.parallel.assign_parallel` computes with ``mh_steps = 0``, on
the same state and with the same uniforms (a hash of the token id and the sweep's seed): blocks of
documents in order (:mod:`topicjax.lida.layout`); the documents of a block split between the
threads, each resampled token by token over its active topics with its own counts exact; n_vk and
n_k read as at the start of the block and merged after it.  Where the XLA sweep is a ``lax.scan``
over lanes (one loop step per token position, a few dozen small XLA operations each), the kernel
runs each document in a plain loop: the cost per token is a pass over the document's active list
(O(topics of the document)), with ``(α + n_kd)/(den_k + n_k)`` kept per topic and refreshed only
where a count moves.  The results follow the same distribution as the XLA sweep; bits can differ
(float32 sums in another order), and they do not depend on the number of threads.

Selecting it (decided when the sweep is traced):

* ``TOPICJAX_LIDA=auto`` (default): the kernel on CPU when it is built, for ``mode="parallel"`` with
  ``mh_steps=0`` (its only draw); the XLA sweep otherwise;
* ``TOPICJAX_LIDA=xla``: always the XLA sweep; ``TOPICJAX_LIDA=ffi``: the kernel (an error where
  it cannot run);
* in Python, :func:`set_backend` (the choice is a static argument of the compiled sweep, so
  switching back and forth reuses both programs).

Threads: :func:`set_threads` (default: ``topicjax.core.kernels.default_threads()``, i.e. the cores
this process may run on or ``TOPICJAX_THREADS``).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from .parallel import denominator
from .state import Config, State, Tokens

__all__ = ["BACKENDS", "available", "load_error", "get_backend", "set_backend", "use_kernel", "get_threads",
           "set_threads", "sweep_kernel"]

BACKENDS = ("auto", "xla", "ffi")

try:
    from topicjax.lida import _lida_ffi as _lib

    _LOAD_ERROR: Exception | None = None
except ImportError as e:  # not built (no compiler at install time)
    _lib = None
    _LOAD_ERROR = ImportError(f"the LIDA kernel was not built ({e}); reinstall with a C++17 compiler")

_STATE = {"backend": None, "registered": False, "threads_set": False}


def available() -> bool:
    """Whether the compiled kernel was built and loads."""
    return _lib is not None


def load_error() -> Exception | None:
    return _LOAD_ERROR


def get_backend() -> str:
    if _STATE["backend"] is None:
        value = os.environ.get("TOPICJAX_LIDA", "auto").strip().lower() or "auto"
        if value not in BACKENDS:
            raise ValueError(f"TOPICJAX_LIDA must be one of {list(BACKENDS)}, got {value!r}")
        _STATE["backend"] = value
    return _STATE["backend"]


def set_backend(name: str) -> str:
    """Choose ``"auto"``, ``"xla"`` or ``"ffi"``; returns the previous choice."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {name!r}")
    old = get_backend()
    _STATE["backend"] = name
    return old


def use_kernel(cfg: Config) -> bool:
    """Whether the parallel sweep of ``cfg`` runs in the compiled kernel (see the module docstring)."""
    choice = get_backend()
    if choice == "xla" or cfg.mode != "parallel":
        return False
    fits = jax.default_backend() == "cpu" and cfg.mh_steps == 0
    if choice == "ffi":
        if _lib is None:
            raise RuntimeError(f"TOPICJAX_LIDA=ffi but {_LOAD_ERROR}")
        if not fits:
            raise ValueError("the LIDA kernel runs the dense draw (mh_steps=0) on CPU only")
        return _register()
    return fits and _lib is not None and _register()


def _register() -> bool:
    if not _STATE["registered"]:
        for name, capsule in _lib.handlers().items():
            jax.ffi.register_ffi_target(name, capsule, platform="cpu")
        _STATE["registered"] = True
    if not _STATE["threads_set"]:
        from topicjax.core.kernels import default_threads

        _lib.set_threads(default_threads())
        _STATE["threads_set"] = True
    return True


def get_threads() -> int:
    return 1 if _lib is None else int(_lib.get_threads())


def set_threads(n: int | None = None) -> int:
    """Threads of the kernel (``None``: the default); returns the previous number."""
    from topicjax.core.kernels import default_threads

    old = get_threads()
    n = default_threads() if n is None else n
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the number of threads must be a positive integer, got {n!r}")
    if _lib is not None:
        _lib.set_threads(int(n))
        _STATE["threads_set"] = True
    return old


def sweep_kernel(key, state: State, tokens: Tokens, cfg: Config, theta_bar, phi_bar):
    """The kernel's sweep: (z, n_dk, n_wk, n_k), as :func:`~topicjax.lida.parallel.assign_parallel`."""
    seed = jax.random.bits(key, (), jnp.uint32)  # the seed of the XLA sweep: the same uniforms
    doc_start = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(tokens.n_d, dtype=jnp.int32)])
    shapes = [jax.ShapeDtypeStruct(a.shape, jnp.int32) for a in (state.z, state.n_dk, state.n_wk, state.n_k)]
    call = jax.ffi.ffi_call("topicjax_lida_sweep", shapes, input_output_aliases={2: 0, 3: 1, 4: 2, 5: 3},
                            vmap_method="sequential")
    out = call(tokens.word, doc_start, state.z, state.n_dk, state.n_wk, state.n_k, theta_bar.astype(bool),
               phi_bar.astype(bool), denominator(state, cfg, phi_bar), tokens.blocks.docs,
               jnp.asarray(state.alpha, jnp.float32), jnp.asarray(state.beta, jnp.float32), seed,
               focused=np.int32(cfg.focused), sparse=np.int32(cfg.sparse))
    return tuple(out)
