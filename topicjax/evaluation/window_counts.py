"""Boolean sliding-window occurrence and co-occurrence counts of a set of words, on the device.

Röder, Both and Hinneburg (2015, sec. 3.2) estimate the probability of a word as the share of
*virtual documents* that contain it: the windows of ``window`` consecutive tokens that slide over
each document one token at a time.  gensim's ``CoherenceModel`` (``p_boolean_sliding_window``),
whose counting is followed here, makes these facts precise:

* a document of ``n >= window`` tokens has ``n - window + 1`` windows; a shorter one is a single
  window (the whole document), and an empty document also counts as one (empty) window;
* tokens that are not among the counted words are gaps: they take a position in the window;
* the total ``N`` is the number of windows of every document (relevant or not);
* ``window=None`` makes each document one window: document co-occurrence (``p_boolean_document``,
  used by UMass).

``counting`` chooses what "a window contains w" means:

* ``"exact"``: w occurs at one of the window's positions (the definition as printed);
* ``"gensim"``: gensim's incremental update.  When the window slides, gensim marks the word that
  leaves at the left edge as absent and the word entering at the right edge as present, so a word
  that leaves while another of its occurrences is still inside is missed until it enters again
  at the right edge.  For ``a a b`` and ``window=2`` the second window ``[a b]`` counts ``b`` only.
  Equivalently: with ``q`` the last occurrence of w at or before the window's end and ``p`` the last
  occurrence before the window's start, w counts iff ``q`` is inside the window and
  ``q - p >= window``.  This is what gensim 4.x computes (checked against it to 1e-6 in the tests);
  its counts are never above the exact ones.

Method (no loop over tokens).  Each occurrence ``i`` of a counted word, at position ``p_i`` of
its document, is given the interval ``[a_i, b_i]`` of windows (by start position) for which it is
the occurrence that makes the word present: ``a_i = max(0, p_i - w + 1)`` and ``b_i`` the smallest
of ``p_i`` (``"exact"``; for ``"gensim"``, the first occurrence at or after ``p_i - w + 1``), the
document's last window, and ``next_i - w`` (the next occurrence takes over from there).  The
intervals of one word are disjoint and cover exactly its windows, so the occurrence count is
``Σ_i |[a_i, b_i]|`` and the co-occurrence count of two words is the sum of the overlaps of their
intervals.  Two intervals overlap only when the occurrences are less than ``w`` positions apart,
so the overlaps are accumulated over the shifts ``s = 1 .. w-1`` between occurrences sorted by
position: one vectorised pass over all occurrences per shift, a scatter-add into the
``U x U`` matrix of the ``U`` counted words (``int32``, exact).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from topicjax.core.compiled import jit

__all__ = ["WindowCounts", "window_counts", "COUNTINGS"]

COUNTINGS = ("gensim", "exact")


class WindowCounts(NamedTuple):
    """Counts for the words ``word_ids`` (ids in the reference vocabulary).

    ``n_windows``: N; ``occurrences[u]``: windows containing word ``u`` (the ``u``-th of
    ``word_ids``); ``cooccurrences[u, v]``: windows containing both (diagonal = occurrences).
    """

    word_ids: np.ndarray
    n_windows: int
    occurrences: jax.Array
    cooccurrences: jax.Array


def _occurrences(reference, lookup: np.ndarray, window: int | None):
    """Occurrences of the counted words: union index, document, position, effective window."""
    if hasattr(reference, "doc_ids") and hasattr(reference, "word_ids"):  # a bag of words (Corpus)
        if window is not None:
            raise TypeError("a Corpus is a bag of words without token order: sliding windows need "
                            "ReferenceTexts (ReferenceTexts.from_texts / from_token_lists)")
        keep = lookup[reference.word_ids] >= 0
        doc = reference.doc_ids[keep].astype(np.int64)
        u = lookup[reference.word_ids[keep]]
        # one occurrence per (document, word) entry; its position is its rank in the document
        starts = np.searchsorted(doc, np.arange(reference.n_docs), side="left")
        pos = np.arange(doc.size, dtype=np.int64) - starts[doc]
        length = np.bincount(doc, minlength=reference.n_docs).astype(np.int64)
        return u, doc, pos, length, reference.n_docs
    ids = reference.token_ids
    off = reference.doc_offsets
    tok_u = np.where(ids >= 0, lookup[np.maximum(ids, 0)], -1)
    where = np.flatnonzero(tok_u >= 0)
    doc = np.searchsorted(off, where, side="right") - 1
    pos = where - off[doc]
    length = np.diff(off)
    return tok_u[where], doc, pos, length, reference.n_windows(window)


def _intervals(u, doc, pos, length, window, counting, n_union):
    """``[a, b]`` window interval of every occurrence (empty ones dropped), by position."""
    w = length[doc] if window is None else np.minimum(int(window), length[doc])  # effective window
    last = length[doc] - w  # start of the document's last window
    group = doc * n_union + u
    order = np.lexsort((pos, group))
    g_s, p_s = group[order], pos[order]
    nxt = np.full(u.size, np.iinfo(np.int64).max // 4, np.int64)
    same = g_s[1:] == g_s[:-1]
    nxt_sorted = np.where(same, p_s[1:], nxt[0])
    nxt[order[:-1]] = nxt_sorted
    a = np.maximum(0, pos - w + 1)
    if counting == "exact":
        first = pos
    else:
        big = int(length.max()) + 1 if length.size else 1
        keys = g_s * big + p_s
        lo = group * big + np.maximum(pos - w + 1, 0)
        first = p_s[np.searchsorted(keys, lo, side="left")]
    b = np.minimum(np.minimum(first, last), nxt - w)
    keep = b >= a
    return u[keep], doc[keep], pos[keep], a[keep], b[keep]


@partial(jit, static_argnames=("n_occ", "n_union"))
def _count_pairs(u, doc, a, b, n_shifts, *, n_occ, n_union):
    """Occurrences and co-occurrences from the intervals of ``n_occ`` occurrences sorted by
    document and position.  The arrays hold at least ``n_shifts`` padding entries after them
    (document ``-1``, empty interval), so the partners at shift ``s`` are one contiguous slice."""
    R = n_occ
    length = jnp.maximum(b[:R] - a[:R] + 1, 0)
    occ = jnp.zeros(n_union, jnp.int32).at[u[:R]].add(length, mode="drop")

    def shift(s, co):
        u2 = jax.lax.dynamic_slice(u, (s,), (R,))
        d2 = jax.lax.dynamic_slice(doc, (s,), (R,))
        a2 = jax.lax.dynamic_slice(a, (s,), (R,))
        b2 = jax.lax.dynamic_slice(b, (s,), (R,))
        ov = jnp.minimum(b[:R], b2) - jnp.maximum(a[:R], a2) + 1
        ov = jnp.where((d2 == doc[:R]) & (ov > 0), ov, 0)
        return co.at[u[:R] * n_union + u2].add(ov, mode="drop")

    co = jax.lax.fori_loop(1, n_shifts + 1, shift, jnp.zeros(n_union * n_union, jnp.int32))
    co = co.reshape(n_union, n_union)
    co = co + co.T  # each unordered pair of occurrences was visited once
    return occ, co.at[jnp.arange(n_union), jnp.arange(n_union)].set(occ)


def _bucket(n: int) -> int:
    """Round a length up to limit recompilation (powers of two, then multiples of 2^16)."""
    if n <= 1 << 16:
        return max(256, 1 << int(np.ceil(np.log2(max(n, 1)))))
    return int(np.ceil(n / (1 << 16))) << 16


def window_counts(reference, word_ids, *, window: int | None, counting: str = "gensim") -> WindowCounts:
    """Boolean window occurrence / co-occurrence counts of ``word_ids`` in ``reference``.

    ``reference`` is a :class:`~topicjax.evaluation.reference_texts.ReferenceTexts` or, for
    document windows (``window=None``) only, a :class:`~topicjax.data.corpus.Corpus`.  ``word_ids`` are
    distinct ids in the reference vocabulary.  See the module docstring for the definitions.
    """
    word_ids, n_windows, occ, co = _padded_counts(reference, word_ids, window=window, counting=counting)
    U = word_ids.size
    return WindowCounts(word_ids, n_windows, occ[:U], co[:U, :U])


def _padded_counts(reference, word_ids, *, window: int | None, counting: str = "gensim"):
    """:func:`window_counts` as ``(word_ids, n_windows, occurrences, cooccurrences)`` with the two
    arrays left at their padded size (a multiple of 128 words, zeros beyond ``word_ids``): the
    shapes of a few compiled programs, whatever the number of words (slicing them on the device
    would compile a program per number of words)."""
    if counting not in COUNTINGS:
        raise ValueError(f"counting must be one of {COUNTINGS}, got {counting!r}")
    if window is not None and (int(window) != window or window < 1):
        raise ValueError(f"window must be a positive integer or None, got {window!r}")
    word_ids = np.asarray(word_ids, np.int64).reshape(-1)
    n_vocab = len(reference.vocab)
    if word_ids.size and (word_ids.min() < 0 or word_ids.max() >= n_vocab):
        raise ValueError(f"word ids must lie in [0, {n_vocab})")
    if np.unique(word_ids).size != word_ids.size:
        raise ValueError("word_ids must be distinct")
    U = int(word_ids.size)
    lookup = np.full(n_vocab, -1, np.int64)
    lookup[word_ids] = np.arange(U)
    u, doc, pos, length, n_windows = _occurrences(reference, lookup, window)
    u, doc, pos, a, b = _intervals(u, doc, pos, length, window, counting, max(U, 1))
    # the largest shift at which two kept occurrences can still share a window
    if u.size:
        w = length[doc] if window is None else np.minimum(int(window), length[doc])
        gpos = doc * (int(length.max()) + 1) + pos  # increasing, documents kept apart
        reach = np.searchsorted(gpos, gpos + w - 1, side="right") - 1
        n_shifts = int((reach - np.arange(u.size)).max())
    else:
        n_shifts = 0
    R = _bucket(u.size)
    total = R + _bucket(n_shifts + 1)
    fill = lambda x, v: np.concatenate([x, np.full(total - x.size, v, np.int64)]).astype(np.int32)  # noqa: E731
    n_union = -(-max(U, 1) // 128) * 128  # padded, to limit recompilation
    occ, co = _count_pairs(
        jnp.asarray(fill(u, n_union)), jnp.asarray(fill(doc, -1)), jnp.asarray(fill(a, 0)),
        jnp.asarray(fill(b, -1)), jnp.int32(n_shifts), n_occ=R, n_union=n_union,
    )
    return word_ids, int(n_windows), occ, co
