"""The parallel token sweep as a compiled, multi-threaded CPU kernel (``csrc/lida_kernel.h``) called
from jitted JAX code through XLA FFI.

It computes what :func:`topicjax.lida.parallel.assign_parallel` computes with ``mh_steps = 0``, on
the same state (and, with its dense draw, the same uniforms: a hash of the token id and the sweep's
seed; LDA's default sparse draw, :data:`DRAWS`, samples the same conditional in another topic
order, O(topics of the token's word) a token): blocks of
documents in order (:mod:`topicjax.lida.layout`); the documents of a block split between the
threads, each resampled token by token over its active topics with its own counts exact; n_vk and
n_k read as at the start of the block and merged after it.  Where the XLA sweep is a ``lax.scan``
over lanes (one loop step per token position, a few dozen small XLA operations each), the kernel
runs each document in a plain loop: the cost per token is a pass over the document's active list
(O(topics of the document)), with ``(α + n_kd)/(den_k + n_k)`` kept per topic and refreshed only
where a count moves.  The results follow the same distribution as the XLA sweep; bits can differ
(float32 sums in another order), and they do not depend on the number of threads.

Selecting it (decided when the sweep is traced, for ``sampler="parallel"`` only; the exact and
stale modes always run in XLA):

* ``TOPICJAX_LIDA=auto`` (default): with ``mh_steps=0`` (the kernels' only draw), the kernel on CPU
  when it is built and the Pallas sweep of :mod:`topicjax.lida.pallas_sweep` on a GPU (once a
  first sweep of a tiny chain has run there: :func:`pallas_error`; else the XLA sweep, with a
  warning); the XLA sweep otherwise;
* ``TOPICJAX_LIDA=xla``: always the XLA sweep; ``TOPICJAX_LIDA=ffi``: the kernel (an error where
  it cannot run); ``TOPICJAX_LIDA=pallas``: the Pallas sweep (an error with ``mh_steps > 0`` or on
  a platform other than GPU and CPU; on CPU it runs in Pallas interpret mode, slowly: for tests);
* in Python, :func:`set_backend` (the choice is a static argument of the compiled sweep, so
  switching back and forth reuses both programs).

Where the kernel runs a chain's sweeps, it also counts the count tables' histograms of the
hyperparameter step after every sweep (:func:`count_histogram`; the same integers as XLA's
scatter, faster).

The kernel is part of the compiled module of :mod:`topicjax.core.kernels` (built by ``pip install``)
and shares its thread pool: :func:`set_threads` here and ``topicjax.core.kernels.set_threads`` set
the same number (default: the cores this process may run on, or ``TOPICJAX_THREADS``).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import environment
from topicjax.core import kernels as core_kernels
from topicjax.data.corpus import Corpus

from . import pallas_sweep
from .parallel import denominator
from .state import Config, State, Tokens, init_state, make_tokens

__all__ = ["BACKENDS", "DRAWS", "available", "load_error", "get_backend", "set_backend", "get_draw", "set_draw",
           "use_kernel", "word_lists", "sweep_backend", "get_threads", "set_threads", "sweep_kernel",
           "count_histogram"]

BACKENDS = environment.LIDA_BACKENDS
#: the kernel's draws of a token's conditional: ``"dense"`` sums it over the active topics in the XLA
#: sweep's order (the same uniform picks the same topic there); ``"sparse"`` (LDA only) splits it into
#: β Σ_k q_k and the word's topics' part (SparseLDA), O(topics of the word) a token; ``"auto"``: for LDA
#: (no Θ̄, no Φ̄) the sparse draw, or the dense one for a sweep whose word lists are long (a token's word
#: holding more than K/3 topics on average: a chain's first sweeps, a corpus of few, frequent words),
#: dense otherwise.
DRAWS = ("auto", "dense", "sparse")

_STATE = {"backend": None, "draw": "auto"}


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
    """Choose ``"auto"``, ``"xla"``, ``"ffi"`` or ``"pallas"``; returns the previous choice."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {name!r}")
    old = get_backend()
    _STATE["backend"] = name
    return old


def get_draw() -> str:
    """The compiled kernel's draw (:data:`DRAWS`) for the sweeps of :mod:`topicjax.lida.sampler`."""
    return _STATE["draw"]


def set_draw(name: str) -> str:
    """Choose the compiled kernel's draw, ``"auto"`` (the default: for LDA sparse, or dense for a
    sweep whose word lists are long), ``"dense"`` or ``"sparse"``; returns the previous choice.  A static argument of the compiled sweep, like the
    backend: switching reuses each program."""
    if name not in DRAWS:
        raise ValueError(f"draw must be one of {list(DRAWS)}, got {name!r}")
    old, _STATE["draw"] = _STATE["draw"], name
    return old


def sweep_backend(cfg: Config) -> str:
    """What runs the token sweep of ``cfg``: ``"ffi"`` (the compiled CPU kernel), ``"pallas"`` (the
    Pallas kernels) or ``"xla"`` (see the module docstring).

    Raises:
        RuntimeError: ``ffi`` chosen but the compiled kernels are not built.
        ValueError: ``ffi`` or ``pallas`` chosen for a sweep they cannot run (``mh_steps > 0``;
            ``ffi`` off CPU; ``pallas`` on a platform other than GPU and CPU).
    """
    choice = get_backend()
    if choice == "xla" or cfg.mode != "parallel":
        return "xla"
    platform = jax.default_backend()
    dense = cfg.mh_steps == 0
    if choice == "pallas":
        if not dense:
            raise ValueError("TOPICJAX_LIDA=pallas: the Pallas sweep runs the dense draw (mh_steps=0) only, "
                             f"got mh_steps={cfg.mh_steps}")
        if platform not in ("gpu", "cpu"):
            raise ValueError(f"TOPICJAX_LIDA=pallas: the Pallas sweep runs on GPU (or on CPU in interpret mode), "
                             f"not on {platform!r}")
        return "pallas"
    fits = platform == "cpu" and dense
    if choice == "ffi":
        if not available():
            raise RuntimeError(f"TOPICJAX_LIDA=ffi but {load_error()}")
        if not fits:
            raise ValueError("the LIDA kernel runs the dense draw (mh_steps=0) on CPU only")
        return "ffi" if core_kernels.register() else "xla"
    if platform == "gpu" and dense:
        return "pallas" if pallas_error() is None else "xla"
    return "ffi" if fits and core_kernels.register() else "xla"


_PALLAS: dict = {}


def pallas_error() -> str | None:
    """Whether the Pallas sweep runs on this process's default device: ``None`` when it does, else
    the error of a first sweep of a tiny LDA chain (run once, on first use, when ``auto`` would pick
    it on a GPU).  A failure warns once (``RuntimeWarning``) and ``auto`` runs the XLA sweep instead,
    so a GPU whose Triton toolchain cannot build the kernels still fits, by the slower path."""
    if "error" not in _PALLAS:
        try:
            corpus = Corpus.from_dense(np.eye(6, 8, dtype=np.int64) * 2 + 1)
            cfg = Config("lda", 4, corpus.n_docs, corpus.n_words, corpus.n_words, corpus.n_tokens, sample=())
            tokens = make_tokens(corpus, block_tokens=16)
            hyper = dict(alpha=0.5, beta=0.1, eta=1.0, delta=1.0, gamma=1.0, xi=1.0)
            st = init_state(jax.random.key(0), tokens, cfg, hyper, 4)
            z, n_dk, _, _ = pallas_sweep.assign_pallas(jax.random.key(1), st, tokens, cfg, st.theta_bar, st.phi_bar,
                                                       interpret=jax.devices()[0].platform == "cpu")
            if int(jnp.sum(n_dk)) != corpus.n_tokens or z.shape != st.z.shape:
                raise RuntimeError(f"the kernels' counts add up to {int(jnp.sum(n_dk))}, not {corpus.n_tokens}")
            _PALLAS["error"] = None
        except Exception as e:  # any failure to build or run the kernels: fall back, say why once
            _PALLAS["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
            warnings.warn(f"the Pallas LIDA sweep does not run on this device ({_PALLAS['error']}); the XLA sweep "
                          "runs instead (set TOPICJAX_LIDA=xla to choose it and silence this)", RuntimeWarning,
                          stacklevel=2)
    return _PALLAS["error"]


def word_lists(cfg: Config) -> bool:
    """Whether the sweeps of ``cfg`` keep the sparse draw's word lists (the compiled CPU kernel with
    the sparse draw, chosen or by ``auto`` for LDA): memory the fit's check counts."""
    return sweep_backend(cfg) == "ffi" and _sparse_draw(cfg, get_draw())


def _sparse_draw(cfg: Config, draw: str) -> bool:
    """Whether ``draw`` (:data:`DRAWS`) is the sparse one for ``cfg``: chosen, or ``auto`` for LDA."""
    return draw == "sparse" or (draw == "auto" and not (cfg.focused or cfg.sparse))


def use_kernel(cfg: Config) -> bool:
    """Whether the parallel sweep of ``cfg`` runs in a kernel, the compiled CPU one or the Pallas
    one (:func:`sweep_backend`): neither reads the XLA sweep's lane layout."""
    return sweep_backend(cfg) != "xla"


def get_threads() -> int:
    """Threads of the compiled kernels (the LIDA sweep's and the E-step's: one pool)."""
    return core_kernels.get_threads()


def set_threads(n: int | None = None) -> int:
    """Threads of the compiled kernels (``None``: the default); returns the previous number.  The
    same setting as ``topicjax.core.kernels.set_threads``."""
    return core_kernels.set_threads(n)


def sweep_kernel(key, state: State, tokens: Tokens, cfg: Config, theta_bar, phi_bar, draw: str = "auto", *,
                 _portable: bool = False):
    """The kernel's sweep: (z, n_dk, n_wk, n_k), as :func:`~topicjax.lida.parallel.assign_parallel`.

    ``draw`` (:data:`DRAWS`): both draws sample each token from the same conditional (35)-(38); they
    map a uniform to a topic in other orders, so their chains agree in distribution, not in bits.
    The sparse draw keeps each word's list of topics (at most min(V K, N) int32 entries, in the
    compiled module, kept between sweeps) and sums a word's part in chunks of 16 topics, with
    AVX-512 where the CPU has it; ``_portable=True`` (tests) runs its portable arithmetic, which
    gives the same bits.

    Raises:
        ValueError: an unknown ``draw``, or ``"sparse"`` for a variant with Θ̄ or Φ̄.
    """
    if draw not in DRAWS:
        raise ValueError(f"draw must be one of {list(DRAWS)}, got {draw!r}")
    if draw == "sparse" and (cfg.focused or cfg.sparse):
        raise ValueError(f"the sparse draw is for LDA only (every topic and word active), not {cfg.variant!r}")
    sparse_draw = _sparse_draw(cfg, draw)
    seed = jax.random.bits(key, (), jnp.uint32)  # the seed of the XLA sweep: the same uniforms
    doc_start = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(tokens.n_d, dtype=jnp.int32)])
    shapes = [jax.ShapeDtypeStruct(a.shape, jnp.int32) for a in (state.z, state.n_dk, state.n_wk, state.n_k)]
    call = jax.ffi.ffi_call("topicjax_lida_sweep", shapes, input_output_aliases={2: 0, 3: 1, 4: 2, 5: 3},
                            vmap_method="sequential")
    out = call(tokens.word, doc_start, state.z, state.n_dk, state.n_wk, state.n_k, theta_bar.astype(bool),
               phi_bar.astype(bool), denominator(state, cfg, phi_bar), tokens.blocks.docs,
               jnp.asarray(state.alpha, jnp.float32), jnp.asarray(state.beta, jnp.float32), seed,
               focused=np.int32(cfg.focused), sparse=np.int32(cfg.sparse),
               draw=np.int32(0 if not sparse_draw else 2 if _portable else 1 if draw == "sparse" else 3))
    return tuple(out)


def count_histogram(values, length: int):
    """``h[c]`` = the number of entries of ``values`` (int32, any shape) equal to ``c``, for
    ``0 <= c < length`` (other values dropped), int32 ``(length,)``: ``jnp.bincount(values,
    length=length)`` by the compiled kernel, for the count tables' histograms of the hyperparameter
    step (:func:`topicjax.lida.hyper.histograms`), where XLA's scatter-add on CPU takes ~3 ns a value
    (0.97 ms of a KOS sweep's post-sweep program at K = 50 for n_vk alone).  CPU only, with the kernel
    registered (:func:`sweep_backend` ``== "ffi"``).

    >>> import numpy as np
    >>> from topicjax.core import kernels
    >>> if kernels.register():
    ...     h = count_histogram(jnp.asarray(np.array([0, 2, 2, 5, -1, 3], np.int32)), 4)
    ...     assert h.tolist() == [1, 0, 2, 1]
    """
    call = jax.ffi.ffi_call("topicjax_count_histogram", jax.ShapeDtypeStruct((length,), jnp.int32),
                            vmap_method="sequential")
    return call(jnp.asarray(values, jnp.int32).reshape(-1))
