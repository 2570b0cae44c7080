"""Device layouts of a corpus for the EM family: the padded *sliced* layout of the E-step.

:func:`prepare` turns a :class:`~topicjax.data.Corpus` into :class:`DocWordCounts`, the non-zero
counts padded into ``(n_chunks, chunk)`` blocks, every document's distinct words cut into pieces
of :data:`PIECE` slots (see the class docstring).  Nothing of size D x W is ever built.

>>> import topicjax as tj
>>> from topicjax.core import layout
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=50, seed=0)
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

from topicjax.core import environment, kernels

__all__ = ["DocWordCounts", "WordMirror", "prepare", "sliced_layout", "reweight_docs", "chunk_docs", "slot_docs",
           "DEFAULT_CHUNK", "ACCEL_CHUNK", "PIECE", "MIRROR_TILE_DOCS"]

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
#: Documents per tile of the word-sorted mirror (:class:`WordMirror`): the mirror's word pieces
#: read the rows of Θ of one tile at a time, 65536 rows of 100 float32 topics = 26 MB, under an
#: H100's 50 MB L2 cache (NYTimes' 300k documents: 5 tiles).  Every tile pads each of its words'
#: last piece, so smaller tiles cost padding slots.
MIRROR_TILE_DOCS = 65536
#: Bits of a bucket's mantissa (:func:`bucket_size`): sizes up to ``2 ** (BUCKET_BITS + 1)`` are
#: exact, larger ones are rounded up to ``m * 2**e`` with ``2**BUCKET_BITS <= m < 2**(BUCKET_BITS + 1)``,
#: 8 sizes per octave: consecutive buckets differ by a ratio of at most 9/8, so a padded shape holds
#: at most 12.5 % more pieces or documents than the exact one (6 % on average).
BUCKET_BITS = 3
#: Pieces of a bucketed layout are a multiple of this (:func:`bucket_size`; 64 pieces of 16 slots:
#: 1,024 zero slots at most, which the compiled CPU kernel skips).
PIECE_STEP = 64
#: Θ's columns of a bucketed fit are a multiple of this (:func:`bucket_size`).
DOC_STEP = 16
#: Floors of the buckets (:func:`bucket_size`'s ``floor``): every smaller size is padded to the
#: floor, so that all tiny corpora (toy corpora, scikit-learn's estimator checks, the folds of a
#: small cross-validation) run one set of compiled programs instead of one per bucket.  Below the
#: floors a pass is launch overhead: padding a 20-document corpus to them costs microseconds per
#: iteration (experiments/results/bucket_floors.md), while KOS (3,430 documents, 6,906 words, 23,691
#: pieces) is far above them.  Pieces of a layout (:func:`prepare`): 256 pieces of 16 slots; the
#: E-step still reads every slot, about 3 µs per 1,024 of them on a CPU, so 1,024 pieces (one CPU
#: chunk, :data:`DEFAULT_CHUNK`) would cost a 20-document PLSA fit ~45 µs per iteration.
PIECE_FLOOR = 256
#: Floor of Θ's columns and of the per-document tables of PTM (:func:`bucket_size`).
DOC_FLOOR = 128
#: Floor of Φ's rows, PTM's and TTMM's vocabulary (:func:`bucket_size`).
WORD_FLOOR = 128
#: Shapes are rounded up to buckets (:func:`prepare`, ``topicjax.artm.setup.theta_width`` and
#: ``phi_rows``) only for corpora of at most this many non-zeros: there the compiled programs'
#: build (seconds) is a large part of a fit and folds of similar size share them; a larger corpus
#: keeps its exact shapes, since its passes dwarf the build and the padding would add up to 12.5 %
#: of their work
BUCKET_MAX_NONZEROS = 1 << 22
#: The environment variable that turns the buckets of a fit's shapes off (:func:`buckets_on`).
BUCKETS_ENV = "TOPICJAX_BUCKETS"
#: entries placed per step of :func:`sliced_layout` (bounds its temporaries)
_FILL_BLOCK = 1 << 22
#: word of a padding piece of the mirror: out of bounds of every Φ, so its (zero) row is dropped
_NO_WORD = np.iinfo(np.int32).max


class WordMirror(NamedTuple):
    """The slots of a sliced layout sorted by word: what the XLA E-step reduces ∂L/∂Φ over
    (:func:`topicjax.core.estep.sliced_counts`), one word piece at a time, as it reduces ∂L/∂Θ
    over the document pieces.

    The non-zeros are grouped into tiles of :data:`MIRROR_TILE_DOCS` consecutive documents; in a
    tile, the non-zeros of each word (in document order) are cut into *word pieces* of as many
    slots as the layout's document pieces, the pieces sorted by word.  Each tile starts a new
    chunk, and a chunk holds as many pieces as the layout's chunks, so the words of any block of
    pieces that the E-step takes from one chunk are sorted (never decreasing).

    ``slot[c, j]`` is the flat index (into ``count.reshape(-1)``) of the layout's slot that word
    slot ``j`` of chunk ``c`` mirrors; the padding of a word's last piece, and every slot of a
    padding piece, holds the number of slots (one past the last): it reads count 0.
    ``piece_word[c, k]`` is the word of piece ``k`` of chunk ``c``; padding pieces (the tail of
    each tile's last chunk) hold ``2**31 - 1``, which is outside every Φ: their rows are dropped.
    Both are int32: 4 bytes per mirrored slot plus 4 per ``width`` slots.
    """

    slot: Int[Array, "Cw Bw"]
    piece_word: Int[Array, "Cw Kw"]

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

    ``mirror`` is the word-sorted mirror of the sliced layout (:class:`WordMirror`), which the
    XLA E-step reads to reduce ∂L/∂Φ per word piece; ``None`` (the default of :func:`prepare` where
    the compiled CPU kernel runs the E-step, and of layouts built from :func:`sliced_layout`) makes
    the XLA E-step scatter ∂L/∂Φ slot by slot instead.  It indexes the layout's slots, so it
    stays valid for rescaled counts (``_replace(count=...)``, :func:`reweight_docs`), not for
    other ``word`` or ``piece_doc`` arrays.
    """

    doc: Int[Array, "C B"] | None
    word: Int[Array, "C B"]
    count: Float[Array, "C B"]
    piece_doc: Int[Array, "C K"] | None = None
    mirror: WordMirror | None = None


def bucket_size(n: int, step: int = 1, floor: int = 0) -> int:
    """The smallest bucket ``>= n``: ``n`` rounded up to the next multiple of ``2 ** (bit_length(n)
    - 1 - BUCKET_BITS)`` (8 sizes per octave: 16, 18, 20, ..., 30, 32, 36, 40, ...; at most 9/8 of
    ``n``; sizes up to 16 are exact), and to a multiple of ``step`` (a floor for small sizes, where
    a few more zero slots or empty columns cost nothing: :data:`PIECE_STEP`, :data:`DOC_STEP`);
    and at least ``floor`` (every ``n <= floor`` gives ``floor`` itself: one shape for all tiny
    corpora, :data:`PIECE_FLOOR`, :data:`DOC_FLOOR`, :data:`WORD_FLOOR`).  A ``floor`` that is
    not itself such a bucket is refused, so that the buckets stay monotone in ``n``.

    Shapes rounded up to buckets let corpora of similar sizes (the folds of a cross-validation,
    the parts of ``train_test_split``) run one compiled program: pieces and chunks of zero counts
    (:func:`prepare` with ``buckets=True``) and document columns that are no document change no
    result.  Raises ``ValueError`` for a negative ``n`` or ``floor``, a ``step`` below 1, or a
    ``floor`` that is not its own bucket."""
    n, step, floor = int(n), int(step), int(floor)
    if n < 0 or step < 1 or floor < 0:
        raise ValueError(f"bucket_size: n must be >= 0, step >= 1 and floor >= 0, got n={n}, step={step}, "
                         f"floor={floor}")
    if floor and _bucket(floor, step) != floor:
        raise ValueError(f"bucket_size: floor must be a bucket of step {step} (a multiple of it), got floor={floor}")
    return floor if n <= floor else _bucket(n, step)


def _bucket(n: int, step: int) -> int:
    shift = max(0, n.bit_length() - 1 - BUCKET_BITS)
    return max(-(-n >> shift) << shift, -(-n // step) * step)


def buckets_on() -> bool:
    """Whether fits round their shapes up to buckets (:func:`bucket_size`): ``TOPICJAX_BUCKETS``
    = ``on`` (default, also ``1``) or ``off`` (``0``; any case): every program then has the exact
    shapes of its corpus.  Read at every fit (:func:`topicjax.core.environment.buckets`); another
    value is a ``ValueError`` naming the variable."""
    return environment.buckets()


def prepare(corpus, chunk: int | None = None, dtype=jnp.float32, with_doc: bool = True,
            word_mirror: bool | None = None, buckets: bool = False) -> DocWordCounts:
    """Move a corpus's non-zeros to the device in the sliced layout of :class:`DocWordCounts`
    (without its ``doc`` array when ``with_doc=False``: the E-step of PLSA/ARTM never reads it).

    ``word_mirror``: whether to add the word-sorted :class:`WordMirror` (4 bytes per non-zero and
    per padding slot of the words' last pieces, built on the host); ``None`` (default) adds it
    when the E-step traced now for ``dtype`` is the XLA one on an accelerator, or on any device
    with ``TOPICJAX_ESTEP=xla`` (:func:`topicjax.core.kernels.estep_is_xla`; never for
    ``xla_scatter``), so that the compiled CPU kernel's memory is unchanged and a CPU without it
    keeps the per-slot pass, faster there.  A layout of more
    than 2**31 - 2 slots gets no mirror (int32 indices).

    ``chunk`` is the number of slots per stored chunk (default :data:`DEFAULT_CHUNK` on CPU,
    :data:`ACCEL_CHUNK` on accelerators, or fewer for a small corpus), rounded up to a whole
    number of pieces.  It bounds the memory of one E-step block; the E-step itself may work on a
    divisor of it (see :func:`expected_counts`).  A ``chunk`` below :data:`PIECE` also narrows the pieces to ``chunk`` slots.

    ``buckets``: round the number of pieces (hence the pieces per chunk of a small corpus and the
    number of chunks) and the word mirror's chunks up to :func:`bucket_size`, with pieces of zero
    counts, so that corpora of similar size share one compiled E-step (at most 12.5 % more slots;
    the compiled CPU kernel skips zero counts), and at least :data:`PIECE_FLOOR` pieces (every
    tiny corpus one shape).  The results are the exact layout's up to float
    round-off (sums in another order).  Corpora of more than :data:`BUCKET_MAX_NONZEROS` non-zeros
    keep their exact layout.
    """
    nnz = corpus.nnz
    if nnz == 0:
        raise ValueError("the corpus has no tokens")
    if chunk is not None and int(chunk) < 1:
        raise ValueError(f"chunk must be a positive number of non-zeros, got {chunk}")
    width = PIECE if chunk is None else min(PIECE, int(chunk))
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    n_pieces = int((-(-np.diff(offsets) // width)).sum())
    buckets = buckets and nnz <= BUCKET_MAX_NONZEROS
    if buckets:
        n_pieces = bucket_size(n_pieces, PIECE_STEP, PIECE_FLOOR)
    if chunk is None:
        default = DEFAULT_CHUNK if jax.default_backend() == "cpu" else ACCEL_CHUNK
        k = min(default // width, n_pieces)
        if k > 64:  # a multiple of 64 pieces leaves power-of-two divisors for re-blocking
            k = -(-k // 64) * 64
    else:
        k = -(-int(chunk) // width)
    n_chunks = -(-n_pieces // k) if buckets else None  # the exact layout's own number otherwise
    arrays = list(sliced_layout(offsets, corpus.word_ids, corpus.counts, width, k, n_chunks, dtype=dtype,
                                with_doc=with_doc))
    if word_mirror is None:
        # not for xla_scatter, the former XLA E-step (memory included), which never reads it; on a
        # CPU only when asked for (TOPICJAX_ESTEP=xla): there a scatter-add is no atomic and the
        # per-slot pass is the faster pure-JAX one (KOS, T = 100: 55 ms against 82 ms)
        setting = kernels.get_backend()
        word_mirror = (kernels.estep_is_xla(dtype) and setting != "xla_scatter"
                       and (setting == "xla" or jax.default_backend() != "cpu"))
    n_slots = arrays[1].size
    out = []
    while arrays:  # each host array is released once it is on the device
        a = arrays.pop(0)
        out.append(None if a is None else jax.device_put(a))  # a transfer; jnp.asarray compiles a program
    mirror = None
    if word_mirror and n_slots < _NO_WORD:  # built from the corpus once the layout's host arrays are gone
        slot, word = _word_mirror(offsets, corpus.word_ids, width, k, n_slots)
        if buckets:  # whole chunks of padding pieces (slot: one past the last, word: out of every Φ)
            extra = bucket_size(slot.shape[0]) - slot.shape[0]
            slot = np.concatenate([slot, np.full((extra, slot.shape[1]), n_slots, np.int32)])
            word = np.concatenate([word, np.full((extra, word.shape[1]), _NO_WORD, np.int32)])
        mirror = WordMirror(jax.device_put(slot), jax.device_put(word))
    return DocWordCounts(*out, mirror=mirror)


def _slot_shift(offsets, width: int):
    """``shift[d]``: entry ``i`` (counted from ``offsets[0]``) of document ``d`` lies in slot
    ``shift[d] + i`` of the sliced layout with pieces of ``width`` slots."""
    pieces_per_doc = -(-np.diff(offsets) // width)
    return (np.cumsum(pieces_per_doc) - pieces_per_doc) * width - (offsets[:-1] - offsets[0])


def _word_mirror(offsets, word_ids, width: int, k: int, n_slots: int, tile_docs: int | None = None):
    """The arrays ``(slot, piece_word)`` of :class:`WordMirror` (numpy int32) for the sliced
    layout of ``sliced_layout(offsets, word_ids, ..., width, k)`` of ``n_slots`` slots.

    Tile by tile (``tile_docs`` documents, default :data:`MIRROR_TILE_DOCS`, whose entries are
    consecutive): a stable sort of the tile's entries by word (document order within a word),
    each word's run cut into pieces of ``width`` slots, the tile's pieces padded to a multiple of
    ``k`` (a whole number of chunks).
    """
    tile_docs = MIRROR_TILE_DOCS if tile_docs is None else int(tile_docs)
    offsets = np.asarray(offsets, np.int64)
    word_ids = np.asarray(word_ids)
    D = offsets.size - 1
    shift = _slot_shift(offsets, width)
    slots, words = [], []
    for a in range(0, max(D, 1), tile_docs):
        b = min(a + tile_docs, D)
        lo, hi = int(offsets[a]), int(offsets[b])
        if hi == lo:
            continue
        lens = np.diff(offsets[a:b + 1])
        # layout slot of each of the tile's entries, in corpus order
        src = (np.repeat(shift[a:b], lens) + np.arange(lo - offsets[0], hi - offsets[0])).astype(np.int32)
        w = word_ids[lo:hi].astype(np.int32)
        order = np.argsort(w, kind="stable")
        w, src = w[order], src[order]
        del order
        # runs of equal words: start, length and pieces of each
        starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
        run = np.diff(np.r_[starts, w.size])
        n_pc = -(-run // width)
        first_piece = np.cumsum(n_pc) - n_pc
        pieces = -(-int(n_pc.sum()) // k) * k
        tile_slot = np.full(pieces * width, n_slots, np.int32)
        pos = np.repeat(first_piece * width - starts, run) + np.arange(w.size)
        tile_slot[pos] = src
        tile_word = np.full(pieces, _NO_WORD, np.int32)
        tile_word[:int(n_pc.sum())] = np.repeat(w[starts], n_pc)
        slots.append(tile_slot)
        words.append(tile_word)
    if not slots:  # no entries: one chunk of padding
        slots, words = [np.full(k * width, n_slots, np.int32)], [np.full(k, _NO_WORD, np.int32)]
    slot = np.concatenate(slots)
    word = np.concatenate(words)
    return slot.reshape(-1, k * width), word.reshape(-1, k)


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
    shift = _slot_shift(offsets, width)
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
