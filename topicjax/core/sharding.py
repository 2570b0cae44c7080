"""Documents sharded over devices: a mesh, the sharded layout with its own E-step, replication.

The E-step of ARTM (eq. 6-8) is a sum over documents, so it splits over devices exactly:

    n_wt = Σ_devices Σ_{(d, w) on the device} n_dw φ_wt θ_td / p(w|d),
    n_td = the same sum, which only the device holding document d contributes to.

:func:`shard` cuts the corpus into one contiguous range of documents per device (balanced by
non-zeros) and lays each range out as :func:`topicjax.core.layout.prepare` does (same chunk shape
on every device): a :class:`ShardedCounts`, a layout that brings its own E-step
(:meth:`ShardedCounts.expected_counts`: the local E-step of every device inside
:func:`jax.shard_map`, partial counts added with ``jax.lax.psum``), so the one EM step of
:mod:`topicjax.core.em` runs on it unchanged.  :func:`replicate` places a pytree of arrays (the
same values in every process) on every device of a mesh; :func:`host_array` reads a replicated
array back.  How to run a fit on many devices and hosts: :mod:`topicjax.scale.distributed`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from topicjax.core import estep, layout

__all__ = ["AXIS", "ShardedCounts", "make_mesh", "shard", "replicate", "host_array"]

#: The name of the one mesh axis, over which documents are split.
AXIS = "docs"


def host_array(x) -> np.ndarray:
    """A device array as numpy, also a replicated array that spans the devices of other processes
    (a multi-process fit: every process holds the same values)."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    return np.asarray(x.addressable_shards[0].data)


def make_mesh(devices=None) -> Mesh:
    """A one-axis mesh (axis ``"docs"``) over ``devices`` (default: all devices of all processes)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("no devices to build a mesh on")
    return Mesh(np.array(devices), (AXIS,))


def _shard_map(f, mesh, in_specs, out_specs):
    # The replication check is off: the E-step's loop carries start as zeros that do not know
    # they will vary over the mesh axis; the psum makes the outputs replicated, as out_specs says.
    return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ShardedCounts:
    """The sliced layout of :class:`topicjax.core.layout.DocWordCounts` with its chunk axis split
    over the mesh axis (``n_devices * chunks_per_device`` chunks, document ids global): a layout
    with its own E-step, so :mod:`topicjax.core.em` runs on it unchanged."""

    doc: jax.Array
    word: jax.Array
    count: jax.Array
    piece_doc: jax.Array
    mesh: Mesh = dataclasses.field(metadata={"static": True})

    def _replace(self, **changes) -> "ShardedCounts":
        return dataclasses.replace(self, **changes)

    def expected_counts(self, phi, theta, *, need_phi: bool = True, need_theta: bool = True):
        """:func:`topicjax.core.estep.expected_counts` of every device's documents, summed."""

        def local(phi, theta, doc, word, count, piece_doc):
            out = estep.expected_counts(phi, theta, layout.DocWordCounts(doc, word, count, piece_doc),
                                        need_phi=need_phi, need_theta=need_theta)
            return tuple(jax.lax.psum(x, AXIS) for x in out if x is not None)

        n_out = 1 + need_phi + need_theta
        f = _shard_map(local, self.mesh, (P(), P(), P(AXIS), P(AXIS), P(AXIS), P(AXIS)), (P(),) * n_out)
        it = iter(f(phi, theta, self.doc, self.word, self.count, self.piece_doc))
        ll = next(it)
        return ll, (next(it) if need_phi else None), (next(it) if need_theta else None)


def _balanced_ranges(offsets: np.ndarray, n: int) -> list[tuple[int, int]]:
    """``n`` contiguous document ranges with about equal numbers of non-zeros (some may be empty)."""
    targets = np.linspace(0, offsets[-1], n + 1)
    cuts = np.searchsorted(offsets, targets[1:-1], side="left")
    bounds = np.maximum.accumulate(np.asarray([0, *[int(c) for c in cuts], offsets.size - 1]))
    return [(int(bounds[i]), int(bounds[i + 1])) for i in range(n)]


def shard(src, mesh: Mesh | None = None, *, chunk: int | None = None, dtype=jnp.float32) -> ShardedCounts:
    """Split a corpus (a :class:`~topicjax.data.Corpus`, or any object with ``doc_offsets``,
    ``word_ids``, ``counts`` in CSR order) into one contiguous document range per device of
    ``mesh`` (default: all devices) and place each range's non-zeros on its device.

    Every device gets the same number of chunks of ``chunk`` slots (default: as
    :func:`topicjax.core.layout.prepare` would choose for the largest range, at most
    :data:`topicjax.core.layout.DEFAULT_CHUNK`); missing chunks are padding with count 0.  In a
    multi-process run each process computes the layout of its own devices' ranges only.
    """
    offsets = np.asarray(src.doc_offsets, np.int64)
    if offsets[-1] == 0:
        raise ValueError("the corpus has no tokens")
    mesh = make_mesh() if mesh is None else mesh
    if mesh.axis_names != (AXIS,):
        raise ValueError(f"the mesh must have the single axis {AXIS!r}, got {mesh.axis_names}")
    devices = list(mesh.devices.flat)
    n = len(devices)
    ranges = _balanced_ranges(offsets, n)
    if chunk is None:
        widest = max(int(offsets[b] - offsets[a]) for a, b in ranges)
        chunk = int(min(layout.DEFAULT_CHUNK, -(-int(widest * 1.25 + layout.PIECE) // 1024) * 1024))
    chunk = int(-(-int(chunk) // layout.PIECE) * layout.PIECE)
    width = layout.PIECE
    k = chunk // width
    lengths = np.diff(offsets)
    per_dev = max(1, max(-(-int((-(-lengths[a:b] // width)).sum()) // k) for a, b in ranges))
    words, counts = np.asarray(src.word_ids), np.asarray(src.counts)
    n_docs = offsets.size - 1
    local = {}  # the layouts this process needs: those of its addressable devices
    mine = {d.id for d in jax.local_devices()}
    for i, dev in enumerate(devices):
        if dev.id not in mine:
            continue
        a, b = ranges[i]
        if b > a:
            d, w, c, pd = layout.sliced_layout(offsets[a:b + 1], words, counts, width, k, per_dev, dtype=dtype)
            local[i] = [d + a, w, c, pd + a]
        else:  # an empty range: padding only, ids kept sorted
            pad_doc = max(0, min(a, n_docs) - 1)
            local[i] = [np.full((per_dev, chunk), pad_doc, np.int32), np.zeros((per_dev, chunk), np.int32),
                        np.zeros((per_dev, chunk), np.dtype(dtype)), np.full((per_dev, k), pad_doc, np.int32)]
    sharding = NamedSharding(mesh, P(AXIS))
    shapes = [(n * per_dev, chunk)] * 3 + [(n * per_dev, k)]
    arrays = []
    for j, shape in enumerate(shapes):
        def cb(index, j=j):
            return local[(index[0].start or 0) // per_dev][j]

        arrays.append(jax.make_array_from_callback(shape, sharding, cb))
    return ShardedCounts(*arrays, mesh=mesh)


def replicate(mesh: Mesh, tree):
    """Every array leaf of ``tree`` (the same values in every process) replicated on ``mesh``."""
    sharding = NamedSharding(mesh, P())

    def rep(x):
        if not isinstance(x, (jax.Array, np.ndarray)):
            return x
        if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            return x
        v = host_array(x)
        return jax.make_array_from_callback(v.shape, sharding, lambda idx: v[idx])

    return jax.tree.map(rep, tree)
