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

* ``TOPICJAX_LIDA=auto`` (default): the kernel on CPU when it is built, for ``sampler="parallel"`` with
  ``mh_steps=0`` (its only draw); the XLA sweep otherwise;
* ``TOPICJAX_LIDA=xla``: always the XLA sweep; ``TOPICJAX_LIDA=ffi``: the kernel (an error where
  it cannot run);
* in Python, :func:`set_backend` (the choice is a static argument of the compiled sweep, so
  switching back and forth reuses both programs).

The kernel is part of the compiled module of :mod:`topicjax.core.kernels` (built by ``pip install``)
and shares its thread pool: :func:`set_threads` here and ``topicjax.core.kernels.set_threads`` set
the same number (default: the cores this process may run on, or ``TOPICJAX_THREADS``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import environment
from topicjax.core import kernels as core_kernels

from .parallel import denominator
from .state import Config, State, Tokens

__all__ = ["BACKENDS", "available", "load_error", "get_backend", "set_backend", "use_kernel", "get_threads",
           "set_threads", "sweep_kernel"]

BACKENDS = ("auto", "xla", "ffi")

_STATE = {"backend": None}


def available() -> bool:
    """Whether the compiled kernels were built and load."""
    return core_kernels.available()


def load_error() -> Exception | None:
    """Why the compiled kernels are unavailable (the ImportError), or None."""
    return core_kernels.load_error()


def get_backend() -> str:
    if _STATE["backend"] is None:  # TOPICJAX_LIDA, read on first use (topicjax.core.environment)
        _STATE["backend"] = environment.backend_setting("TOPICJAX_LIDA")
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
        if not available():
            raise RuntimeError(f"TOPICJAX_LIDA=ffi but {load_error()}")
        if not fits:
            raise ValueError("the LIDA kernel runs the dense draw (mh_steps=0) on CPU only")
        return core_kernels.register()
    return fits and core_kernels.register()


def get_threads() -> int:
    """Threads of the compiled kernels (the LIDA sweep's and the E-step's: one pool)."""
    return core_kernels.get_threads()


def set_threads(n: int | None = None) -> int:
    """Threads of the compiled kernels (``None``: the default); returns the previous number.  The
    same setting as ``topicjax.core.kernels.set_threads``."""
    return core_kernels.set_threads(n)


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
