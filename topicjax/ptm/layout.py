"""The device layout of a corpus for PTM: the non-zeros twice, as rows of one document and as
rows of one word (:class:`Rows`), so that both halves of the E-step and the per-document trial
flips are gathers, dense reductions and ``segment_sum``s over rows -- no scatter-add of ``(nnz,
M)`` rows, which XLA executes serially on CPU -- and every pass has one shape (one compilation).

The document rows' slots are the "flat" order of the non-zeros: a per-entry value computed in a
pass over document rows (the E-step's ``n_dw / p_dw``) is read by the word rows through their
``pos``, the slot of the same entry in the document rows.  Each entry is held in 12 bytes: word
id and count in the document rows, position in the word rows; an entry's document is that of its
slot's document row, ``docs.item[pos // W]`` (earlier layouts also kept the word rows' document
ids, 16 bytes, and before that a flat copy of the counts, the document rows' positions and the
word rows' counts: 28 bytes)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from topicjax.core import layout as core_layout
from topicjax.data.corpus import Corpus

__all__ = ["Rows", "PTMData", "build_layout", "ptm_data", "doc_mask", "word_mask", "real_docs", "real_words", "take_rows", "row_map", "row_sums",
           "per_item", "slot_docs", "word_sums"]


#: entries placed per step of :func:`build_layout` (bounds its temporaries)
_FILL_BLOCK = 1 << 22
#: Floors of the documents and of the words of a bucketed layout (:func:`ptm_data`,
#: :func:`topicjax.core.layout.bucket_size`'s ``floor``).  Lower than the EM family's
#: (:data:`topicjax.core.layout.DOC_FLOOR`, :data:`~topicjax.core.layout.WORD_FLOOR`): a padding
#: document costs its share of the topic-switch rounds (about 5 µs per GEM iteration), a padding word
#: about 7 µs (a 20-document corpus over 25 words padded to 128 words: +0.7 ms on 0.4 ms per
#: iteration), so these floors only merge the smallest buckets (experiments/results/bucket_floors.md).
PTM_DOC_FLOOR = 32
PTM_WORD_FLOOR = 32


class Rows(NamedTuple):
    """The non-zeros grouped by an "item" (a document, or a word) and cut into rows of ``W``.

    ``item`` ``(C, R)``: the item owning each row (padding rows: the number of items), rows of an
    item are consecutive and items are sorted.  Document rows carry ``other`` ``(C, R, W)``, the
    word of each entry, and ``count`` ``(C, R, W)`` (0 = padding), and no ``pos``; word rows
    carry only ``pos`` ``(C, R, W)``, the entry's slot in the document rows (padding: the last
    slot, which is always a padding slot in a padding row), whose row's item is the entry's
    document (:func:`slot_docs`).  The ``C`` chunks of ``R`` rows are processed one at a time by
    ``lax.scan``; one shape for the whole corpus means one compilation, and per-item sums are
    ``segment_sum``s over rows.
    """

    item: jax.Array
    other: jax.Array | None
    count: jax.Array | None
    pos: jax.Array | None


class PTMData(NamedTuple):
    """A corpus on the device for PTM: document rows, word rows, lengths, beta0, and the numbers
    of real documents and words.

    ``n_docs`` (an int32 scalar, traced in the compiled programs; ``None``: every row of
    ``doc_length`` is a document) counts the documents; the rows of ``doc_length`` (and of the
    state's ``alpha``, ``v``, ...) from ``n_docs`` on are no document but padding up to a bucket
    (:func:`ptm_data` with ``buckets=True``): no token, length 0, never a topic, no part of the
    BIC (:func:`doc_mask`).  ``n_words`` likewise counts the vocabulary's words (``None``: all of
    ``beta0``); the words after them have ``beta0 = 0`` and no token, so they are never
    topic-specific, and they are left out of the BIC's word terms (:func:`word_mask`)."""

    docs: Rows
    words: Rows
    doc_length: jax.Array  # (D,) int32, L_d
    beta0: jax.Array  # (N,) float32, eq. 11
    n_docs: jax.Array | None = None  # () int32, the real documents (the first n_docs rows)
    n_words: jax.Array | None = None  # () int32, the real words (the first n_words of beta0)

    def flat_counts(self):
        """The counts in flat order (``(n_flat,)``, 0 on padding slots)."""
        return self.docs.count.reshape(-1)


def _chunks(n_rows: int, R: int, extra: int, buckets: bool = False) -> int:
    # at least one padding row after the real ones, so that the last slot is padding
    n = max(1, -(-(n_rows + 1) // R))
    return (core_layout.bucket_size(n) if buckets else n) + extra


def _blocks(offsets: np.ndarray):
    """``(first, stop)`` ranges of items of about ``_FILL_BLOCK`` entries."""
    n_items = offsets.size - 1
    i = 0
    while i < n_items:
        stop = min(n_items, max(i + 1, int(np.searchsorted(offsets, offsets[i] + _FILL_BLOCK, side="right")) - 1))
        yield i, stop
        i = stop


def build_layout(doc_offsets, word_ids, counts, n_words: int, *, doc_width: int = 16, word_width: int = 16,
                 block_tokens: int = 4096, extra_chunks: int = 0, buckets: bool = False) -> tuple[Rows, Rows]:
    """The document rows and word rows of a CSR corpus (``doc_offsets`` ``(D + 1,)``, per-entry
    ``word_ids`` and ``counts``; entries of a document need not be sorted).

    Entry ``j`` of document ``d`` goes to document slot ``row0[d] * W + j``; the ``k``-th entry
    (in corpus order) of word ``w`` to word slot ``wrow0[w] * W' + k``.  Slots are filled a block
    of documents at a time, the word slots by a counting sort (a running count per word plus a
    stable sort within the block), so the temporaries are those of one block whatever the corpus's
    size, and the host holds at most the two arrays of one layout before they go to the device.
    ``extra_chunks`` whole chunks of padding rows are appended to both layouts (tests);
    ``buckets``: the number of chunks of each layout is rounded up to
    :func:`topicjax.core.layout.bucket_size` (chunks of padding rows), so that corpora of similar
    size have the same shapes."""
    d_off = np.asarray(doc_offsets, np.int64)
    word_ids = np.asarray(word_ids)
    D, N = d_off.size - 1, int(n_words)
    d_len = np.diff(d_off)
    R_d, R_w = max(1, block_tokens // doc_width), max(1, block_tokens // word_width)
    d_rows = -(-d_len // doc_width)
    n_d_rows = int(d_rows.sum())
    C_d = _chunks(n_d_rows, R_d, extra_chunks, buckets)
    n_flat = C_d * R_d * doc_width
    d_shift = (np.cumsum(d_rows) - d_rows) * doc_width - d_off[:-1]  # slot of entry j = d_shift[d] + j
    item = np.full(C_d * R_d, D, np.int32)
    item[:n_d_rows] = np.repeat(np.arange(D, dtype=np.int32), d_rows)
    docs_item = jax.device_put(item.reshape(C_d, R_d))  # transfers (jnp.asarray compiles a program)
    shape_d = (C_d, R_d, doc_width)
    other = np.zeros(n_flat, np.int32)
    count = np.zeros(n_flat, np.float32)
    for i, stop in _blocks(d_off):
        a, b = int(d_off[i]), int(d_off[stop])
        slot = np.repeat(d_shift[i:stop], d_len[i:stop]) + np.arange(a, b)
        other[slot] = word_ids[a:b]
        count[slot] = counts[a:b]
    docs = Rows(docs_item, jax.device_put(other.reshape(shape_d)), None, None)
    del other
    docs = docs._replace(count=jax.device_put(count.reshape(shape_d)))
    del count

    w_len = np.bincount(word_ids, minlength=N).astype(np.int64) if word_ids.size else np.zeros(N, np.int64)
    w_rows = -(-w_len // word_width)
    n_w_rows = int(w_rows.sum())
    C_w = _chunks(n_w_rows, R_w, extra_chunks, buckets)
    item = np.full(C_w * R_w, N, np.int32)
    item[:n_w_rows] = np.repeat(np.arange(N, dtype=np.int32), w_rows)
    words_item = jax.device_put(item.reshape(C_w, R_w))
    del item
    w_base = (np.cumsum(w_rows) - w_rows) * word_width  # first slot of each word
    seen = np.zeros(N, np.int64)  # entries of each word placed so far
    n_w_slots = C_w * R_w * word_width
    w_pos = np.full(n_w_slots, n_flat - 1, np.int32)
    for i, stop in _blocks(d_off):
        a, b = int(d_off[i]), int(d_off[stop])
        if b == a:
            continue
        w = word_ids[a:b]
        order = np.argsort(w, kind="stable")
        ws = w[order]
        run = np.flatnonzero(np.r_[True, ws[1:] != ws[:-1]])
        rank = np.empty(b - a, np.int64)
        rank[order] = np.arange(b - a) - np.repeat(run, np.diff(np.r_[run, b - a]))
        slot = w_base[w] + seen[w] + rank
        w_pos[slot] = np.repeat(d_shift[i:stop], d_len[i:stop]) + np.arange(a, b)
        seen += np.bincount(w, minlength=N)
    words = Rows(words_item, None, None, jax.device_put(w_pos.reshape(C_w, R_w, word_width)))
    return docs, words


def ptm_data(corpus: Corpus, *, block_tokens: int = 4096, doc_width: int = 16, word_width: int = 16,
             buckets: bool = False) -> PTMData:
    """Build the device layout of a corpus for PTM (see :class:`PTMData` and :class:`Rows`).

    ``block_tokens`` padded entries per chunk bound the working set of one step of a pass to
    about ``block_tokens * M * 4`` bytes; ``doc_width`` / ``word_width`` are the row widths (the
    padding is below 20% on 20 Newsgroups with 16).

    ``buckets``: the documents (rows of ``doc_length``, hence of the GEM state's ``(D, P)``
    tables) and the words (``beta0``, the state's ``(P, N)`` tables) rounded up to
    :func:`topicjax.core.layout.bucket_size` (a multiple of :data:`~topicjax.core.layout.DOC_STEP`,
    at most 12.5 % more, at least :data:`PTM_DOC_FLOOR` / :data:`PTM_WORD_FLOOR`) with empty documents and words of ``beta0 = 0``, and the chunks of both
    layouts likewise, so that corpora of similar size (the folds of a cross-validation) share the
    compiled GEM programs; ``n_docs`` and ``n_words`` hold the real numbers (:func:`doc_mask`,
    :func:`word_mask`), and the estimator cuts the padding off on the host.  Raises
    ``ValueError`` for a corpus without tokens.
    """
    if corpus.nnz == 0:
        raise ValueError("the corpus has no tokens")
    D, N = corpus.n_docs, corpus.n_words
    # buckets of at most 12.5 % more documents: a padding document has no token but still costs
    # its share of the topic-switch rounds (its candidates' trials, the sorted prefix sums of
    # select_v_flips): about 5 µs per step each with 6 topics (65 documents padded to 128: +14 % per
    # step on a 2-core CPU), where TTMM's padding rows cost nothing measurable (sweeps.DOC_FLOOR)
    width = core_layout.bucket_size(D, core_layout.DOC_STEP, PTM_DOC_FLOOR) if buckets else D
    n_rows = core_layout.bucket_size(N, core_layout.DOC_STEP, PTM_WORD_FLOOR) if buckets else N
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    offsets = np.concatenate([offsets, np.full(width - D, offsets[-1])])  # empty documents after the real ones
    docs, words = build_layout(offsets, corpus.word_ids, corpus.counts, n_rows,
                               doc_width=doc_width, word_width=word_width, block_tokens=block_tokens, buckets=buckets)
    wc = corpus.word_counts.astype(np.float64)
    beta0 = np.zeros(n_rows, np.float32)
    beta0[:N] = wc / wc.sum()
    lengths = np.zeros(width, np.int32)
    lengths[:D] = corpus.doc_lengths
    return PTMData(docs, words, jax.device_put(lengths), jax.device_put(beta0), jax.device_put(np.int32(D)),
                   jax.device_put(np.int32(N)))


def doc_mask(data: PTMData):
    """``(D,)`` bool: which rows of ``data.doc_length`` are documents (the first ``n_docs``), or
    ``None`` when all are (``n_docs`` is ``None``)."""
    if data.n_docs is None:
        return None
    return jnp.arange(data.doc_length.shape[0]) < data.n_docs


def word_mask(data: PTMData):
    """``(N,)`` bool: which entries of ``data.beta0`` are words (the first ``n_words``), or
    ``None`` when all are."""
    if data.n_words is None:
        return None
    return jnp.arange(data.beta0.shape[0]) < data.n_words


def real_words(data: PTMData) -> int:
    """The number of real words of ``data`` on the host."""
    return int(data.beta0.shape[0]) if data.n_words is None else int(data.n_words)


def real_docs(data: PTMData) -> int:
    """The number of real documents of ``data`` on the host (``n_docs``, else every row)."""
    return int(data.doc_length.shape[0]) if data.n_docs is None else int(data.n_docs)


def take_rows(a, idx):
    """``a[idx]`` with out-of-range indices (padding) giving zero rows."""
    fill = False if a.dtype == jnp.bool_ else 0
    return jnp.take(a, idx, axis=0, mode="fill", fill_value=fill)


def row_map(rows: Rows, fn, per_item):
    """Apply ``fn(other (R, W), count (R, W), pos (R, W), inputs)`` to every chunk of rows (``other``,
    ``count`` or ``pos`` is None where the layout has none),
    ``inputs`` being the rows of the ``per_item`` pytree for each row's item.  Returns the outputs
    stacked over chunks and flattened to one leading axis of ``C * R`` rows."""

    def body(_, blk):
        it, o, n, p = blk
        return None, fn(o, n, p, jax.tree.map(lambda a: take_rows(a, it), per_item))

    _, out = lax.scan(body, None, (rows.item, rows.other, rows.count, rows.pos))
    return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), out)


def row_sums(rows: Rows, fn, per_item, n_items: int, keep: tuple = ()):
    """:func:`row_map` whose outputs are summed over each item's rows inside the scan (an
    ``(n_items, ...)`` accumulator per output), except the outputs at the positions in ``keep``,
    which are returned per row as :func:`row_map` returns them.  ``fn`` returns a tuple.

    The per-row outputs of a pass over rows of ``W`` entries are ``nnz / W x M`` values; summed
    per item afterwards they were the largest arrays of a PTM fit (at NYTimes size, 1.9 GB each for
    M = 100, several alive at once); accumulated chunk by chunk they never exist."""

    def body(acc, blk):
        it, o, n, p = blk
        out = fn(o, n, p, jax.tree.map(lambda a: take_rows(a, it), per_item))
        acc = tuple(None if i in keep else a.at[it].add(x, mode="drop") for i, (a, x) in enumerate(zip(acc, out)))
        return acc, tuple(x if i in keep else None for i, x in enumerate(out))

    blk0 = jax.tree.map(lambda a: a[0], (rows.item, rows.other, rows.count, rows.pos))
    shapes = jax.eval_shape(lambda b: fn(b[1], b[2], b[3], jax.tree.map(lambda a: take_rows(a, b[0]), per_item)), blk0)
    acc0 = tuple(None if i in keep else jnp.zeros((n_items,) + s.shape[1:], s.dtype) for i, s in enumerate(shapes))
    acc, kept = lax.scan(body, acc0, (rows.item, rows.other, rows.count, rows.pos))
    return tuple(kept[i].reshape((-1,) + kept[i].shape[2:]) if i in keep else acc[i] for i in range(len(acc)))


def per_item(rows: Rows, values, n_items: int):
    """Sum row values over the rows of every item (``(n_items, ...)``)."""
    return jax.ops.segment_sum(values, rows.item.reshape(-1), num_segments=n_items, indices_are_sorted=True)


def slot_docs(docs: Rows, pos):
    """The document of each slot ``pos`` of the document rows (the number of documents for a
    padding slot): its row's item."""
    return docs.item.reshape(-1)[pos // docs.other.shape[-1]]


def word_sums(data: PTMData, r_flat, a, N: int):
    """``g[n, j] = sum_d r_dn a[d, j]`` over the non-zeros, by word rows (``(N, P)``)."""

    def fn(_, n, pos, __):
        return jnp.einsum("rk,rkp->rp", r_flat[pos], take_rows(a, slot_docs(data.docs, pos)))

    return row_sums(data.words, lambda *x: (fn(*x),), jnp.zeros((N + 1, 0), a.dtype), N)[0]
