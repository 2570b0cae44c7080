"""The device layout of a corpus for PTM: the non-zeros twice, as rows of one document and as
rows of one word (:class:`Rows`), so that both halves of the E-step and the per-document trial
flips are gathers, dense reductions and ``segment_sum``s over rows -- no scatter-add of ``(nnz,
M)`` rows, which XLA executes serially on CPU -- and every pass has one shape (one compilation)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from topicjax.data.corpus import Corpus

__all__ = ["Rows", "PTMData", "rows_layout", "prepare", "take_rows", "row_map", "row_sums", "per_item", "scatter_flat",
           "word_sums"]


#: entries placed per step of :func:`rows_layout` (bounds its temporaries)
_FILL_BLOCK = 1 << 22


class Rows(NamedTuple):
    """The non-zeros grouped by an "item" (a document, or a word) and cut into rows of ``W``.

    ``item`` ``(C, R)``: the item owning each row (padding rows: the number of items), rows of an
    item are consecutive and items are sorted; ``other`` / ``count`` / ``pos`` ``(C, R, W)``: the
    word (for document rows) or document (for word rows) of each entry, its count (0 = padding)
    and its index in the flat count array (padding: its last slot).  The ``C`` chunks of ``R`` rows
    are processed one at a time by ``lax.scan``; one shape for the whole corpus means one
    compilation, and per-item sums are ``segment_sum``s over rows.
    """

    item: jax.Array
    other: jax.Array
    count: jax.Array
    pos: jax.Array


class PTMData(NamedTuple):
    """A corpus on the device for PTM: document rows, word rows, flat counts, lengths, beta0."""

    docs: Rows
    words: Rows
    counts: jax.Array  # (F,) float32: the non-zeros in corpus order, then zeros; F = nnz + 1 rounded up
    doc_length: jax.Array  # (D,) int32, L_d
    beta0: jax.Array  # (N,) float32, eq. 11


def rows_layout(lengths: np.ndarray, offsets: np.ndarray, other: np.ndarray, counts: np.ndarray, pos: np.ndarray,
                width: int, block_tokens: int, pad_other: int, pad_pos: int, order: np.ndarray | None = None) -> Rows:
    """The rows of items whose entries are ``other[j]``, ``counts[j]``, ``pos[j]`` for ``j`` in
    ``[offsets[i], offsets[i+1])`` (with ``order``: for ``j`` = ``order[offsets[i]:offsets[i+1]]``).

    An item's entries fill consecutive slots from its first row on, so entry ``j`` (counted from
    ``offsets[0]``) of item ``i`` goes to slot ``shift[i] + j``; the slots are filled a block of
    entries at a time (temporaries of one block, whatever the corpus's size)."""
    lengths = np.asarray(lengths, np.int64)
    offsets = np.asarray(offsets, np.int64)
    n_items = lengths.size
    n_rows_item = -(-lengths // width)
    n_rows = int(n_rows_item.sum())
    R = max(1, block_tokens // width)
    C = max(1, -(-n_rows // R))
    out_item = np.full(C * R, n_items, np.int32)
    out_item[:n_rows] = np.repeat(np.arange(n_items, dtype=np.int32), n_rows_item)
    shift = (np.cumsum(n_rows_item) - n_rows_item) * width - (offsets[:-1] - offsets[0])
    mats = [np.full(C * R * width, pad, dt) for pad, dt in ((pad_other, np.int32), (0, np.float32), (pad_pos, np.int32))]
    i = 0
    while i < n_items:
        stop = min(n_items, max(i + 1, int(np.searchsorted(offsets, offsets[i] + _FILL_BLOCK, side="right")) - 1))
        a, b = int(offsets[i]), int(offsets[stop])
        if b > a:
            slot = np.repeat(shift[i:stop], lengths[i:stop]) + np.arange(a - offsets[0], b - offsets[0])
            src = slice(a, b) if order is None else order[a:b]
            for m, f in zip(mats, (other, counts, pos)):
                m[slot] = f[src]
        i = stop
    shape = (C, R, width)
    out = [jnp.asarray(out_item.reshape(C, R))]
    while mats:  # each host array is released once it is on the device
        out.append(jnp.asarray(mats.pop(0).reshape(shape)))
    return Rows(*out)


def prepare(corpus: Corpus, *, block_tokens: int = 4096, doc_width: int = 16, word_width: int = 16) -> PTMData:
    """Build the device layout of a corpus for PTM (see :class:`PTMData` and :class:`Rows`).

    ``block_tokens`` padded entries per chunk bound the working set of one step of a pass to
    about ``block_tokens * M * 4`` bytes; ``doc_width`` / ``word_width`` are the row widths (the
    padding is below 20% on 20 Newsgroups with 16).
    """
    if corpus.nnz == 0:
        raise ValueError("the corpus has no tokens")
    D, N, nnz = corpus.n_docs, corpus.n_words, corpus.nnz
    # the flat arrays are padded to a multiple of block_tokens (at least one padding slot, the
    # last) so that corpora of similar size share compiled functions
    n_flat = int(-(-(nnz + 1) // block_tokens) * block_tokens)
    pad_pos = n_flat - 1
    pos = np.arange(nnz, dtype=np.int32)
    counts = corpus.counts.astype(np.float32)
    d_off = corpus.doc_offsets
    docs = rows_layout(np.diff(d_off), d_off, corpus.word_ids, counts, pos, doc_width, block_tokens, 0, pad_pos)
    # the entries by word: a stable sort of the word ids (int32 positions), read through it
    order = np.argsort(corpus.word_ids, kind="stable")
    order = order.astype(np.int32) if nnz <= np.iinfo(np.int32).max else order
    w_len = corpus.doc_frequency
    w_off = np.concatenate([[0], np.cumsum(w_len)]).astype(np.int64)
    words = rows_layout(w_len, w_off, corpus.doc_ids, counts, pos, word_width, block_tokens, D, pad_pos, order=order)
    del order, pos
    wc = corpus.word_counts.astype(np.float64)
    beta0 = wc / wc.sum()
    flat = np.zeros(n_flat, np.float32)
    flat[:nnz] = counts
    return PTMData(docs, words, jnp.asarray(flat), jnp.asarray(corpus.doc_lengths, jnp.int32),
                   jnp.asarray(beta0, jnp.float32))


def take_rows(a, idx):
    """``a[idx]`` with out-of-range indices (padding) giving zero rows."""
    fill = False if a.dtype == jnp.bool_ else 0
    return jnp.take(a, idx, axis=0, mode="fill", fill_value=fill)


def row_map(rows: Rows, fn, per_item):
    """Apply ``fn(other (R, W), count (R, W), pos (R, W), inputs)`` to every chunk of rows,
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

    blk0 = (rows.item[0], rows.other[0], rows.count[0], rows.pos[0])
    shapes = jax.eval_shape(lambda b: fn(b[1], b[2], b[3], jax.tree.map(lambda a: take_rows(a, b[0]), per_item)), blk0)
    acc0 = tuple(None if i in keep else jnp.zeros((n_items,) + s.shape[1:], s.dtype) for i, s in enumerate(shapes))
    acc, kept = lax.scan(body, acc0, (rows.item, rows.other, rows.count, rows.pos))
    return tuple(kept[i].reshape((-1,) + kept[i].shape[2:]) if i in keep else acc[i] for i in range(len(acc)))


def per_item(rows: Rows, values, n_items: int):
    """Sum row values over the rows of every item (``(n_items, ...)``)."""
    return jax.ops.segment_sum(values, rows.item.reshape(-1), num_segments=n_items, indices_are_sorted=True)


def scatter_flat(rows: Rows, values, n_flat: int):
    """Scatter per-entry row values ``(C*R, W)`` back to corpus order ``(F,)`` (padding slots 0)."""
    out = jnp.zeros((n_flat,), values.dtype).at[rows.pos.reshape(-1)].set(values.reshape(-1), mode="drop")
    return out.at[n_flat - 1].set(0)


def word_sums(data: PTMData, r_flat, a, N: int):
    """``g[n, j] = sum_d r_dn a[d, j]`` over the non-zeros, by word rows (``(N, P)``)."""

    def fn(d, n, pos, _):
        return jnp.einsum("rk,rkp->rp", r_flat[pos], take_rows(a, d))

    return row_sums(data.words, lambda *x: (fn(*x),), jnp.zeros((N + 1, 0), a.dtype), N)[0]
