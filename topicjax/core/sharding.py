"""Documents sharded over devices: a mesh, the sharded layout with its own E-step, replication.

The E-step of ARTM (eq. 6-8) is a sum over documents, so it splits over devices exactly:

    n_wt = Σ_devices Σ_{(d, w) on the device} n_dw φ_wt θ_td / p(w|d),
    n_td = the same sum, which only the device holding document d contributes to.

:func:`shard` cuts the corpus into one contiguous range of documents per device (balanced by
non-zeros) and lays each range out as :func:`topicjax.core.layout.prepare` does (same chunk shape
on every device): a :class:`ShardedCounts`, a layout that brings its own E-step
(:meth:`ShardedCounts.expected_counts`: the local E-step of every device inside
:func:`jax.shard_map`, partial counts added with ``jax.lax.psum``), so the one EM step of
:mod:`topicjax.artm.algorithm` runs on it unchanged.  :func:`replicate` places a pytree of arrays (the
same values in every process) on every device of a mesh; :func:`host_array` reads a replicated
array back.  How to run a fit on many devices and hosts: :mod:`topicjax.scale.distributed`.

A corpus need not be in memory: a :class:`RangeCorpus` holds only the document offsets (D + 1
numbers) and a function that reads the entries of a range of documents (from a batch store's
files, :mod:`topicjax.scale.store`).  :func:`shard` then reads, in each process, only the ranges of
that process's devices, and what a fit needs of the whole corpus beyond its sizes, the tokens of
every document ``n_d = Σ_w n_dw`` and of every word ``n_w = Σ_d n_dw``, are sums over documents
as well: every device adds up its own entries and ``psum`` gives the totals
(:meth:`ShardedCounts.totals`), so no process reads another's entries.

Θ sharded by documents
----------------------
Θ (T x D numbers) grows with the corpus as the counts do (at NYTimes size and T = 100 it is 0.11
GiB, its M-step temporaries several times that), so a fit that replicates it holds all of them
whole on every device.
``shard(..., shard_theta=True)`` (what ``ARTM.fit(X, mesh=...)`` uses) cuts the documents into
equal blocks of ``B = ceil(D / n)`` (:func:`document_blocks`) instead of blocks of equal
non-zeros, so that device ``i``'s documents are the columns ``i B .. (i + 1) B - 1`` of a Θ of
``n B`` columns laid out ``PartitionSpec(None, "docs")``: the E-step reads and writes only its own
block (no all-reduce of T x D numbers), and every Θ-sized array of the jitted step is split over
the devices by XLA's partitioner.  The last ``n B - D`` columns are padding (no entries,
``doc_alive`` 0, θ = 0); regularizers and scores see Θ's first D columns only
(:meth:`ShardedCounts.doc_columns`), so any ``R(Φ, Θ)`` gives the model of one device.  The
devices' shares of the non-zeros are then as even as the documents' lengths along the corpus's
order (a corpus sorted by length is unbalanced; shuffle it).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from topicjax.core import estep, layout
from topicjax.core.errors import CorpusError
from topicjax.core.compiled import jit

__all__ = ["AXIS", "RangeCorpus", "ShardedCounts", "make_mesh", "shard", "replicate", "host_array", "device_ranges",
           "document_blocks", "chunks_per_device"]

#: The name of the one mesh axis, over which documents are split.
AXIS = "docs"


#: Bytes of a sharded array gathered at a time by :func:`host_array`.
GATHER_BYTES = 16 << 20

# ``size`` rows of a device array from row ``start`` (traced: one program per block size)
_row_block = jit(lambda data, start, size: jax.lax.dynamic_slice_in_dim(data, start, size, axis=0),
                 static_argnames="size")


def host_array(x, *, block_bytes: int = GATHER_BYTES) -> np.ndarray:
    """A device array as numpy, also one that spans the devices of other processes: a replicated
    array from this process's copy, a sharded one (Θ of a multi-process fit) gathered from every
    process (a collective: every process must call it at the same point).

    An array split along its last axis only (Θ split by documents) is gathered about
    ``block_bytes`` at a time, a block of rows: every process contributes its own shards' columns
    of those rows, and the blocks go straight into the one host array.  Gathered whole, the array
    was first assembled on this process's device and then copied to the host, two copies of it at
    once (at PubMed size, Θ's 3.3 GB each: the peak of a two-process fit)."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    if x.is_fully_replicated:
        return np.asarray(x.addressable_shards[0].data)
    shards = x.addressable_shards
    if x.ndim < 2 or any(sl != slice(None) and (sl.start or 0, sl.stop) != (0, dim)
                         for s in shards for sl, dim in zip(s.index[:-1], x.shape[:-1])):
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))  # not split by columns only
    R, n = x.shape[0], x.shape[-1]
    spans = [(s.index[-1].start or 0, n if s.index[-1].stop is None else s.index[-1].stop, s.data) for s in shards]
    out = np.empty(x.shape, x.dtype)
    size = min(R, max(1, int(block_bytes) // max(1, x.dtype.itemsize * int(np.prod(x.shape[1:])))))
    for r0 in range(0, R, size):
        r1 = min(R, r0 + size)
        start = min(r0, R - size)  # a whole block inside the array; its first r0 - start rows are not used
        part, owned = np.zeros((r1 - r0,) + x.shape[1:], x.dtype), np.zeros(n, bool)
        for s0, s1, data in spans:
            part[..., s0:s1] = np.asarray(_row_block(data, start, size))[r0 - start:r1 - start]
            owned[s0:s1] = True
        parts, owners = multihost_utils.process_allgather((part, owned))  # stacked: one row per process
        block, taken = out[r0:r1], np.zeros(n, bool)
        for p in range(parts.shape[0]):  # a column's value from the first process that holds it
            new = owners[p] & ~taken
            block[..., new] = parts[p][..., new]
            taken |= new
        if not taken.all():
            raise RuntimeError(f"host_array: columns {np.flatnonzero(~taken)[:5].tolist()}... are on no process")
    return out


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
    over the mesh axis (``n_devices * chunks_per_device`` chunks, document ids global; ``doc`` is
    ``None``: the sliced E-step reads ``piece_doc``): a layout with its own E-step, so
    :mod:`topicjax.artm.algorithm` runs on it unchanged.

    ``n_docs``: the corpus's documents.  ``doc_block``: 0 when Θ is replicated (the E-step takes
    Θ whole on every device); ``B > 0`` when Θ is sharded by documents (module docstring): device
    ``i`` holds documents ``i B .. (i + 1) B - 1``, Θ has :attr:`theta_width` ``= n B`` columns
    laid out :attr:`theta_sharding`, of which the first ``n_docs`` are documents."""

    doc: jax.Array | None
    word: jax.Array
    count: jax.Array
    piece_doc: jax.Array
    mesh: Mesh = dataclasses.field(metadata={"static": True})
    n_docs: int = dataclasses.field(default=0, metadata={"static": True})
    doc_block: int = dataclasses.field(default=0, metadata={"static": True})

    def _replace(self, **changes) -> "ShardedCounts":
        return dataclasses.replace(self, **changes)

    @property
    def theta_width(self) -> int:
        """Θ's columns in a fit on this layout: ``n_docs``, or ``n_devices * doc_block`` (padded)."""
        return int(self.mesh.devices.size) * self.doc_block if self.doc_block else self.n_docs

    @property
    def theta_sharding(self) -> NamedSharding:
        """How Θ lies on the mesh: split by columns (``doc_block > 0``) or replicated."""
        return NamedSharding(self.mesh, P(None, AXIS) if self.doc_block else P())

    def doc_columns(self, theta):
        """The columns of Θ that are documents (all but the padding of a sharded Θ)."""
        return theta[:, : self.n_docs] if theta.shape[-1] != self.n_docs else theta

    def place_theta(self, theta):
        """Inside a jitted step: keep a Θ-shaped result laid out as :attr:`theta_sharding`."""
        return jax.lax.with_sharding_constraint(theta, self.theta_sharding) if self.doc_block else theta

    def expected_counts(self, phi, theta, *, need_phi: bool = True, need_theta: bool = True):
        """:func:`topicjax.core.estep.expected_counts` of every device's documents, summed (∂L/∂Θ
        of a sharded Θ stays on the device of its documents)."""
        block = self.doc_block

        def local(phi, theta, word, count, piece_doc):
            if block:  # ids into this device's block of Θ's columns
                piece_doc = piece_doc - jax.lax.axis_index(AXIS).astype(piece_doc.dtype) * block
            ll, g_phi, g_theta = estep.expected_counts(phi, theta, layout.DocWordCounts(None, word, count, piece_doc),
                                                       need_phi=need_phi, need_theta=need_theta)
            out = [jax.lax.psum(ll, AXIS)]
            if need_phi:
                out.append(jax.lax.psum(g_phi, AXIS))
            if need_theta:
                out.append(g_theta if block else jax.lax.psum(g_theta, AXIS))
            return tuple(out)

        theta_spec = P(None, AXIS) if block else P()
        out_specs = (P(),) + ((P(),) if need_phi else ()) + ((theta_spec,) if need_theta else ())
        f = _shard_map(local, self.mesh, (P(), theta_spec, P(AXIS), P(AXIS), P(AXIS)), out_specs)
        it = iter(f(phi, theta, self.word, self.count, self.piece_doc))
        ll = next(it)
        return ll, (next(it) if need_phi else None), (next(it) if need_theta else None)

    def totals(self, n_docs: int, n_words: int) -> tuple[np.ndarray, np.ndarray]:
        """``(n_d, n_w)``: the tokens of every document (``n_docs``) and of every word
        (``n_words``) as int64 numpy arrays, the same in every process.  Each device adds up its
        own entries (counts rounded to integers: a store's counts are), ``psum`` adds the devices'
        partial sums; a document's entries are all on one device, so ``n_d`` is that device's."""

        def local(word, count, piece_doc):
            # a chunk at a time: no temporary as large as the entries (a piece's slots are all
            # its document's; padding ids past the documents are dropped, their counts are 0)
            pieces = piece_doc.shape[1]

            def add(totals, chunk):
                n_d, n_w = totals
                w, c, pd = chunk
                c = jnp.round(c).astype(jnp.int32)
                n_w = n_w.at[w].add(c, mode="drop")
                n_d = n_d.at[pd].add(c.reshape(pieces, -1).sum(1), mode="drop")
                return (n_d, n_w), None

            zeros = (jnp.zeros(n_docs, jnp.int32), jnp.zeros(n_words, jnp.int32))
            (n_d, n_w), _ = jax.lax.scan(add, zeros, (word, count, piece_doc))
            return jax.lax.psum(n_d, AXIS), jax.lax.psum(n_w, AXIS)

        f = jit(_shard_map(local, self.mesh, (P(AXIS), P(AXIS), P(AXIS)), (P(), P())))
        n_d, n_w = f(self.word, self.count, self.piece_doc)
        return host_array(n_d).astype(np.int64), host_array(n_w).astype(np.int64)


@dataclasses.dataclass(frozen=True, eq=False)
class RangeCorpus:
    """A corpus whose entries are read on demand, a range of documents at a time.

    ``doc_offsets`` (D + 1, int64): document ``d`` owns entries ``doc_offsets[d]:doc_offsets[d+1]``
    of the (virtual) CSR arrays; ``read(a, b)`` returns ``(word_ids, counts)`` of documents
    ``a .. b - 1`` (checked by the reader: ids inside the vocabulary, counts >= 0).  :func:`shard`
    reads with it only the ranges of the calling process's devices; ``ARTM.fit(range_corpus,
    mesh=...)`` (:func:`topicjax.scale.distributed.fit` of a batch store) fits it so.

    What a fit needs of the whole corpus comes from the sizes (``doc_offsets``, ``vocab``,
    ``n_tokens``) and from :meth:`with_totals` (``doc_lengths`` n_d and ``word_counts`` n_w, the
    sums :meth:`ShardedCounts.totals` combines over the processes).  The entry arrays of a
    :class:`~topicjax.data.Corpus` (``doc_ids``, ``word_ids``, ``counts``) exist in no process:
    asking for them (a score or regularizer that reads every entry) is an error saying so.
    ``source`` names the files in messages.
    """

    doc_offsets: np.ndarray
    read: Callable[[int, int], tuple[np.ndarray, np.ndarray]]
    vocab: tuple = ()
    n_tokens: int = 0
    source: str = "corpus"
    doc_lengths: np.ndarray | None = None
    word_counts: np.ndarray | None = None
    # what a Corpus may have and a range corpus has not: labels, modalities, document names
    labels = None
    label_names = ()
    modalities = None
    modality_names = ()
    doc_names = None
    dropped_docs = np.zeros(0, np.int64)

    @property
    def n_docs(self) -> int:
        return int(self.doc_offsets.size - 1)

    @property
    def n_words(self) -> int:
        return len(self.vocab)

    @property
    def nnz(self) -> int:
        return int(self.doc_offsets[-1])

    def __getattr__(self, name):
        if name in ("doc_ids", "word_ids", "counts", "to_sparse", "to_dense", "doc_frequency", "subset"):
            raise AttributeError(f"{self.source}: {name!r} needs every entry of the corpus in memory, and a corpus "
                                 "read by document ranges holds only each process's own documents (load a small "
                                 "store whole with BatchStore.corpus())")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def check_topics(self, n_topics: int) -> None:
        """:meth:`Corpus.check_topics <topicjax.data.Corpus.check_topics>` from the sizes."""
        if int(n_topics) != n_topics or n_topics < 1:
            raise ValueError(f"the number of topics must be a positive integer, got {n_topics!r}")
        if self.n_docs == 0:
            raise ValueError(f"{self.source}: the corpus has no documents")
        if n_topics > self.n_tokens:
            raise ValueError(f"{n_topics} topics is more than the {self.n_tokens} tokens of {self.source}")

    def with_totals(self, doc_lengths, word_counts) -> "RangeCorpus":
        """This corpus with its totals ``n_d``, ``n_w`` (from :meth:`ShardedCounts.totals`), checked
        as :meth:`Corpus.from_entries <topicjax.data.Corpus.from_entries>` checks a corpus: every
        document has a token, and the tokens add up to ``n_tokens``."""
        doc_lengths, word_counts = np.asarray(doc_lengths, np.int64), np.asarray(word_counts, np.int64)
        if doc_lengths.shape != (self.n_docs,) or word_counts.shape != (self.n_words,):
            raise ValueError(f"{self.source}: totals of shapes {doc_lengths.shape}, {word_counts.shape} for "
                             f"{self.n_docs} documents and {self.n_words} words")
        empty = np.flatnonzero(doc_lengths == 0)
        if empty.size:
            raise CorpusError(f"{self.source}: document {int(empty[0])} has no tokens ({empty.size} such documents; "
                              "a fit needs a token in every document)")
        if int(doc_lengths.sum()) != self.n_tokens:
            raise CorpusError(f"{self.source}: the entries hold {int(doc_lengths.sum())} tokens, the sizes say "
                              f"{self.n_tokens} (corrupt store)")
        return dataclasses.replace(self, doc_lengths=doc_lengths, word_counts=word_counts)


def _balanced_ranges(offsets: np.ndarray, n: int) -> list[tuple[int, int]]:
    """``n`` contiguous document ranges with about equal numbers of non-zeros (some may be empty)."""
    targets = np.linspace(0, offsets[-1], n + 1)
    cuts = np.searchsorted(offsets, targets[1:-1], side="left")
    bounds = np.maximum.accumulate(np.asarray([0, *[int(c) for c in cuts], offsets.size - 1]))
    return [(int(bounds[i]), int(bounds[i + 1])) for i in range(n)]


def device_ranges(offsets, n_devices: int) -> list[tuple[int, int]]:
    """The document range ``[a, b)`` of every device of a mesh of ``n_devices`` that :func:`shard`
    uses: contiguous, in mesh order, with about equal numbers of entries
    (``offsets[b] - offsets[a]`` within one document's entries of ``nnz / n_devices``)."""
    return _balanced_ranges(np.asarray(offsets, np.int64), int(n_devices))


def document_blocks(n_docs: int, n_devices: int) -> list[tuple[int, int]]:
    """The document range ``[a, b)`` of every device when Θ is sharded (``shard(...,
    shard_theta=True)``): blocks of ``ceil(n_docs / n_devices)`` documents in mesh order, the last
    ones shorter or empty."""
    n_docs, n_devices = int(n_docs), int(n_devices)
    size = -(-n_docs // n_devices)
    return [(min(i * size, n_docs), min((i + 1) * size, n_docs)) for i in range(n_devices)]


def _chunks_needed(offsets: np.ndarray, ranges, k: int) -> int:
    lengths = np.diff(offsets)
    return max(1, max(-(-int((-(-lengths[a:b] // layout.PIECE)).sum()) // k) for a, b in ranges))


def chunks_per_device(offsets, n_devices: int, chunk: int) -> int:
    """The chunks of ``chunk`` slots (a multiple of :data:`~topicjax.core.layout.PIECE`) that the
    fullest device's range of :func:`device_ranges` takes: the ``n_chunks`` that gives a stream of
    batches one sharded shape (the most over its batches)."""
    offsets = np.asarray(offsets, np.int64)
    return _chunks_needed(offsets, _balanced_ranges(offsets, int(n_devices)), int(chunk) // layout.PIECE)


def shard(src, mesh: Mesh | None = None, *, chunk: int | None = None, dtype=jnp.float32,
          n_chunks: int | None = None, shard_theta: bool = False) -> ShardedCounts:
    """Split a corpus into one contiguous document range per device of ``mesh`` (default: all
    devices) and place each range's non-zeros on its device.

    The ranges have about equal numbers of non-zeros (:func:`device_ranges`), or, with
    ``shard_theta=True``, equal numbers of documents (:func:`document_blocks`), so that Θ can be
    split by columns over the devices (module docstring).

    ``src``: a :class:`~topicjax.data.Corpus` (or any object with ``doc_offsets``, ``word_ids``,
    ``counts`` in CSR order) or a :class:`RangeCorpus`, whose entries are read range by range:
    each process reads only the ranges of its own devices (:func:`device_ranges`).

    Every device gets the same number of chunks of ``chunk`` slots (default: as
    :func:`topicjax.core.layout.prepare` would choose for the largest range, at most
    :data:`topicjax.core.layout.DEFAULT_CHUNK`); missing chunks are padding with count 0.
    ``n_chunks``: at least this many chunks per device (one shape for every batch of a stream,
    :func:`chunks_per_device`).  In a multi-process run each process computes the layout of its
    own devices' ranges only.
    """
    offsets = np.asarray(src.doc_offsets, np.int64)
    if offsets[-1] == 0:
        raise ValueError("the corpus has no tokens")
    mesh = make_mesh() if mesh is None else mesh
    if mesh.axis_names != (AXIS,):
        raise ValueError(f"the mesh must have the single axis {AXIS!r}, got {mesh.axis_names}")
    devices = list(mesh.devices.flat)
    n = len(devices)
    n_docs = offsets.size - 1
    ranges = document_blocks(n_docs, n) if shard_theta else _balanced_ranges(offsets, n)
    block = -(-n_docs // n) if shard_theta else 0
    if chunk is None:
        widest = max(int(offsets[b] - offsets[a]) for a, b in ranges)
        chunk = int(min(layout.DEFAULT_CHUNK, -(-int(widest * 1.25 + layout.PIECE) // 1024) * 1024))
    chunk = int(-(-int(chunk) // layout.PIECE) * layout.PIECE)
    width = layout.PIECE
    k = chunk // width
    per_dev = _chunks_needed(offsets, ranges, k)
    if n_chunks is not None:
        if n_chunks < per_dev:
            raise ValueError(f"n_chunks={n_chunks}: a device's documents need {per_dev} chunks of {chunk} slots")
        per_dev = int(n_chunks)
    ranged = isinstance(src, RangeCorpus)
    if not ranged:
        words, counts = np.asarray(src.word_ids), np.asarray(src.counts)
    local = {}  # the layouts this process needs: those of its addressable devices
    mine = {d.id for d in jax.local_devices()}
    for i, dev in enumerate(devices):
        if dev.id not in mine:
            continue
        a, b = ranges[i]
        if b > a:
            if ranged:  # only this range's entries are read
                w, c = src.read(a, b)
                off = offsets[a:b + 1] - offsets[a]
            else:
                w, c, off = words, counts, offsets[a:b + 1]
            _, w, c, pd = layout.sliced_layout(off, w, c, width, k, per_dev, dtype=dtype, with_doc=False)
            pd += a  # global document ids
            local[i] = [w, c, pd]
        else:  # an empty range: padding only, ids kept sorted (inside the device's block of a sharded Θ)
            pad_doc = i * block if block else max(0, min(a, n_docs) - 1)
            local[i] = [np.zeros((per_dev, chunk), np.int32), np.zeros((per_dev, chunk), np.dtype(dtype)),
                        np.full((per_dev, k), pad_doc, np.int32)]
    sharding = NamedSharding(mesh, P(AXIS))
    shapes = [(n * per_dev, chunk)] * 2 + [(n * per_dev, k)]
    arrays = []
    for j, shape in enumerate(shapes):
        def cb(index, j=j):
            return local[(index[0].start or 0) // per_dev][j]

        arrays.append(jax.make_array_from_callback(shape, sharding, cb))
        for parts in local.values():  # each host array is released once it is on its device
            parts[j] = None
    return ShardedCounts(None, *arrays, mesh=mesh, n_docs=int(n_docs), doc_block=int(block))


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
