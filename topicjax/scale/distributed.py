"""One PLSA/ARTM model on many devices and hosts: documents sharded, counts reduced with ``psum``.

The E-step of ARTM (eq. 6-8) is a sum over documents, so it splits over devices exactly:

    n_wt = Σ_devices Σ_{(d, w) on the device} n_dw φ_wt θ_td / p(w|d),
    n_td = the same sum, which only the device holding document d contributes to.

:func:`shard` cuts the corpus into one contiguous range of documents per device (balanced by
non-zeros) and lays each range out as :func:`topicjax.core.em.prepare` does (same chunk shape on every
device).  :func:`make_step` runs :func:`topicjax.core.em.expected_counts` on every device's documents
inside :func:`jax.shard_map` and adds the partial gradients with ``jax.lax.psum`` over the mesh
axis; the M-step (ARTM eq. 14-16, with the regularizer's terms from ``jax.value_and_grad`` as in
:func:`topicjax.core.em.regularized_counts`) then runs on the summed counts, identically on every
device, so every device holds the same Φ and Θ.  The result is the single-device model up to
float round-off (the order of the additions differs); bits may differ between CPU and GPU.

Memory and traffic: each device stores its documents' counts, Φ (W x T) and Θ (T x D); one pass
all-reduces W x T + T x D numbers.  Θ is replicated so that any regularizer ``R(Φ, Θ)`` works
unchanged; for corpora whose Θ does not fit on one device use :mod:`topicjax.scale.online`, which
keeps no Θ at all.

Several devices in one process
------------------------------
On CPU, ask XLA for several host devices *before JAX starts*::

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python fit.py

and in ``fit.py``::

    from topicjax.scale import distributed
    phi, theta, history = distributed.fit(corpus, n_topics=100, max_iter=50)   # all devices

On a machine with several GPUs the same code uses them all (``jax.devices()``).  On one
multi-core CPU, N host devices are also the way to run one model on N threads (XLA runs each
device's share on its own thread; the single-device E-step is mostly single-threaded), at the
price of the all-reduce of the counts; ``experiments/bench_em.py`` reports this as
``ours-Ndev`` when started with the flag above.

Several processes or hosts (``jax.distributed``)
-------------------------------------------------
Start one process per host (or per GPU) with the same script; each calls
:func:`initialize` before anything else touches JAX::

    # host 0 (the coordinator, reachable by the others on port 12345):
    python fit.py --coordinator 10.0.0.1:12345 --num-processes 2 --process-id 0
    # host 1:
    python fit.py --coordinator 10.0.0.1:12345 --num-processes 2 --process-id 1

    # fit.py
    from topicjax.scale import distributed
    distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    corpus = Corpus.load(path)   # every process reads the corpus (or the same file on a share)
    phi, theta, history = distributed.fit(corpus, n_topics=100, max_iter=50)

The mesh then spans the devices of all processes; :func:`shard` builds, in each process, only
the shards of its own devices (``jax.make_array_from_callback``), and every process ends with the
same model.  Under SLURM or Open MPI, ``jax.distributed.initialize()`` without arguments finds the
coordinator itself: call ``distributed.initialize()`` with no arguments from ``srun python
fit.py``.  On CPU the cross-process reductions use the gloo collectives, which
:func:`initialize` switches on.  ``tests/test_distributed.py`` runs two processes on localhost.

>>> import topicjax as tj
>>> from topicjax import distributed
>>> corpus, _ = tj.datasets.make_bars(n_docs=40, seed=0)
>>> phi, theta, hist = distributed.fit(corpus, n_topics=10, max_iter=3, progress=False)
>>> phi.shape, theta.shape
((25, 10), (10, 40))
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from topicjax.core import em
from topicjax.data.corpus import Corpus

__all__ = ["ShardedCounts", "initialize", "make_mesh", "shard", "init", "make_step", "fit", "to_host"]

AXIS = "docs"


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, **kwargs) -> None:
    """Join a multi-process JAX run (``jax.distributed.initialize``) with CPU collectives on.

    Call it first thing in every process, before any JAX computation.  With no arguments JAX
    detects the cluster (SLURM, Open MPI, Kubernetes/TPU environments).  On CPU the
    cross-process ``psum`` needs a collectives library: gloo is selected here.
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id, **kwargs)


def make_mesh(devices=None) -> Mesh:
    """A one-axis mesh (axis ``"docs"``) over ``devices`` (default: all devices of all processes)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("no devices to build a mesh on")
    return Mesh(np.array(devices), (AXIS,))


class ShardedCounts(NamedTuple):
    """A corpus laid out over a mesh: ``data`` is a :class:`topicjax.core.em.DocWordCounts` whose
    chunk axis is split over the mesh axis (``n_devices * chunks_per_device`` chunks, document
    ids global), plus the sizes needed to build the model."""

    data: em.DocWordCounts
    mesh: Mesh
    n_docs: int
    n_words: int
    n_tokens: int
    doc_ranges: tuple  # (first, stop) document of each device


def _balanced_ranges(corpus: Corpus, n: int) -> list[tuple[int, int]]:
    """``n`` contiguous document ranges with about equal numbers of non-zeros (some may be empty)."""
    cum = np.asarray(corpus.doc_offsets, np.int64)  # non-zeros before each document
    targets = np.linspace(0, cum[-1], n + 1)
    cuts = np.searchsorted(cum, targets[1:-1], side="left")
    bounds = [0, *[int(c) for c in cuts], corpus.n_docs]
    bounds = np.maximum.accumulate(np.asarray(bounds))
    return [(int(bounds[i]), int(bounds[i + 1])) for i in range(n)]


def _device_layout(corpus: Corpus, first: int, stop: int, chunk: int, dtype):
    """em.prepare's layout of documents [first, stop) with global document ids (numpy)."""
    if stop <= first:
        return None
    sub = corpus.subset(np.arange(first, stop))
    d = em.prepare(sub, chunk=chunk, dtype=dtype)
    return [np.asarray(d.doc) + first, np.asarray(d.word), np.asarray(d.count), np.asarray(d.piece_doc) + first]


def shard(corpus: Corpus, mesh: Mesh | None = None, *, chunk: int | None = None, dtype=jnp.float32) -> ShardedCounts:
    """Split ``corpus`` into one contiguous document range per device of ``mesh`` (default: all
    devices) and place each range's non-zeros on its device.

    Every device gets the same number of chunks of ``chunk`` slots (default: as
    :func:`topicjax.core.em.prepare` would choose for the largest range, at most
    :data:`topicjax.core.em.DEFAULT_CHUNK`); missing chunks are padding with count 0.  In a
    multi-process run each process computes the layout of its own devices' ranges only.
    """
    if corpus.nnz == 0:
        raise ValueError("the corpus has no tokens")
    mesh = make_mesh() if mesh is None else mesh
    if mesh.axis_names != (AXIS,):
        raise ValueError(f"the mesh must have the single axis {AXIS!r}, got {mesh.axis_names}")
    devices = list(mesh.devices.flat)
    n = len(devices)
    ranges = _balanced_ranges(corpus, n)
    if chunk is None:
        widest = max(int(corpus.doc_offsets[b] - corpus.doc_offsets[a]) for a, b in ranges)
        chunk = int(min(em.DEFAULT_CHUNK, -(-int(widest * 1.25 + em.PIECE) // 1024) * 1024))
    chunk = int(-(-chunk // em.PIECE) * em.PIECE)
    width = em.PIECE
    k = chunk // width

    # Chunks per device: the number of pieces of the largest range, in chunks of k pieces.
    lengths = np.diff(np.asarray(corpus.doc_offsets, np.int64))
    pieces = [int((-(-lengths[a:b] // width)).sum()) for a, b in ranges]
    per_dev = max(1, max(-(-p // k) for p in pieces))

    local = {}  # the layouts this process needs: those of its addressable devices
    mine = {d.id for d in jax.local_devices()}
    for i, dev in enumerate(devices):
        if dev.id not in mine:
            continue
        a, b = ranges[i]
        lay = _device_layout(corpus, a, b, chunk, dtype)
        pad_doc = max(a, min(b, corpus.n_docs) - 1) if b > a else max(0, a - 1)
        blank = [np.full((per_dev, chunk), pad_doc, np.int32), np.zeros((per_dev, chunk), np.int32),
                 np.zeros((per_dev, chunk), np.dtype(dtype)), np.full((per_dev, k), pad_doc, np.int32)]
        if lay is not None:
            c = lay[0].shape[0]
            for j in range(4):
                blank[j][:c] = lay[j]
                if j in (0, 3):
                    blank[j][c:] = lay[j][-1, -1]  # padding chunks keep the ids sorted
        local[i] = blank

    sharding = NamedSharding(mesh, P(AXIS))
    shapes = [(n * per_dev, chunk), (n * per_dev, chunk), (n * per_dev, chunk), (n * per_dev, k)]
    arrays = []
    for j, shape in enumerate(shapes):
        def cb(index, j=j):
            start = index[0].start or 0
            i = start // per_dev
            return local[i][j]

        arrays.append(jax.make_array_from_callback(shape, sharding, cb))
    data = em.DocWordCounts(doc=arrays[0], word=arrays[1], count=arrays[2], piece_doc=arrays[3])
    return ShardedCounts(data, mesh, corpus.n_docs, corpus.n_words, corpus.n_tokens, tuple(ranges))


def _replicated(mesh: Mesh, x):
    """Put a host array (the same in every process) on every device of the mesh."""
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, NamedSharding(mesh, P()), lambda idx: x[idx])


def to_host(x) -> np.ndarray:
    """A replicated array (the same on every device, e.g. Φ, Θ, the log-likelihood) as numpy,
    also in a multi-process run where the array spans devices of other processes."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    return np.asarray(x.addressable_shards[0].data)


def init(key, sharded: ShardedCounts, n_topics: int, *, dtype=jnp.float32) -> em.EMState:
    """:func:`topicjax.core.em.init` (the same Φ for the same key), replicated over the mesh."""
    state = em.init(key, sharded.n_words, sharded.n_docs, n_topics, dtype=dtype)
    rep = lambda a: _replicated(sharded.mesh, np.asarray(a))
    return em.EMState(*(rep(a) for a in state))


def _shard_map(f, mesh, in_specs, out_specs):
    """``jax.shard_map`` without the replication check (``jax.experimental`` on older JAX).

    The check is off because the E-step's loop carries start as zeros that do not know they will
    vary over the mesh axis; the psum makes the outputs replicated, as ``out_specs=P()`` states.
    """
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    from jax.experimental.shard_map import shard_map  # JAX < 0.7

    return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)


def make_step(mesh: Mesh, regularizer: Callable | None = None, *, update_phi: bool = True):
    """``step(state, data, coefs) -> state``: one regularized EM iteration with the documents
    of ``data`` (from :func:`shard`) spread over ``mesh``.

    The same computation as :func:`topicjax.core.em.make_step`: the E-step gradients of L are summed
    over devices (``psum``), the regularizer's value and gradients are taken on the replicated
    Φ and Θ, and ``φ ∝ (φ ∂(L+R)/∂φ)_+``, ``θ ∝ (θ ∂(L+R)/∂θ)_+`` (ARTM eq. 14-16).
    """

    def local_counts(phi, theta, data):
        ll, g_phi, g_theta = em.expected_counts(phi, theta, data)
        return jax.lax.psum(ll, AXIS), jax.lax.psum(g_phi, AXIS), jax.lax.psum(g_theta, AXIS)

    counts = _shard_map(local_counts, mesh, (P(), P(), P(AXIS)), (P(), P(), P()))

    def step(state: em.EMState, data: em.DocWordCounts, coefs: Any = None) -> em.EMState:
        # Clamp as em.regularized_counts does, so that log-terms of R have finite gradients.
        phi_c = jnp.maximum(state.phi, em.EPS)
        theta_c = jnp.maximum(state.theta, em.EPS)
        ll, g_phi, g_theta = counts(phi_c, theta_c, data)
        if regularizer is None:
            r = jnp.zeros((), ll.dtype)
        else:
            r, (r_phi, r_theta) = jax.value_and_grad(lambda p, t: jnp.asarray(regularizer(p, t, coefs), ll.dtype),
                                                     argnums=(0, 1))(phi_c, theta_c)
            g_phi, g_theta = g_phi + r_phi, g_theta + r_theta
        phi = em.normalize_columns(phi_c * g_phi) if update_phi else state.phi
        theta = em.normalize_columns(theta_c * g_theta)
        return em.EMState(phi, theta, ll, r, state.iteration + 1)

    return jax.jit(step)


def fit(corpus: Corpus, n_topics: int, *, max_iter: int = 100, tol: float = 0.0, seed: int = 0,
        mesh: Mesh | None = None, regularizer: Callable | None = None, coefs: Any = None,
        chunk: int | None = None, progress: bool = True):
    """PLSA (or ARTM with ``regularizer(phi, theta, coefs) -> scalar``) on all devices of
    ``mesh`` (default: every device of every process), through the shared loop
    :func:`topicjax.core.em.run`.

    Returns ``(phi (W, T), theta (T, D), history)`` as numpy arrays, the same in every process.
    With one device, and up to round-off with several, it equals the single-device fit from
    ``em.init(jax.random.key(seed), ...)``.
    """
    corpus.check_topics(n_topics)
    sharded = shard(corpus, mesh, chunk=chunk)
    state = init(jax.random.key(seed), sharded, n_topics)
    step = make_step(sharded.mesh, regularizer)
    state, history = em.run(lambda s: step(s, sharded.data, coefs), state, max_iter=max_iter, tol=tol,
                            objective=lambda s: to_host(s.loglik), progress=progress and jax.process_index() == 0,
                            desc="PLSA (sharded)")
    for h in history:
        h["perplexity"] = float(np.exp(-h["objective"] / sharded.n_tokens))
    return to_host(state.phi), to_host(state.theta), history
