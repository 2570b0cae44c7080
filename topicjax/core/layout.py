"""Device layouts of a corpus for the EM family: the padded *sliced* layout of the E-step.

:func:`prepare` turns a :class:`~topicjax.data.Corpus` into :class:`DocWordCounts`, the non-zero
counts padded into ``(n_chunks, chunk)`` blocks, every document's distinct words cut into pieces
of :data:`PIECE` slots (see the class docstring).  Nothing of size D x W is ever built.

>>> import topicjax as tj
>>> from topicjax.core import layout
>>> corpus, _ = tj.datasets.make_bars(n_docs=50, seed=0)
>>> data = layout.prepare(corpus)
>>> float(data.count.sum()) == corpus.n_tokens
True
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

__all__ = ["DocWordCounts", "prepare", "sliced_layout", "reweight_docs", "chunk_docs", "slot_docs", "DEFAULT_CHUNK",
           "ACCEL_CHUNK", "PIECE"]

#: Default number of slots (non-zeros plus padding) per stored chunk.  The E-step re-blocks the
#: chunks to a size that suits the number of topics and the backend (see :func:`expected_counts`).
DEFAULT_CHUNK = 16384
#: Default chunk on accelerators (GPU/TPU), where a block is a whole chunk and larger blocks
#: amortise kernel launches: on an H100, KOS at T = 100 takes 0.53 ms per step with 65536-slot
#: chunks against 0.75 ms with 16384 (experiments/results/bench_grid_gpu.md).
ACCEL_CHUNK = 65536
#: Width of a document piece: :func:`prepare` cuts every document's list of distinct words into
#: pieces of this many slots (the last piece of a document is padded with zero counts).
PIECE = 16
#: entries placed per step of :func:`sliced_layout` (bounds its temporaries)
_FILL_BLOCK = 1 << 22

class DocWordCounts(NamedTuple):
    """Non-zero counts of a corpus on the device, padded into ``(n_chunks, chunk)`` blocks.

    Entries are sorted by document (the corpus order).  :func:`prepare` stores them in a *sliced*
    layout: every document's distinct words are cut into pieces of ``chunk // K`` slots (``K`` =
    ``piece_doc.shape[1]`` pieces per chunk, :data:`PIECE` = 16 slots by default); each chunk is
    ``K`` whole pieces, and ``piece_doc[c, k]`` is the document of piece ``k`` of chunk ``c``.
    Padding slots (the tail of a document's last piece, and whole pieces that fill the last
    chunk) have count 0, word id 0 and the document id of their piece, so they contribute
    nothing and the document ids stay sorted.

    ``piece_doc`` may be ``None`` (a hand-built ``DocWordCounts(doc, word, count)`` in any order,
    with padding of count 0): :func:`expected_counts` then uses its unsliced kernel.  Code that
    only rescales counts, like ``data._replace(count=data.count * mask[data.doc])``, keeps the
    layout valid.  ``doc`` may be ``None`` in the sliced layout (``prepare(..., with_doc=False)``,
    what the fits of the EM family and of TTMM use): its kernels read a piece's document from
    ``piece_doc``, scans over the chunks do so a chunk at a time (:func:`chunk_docs`,
    :func:`slot_docs`), and ``doc``, as large as the counts, would only take memory.
    """

    doc: Int[Array, "C B"] | None
    word: Int[Array, "C B"]
    count: Float[Array, "C B"]
    piece_doc: Int[Array, "C K"] | None = None


def prepare(corpus, chunk: int | None = None, dtype=jnp.float32, with_doc: bool = True) -> DocWordCounts:
    """Move a corpus's non-zeros to the device in the sliced layout of :class:`DocWordCounts`
    (without its ``doc`` array when ``with_doc=False``: the E-step of PLSA/ARTM never reads it).

    ``chunk`` is the number of slots per stored chunk (default :data:`DEFAULT_CHUNK` on CPU,
    :data:`ACCEL_CHUNK` on accelerators, or fewer for a small corpus), rounded up to a whole
    number of pieces.  It bounds the memory of one E-step block; the E-step itself may work on a
    divisor of it (see :func:`expected_counts`).  A ``chunk`` below :data:`PIECE` also narrows the pieces to ``chunk`` slots.
    """
    nnz = corpus.nnz
    if nnz == 0:
        raise ValueError("the corpus has no tokens")
    if chunk is not None and int(chunk) < 1:
        raise ValueError(f"chunk must be a positive number of non-zeros, got {chunk}")
    width = PIECE if chunk is None else min(PIECE, int(chunk))
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    n_pieces = int((-(-np.diff(offsets) // width)).sum())
    if chunk is None:
        default = DEFAULT_CHUNK if jax.default_backend() == "cpu" else ACCEL_CHUNK
        k = min(default // width, n_pieces)
        if k > 64:  # a multiple of 64 pieces leaves power-of-two divisors for re-blocking
            k = -(-k // 64) * 64
    else:
        k = -(-int(chunk) // width)
    arrays = list(sliced_layout(offsets, corpus.word_ids, corpus.counts, width, k, dtype=dtype, with_doc=with_doc))
    out = []
    while arrays:  # each host array is released once it is on the device
        a = arrays.pop(0)
        out.append(None if a is None else jnp.asarray(a))
    return DocWordCounts(*out)


def sliced_layout(offsets, word_ids, counts, width: int, k: int, n_chunks: int | None = None, dtype=np.float32,
                  with_doc: bool = True):
    """The sliced layout of :class:`DocWordCounts` as numpy arrays ``(doc, word, count, piece_doc)``
    (``doc`` ``None`` when ``with_doc=False``).

    ``offsets`` (D + 1) delimit the documents' entries in ``word_ids`` / ``counts`` (CSR);
    pieces of ``width`` slots, ``k`` pieces per chunk, and at least ``n_chunks`` chunks (more
    padding chunks, e.g. to give every batch of a stream one shape).  Padding slots and pieces
    carry count 0, word 0 and the id of the last document, so ids stay sorted.
    """
    offsets = np.asarray(offsets, np.int64)
    D = offsets.size - 1
    lens = np.diff(offsets)
    pieces_per_doc = -(-lens // width)
    n_pieces = int(pieces_per_doc.sum())
    need = max(1, -(-n_pieces // k))
    if n_chunks is None:
        n_chunks = need
    elif n_chunks < need:
        raise ValueError(f"{n_pieces} pieces do not fit in {n_chunks} chunks of {k}")
    total_pieces = n_chunks * k
    piece_doc = np.empty(total_pieces, np.int32)
    piece_doc[:n_pieces] = np.repeat(np.arange(D, dtype=np.int32), pieces_per_doc)
    piece_doc[n_pieces:] = piece_doc[n_pieces - 1] if n_pieces else 0
    # A document's entries fill consecutive slots from its first piece on: entry i (counted from
    # offsets[0]) of document d goes to slot shift[d] + i.  Filled BLOCK entries at a time, so the
    # only temporaries are a block's slots.
    shift = (np.cumsum(pieces_per_doc) - pieces_per_doc) * width - (offsets[:-1] - offsets[0])
    n_slots = total_pieces * width
    word = np.zeros(n_slots, np.int32)
    count = np.zeros(n_slots, np.dtype(dtype))
    word_ids, counts = np.asarray(word_ids), np.asarray(counts)
    d = 0
    while d < D:
        stop = max(d + 1, int(np.searchsorted(offsets, offsets[d] + _FILL_BLOCK, side="right")) - 1)
        stop = min(stop, D)
        a, b = int(offsets[d]), int(offsets[stop])
        if b > a:
            slot = np.repeat(shift[d:stop], lens[d:stop]) + np.arange(a - offsets[0], b - offsets[0])
            word[slot] = word_ids[a:b]
            count[slot] = counts[a:b]
        d = stop
    doc = np.repeat(piece_doc, width).reshape(n_chunks, k * width) if with_doc else None
    return (doc, word.reshape(n_chunks, k * width),
            count.reshape(n_chunks, k * width), piece_doc.reshape(n_chunks, k))



def chunk_docs(data):
    """What a ``lax.scan`` over the chunks of ``data`` reads for its slots' documents: ``doc``, or
    ``piece_doc`` of a layout without it (``prepare(..., with_doc=False)``), whose per-chunk rows
    :func:`slot_docs` turns into one id per slot inside the scan (a chunk's worth at a time, so
    that no array as large as the counts is ever held for the documents)."""
    return data.piece_doc if data.doc is None else data.doc


def slot_docs(docs, n_slots: int):
    """The document of each of a chunk's ``n_slots`` slots from its row of :func:`chunk_docs`:
    each piece's document repeated over the piece's slots (a row of ``doc`` comes back as it is)."""
    return jnp.repeat(docs, n_slots // docs.shape[-1], axis=-1, total_repeat_length=n_slots)


def reweight_docs(data, weights):
    """``data`` with the counts of document ``d`` multiplied by ``weights[d]`` (a removed
    document, weight 0, then contributes nothing); works for every layout with ``doc``,
    ``count`` and ``piece_doc`` fields and ``_replace`` (:class:`DocWordCounts`, the sharded
    layout)."""
    if data.piece_doc is None:
        return data._replace(count=data.count * weights[data.doc].astype(data.count.dtype))
    # A piece's slots all belong to its document: the same products from `piece_doc`, so that a
    # step that removes documents does not hold `doc` (as large as the counts) for this alone
    # (the sliced kernels never read it).
    C, B = data.count.shape
    K = data.piece_doc.shape[1]
    w = weights[data.piece_doc].astype(data.count.dtype)
    return data._replace(count=(data.count.reshape(C, K, B // K) * w[:, :, None]).reshape(C, B))
