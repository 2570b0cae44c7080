"""The steps that turn coordinate entries (document id, word id, count) into a Corpus's arrays,
with memory close to the result's own.

:meth:`topicjax.data.corpus.Corpus.from_entries` runs them in order:

1. :func:`as_numbers` / :func:`integer_ids` -- the ids as an integer array (the caller's array
   itself when it already is one: no copy), with the first bad entry named;
2. :func:`checked_counts` -- the counts validated (finite, non-negative, integral, within int32);
3. :func:`check_word_range` -- every word id inside the vocabulary (min/max first; positions only
   on failure);
4. :func:`sorted_entries` -- the entries sorted by document then word, zero counts dropped and
   duplicates merged, as three new ``int32`` arrays.  Entries that are already in order (CSR
   matrices, UCI files, the readers) are recognised in one blockwise pass and copied once; only
   unsorted input pays for a sort;
5. :func:`present_documents` / :func:`renumber` -- the documents that have tokens, and the ids of
   a corpus whose empty documents are dropped (a running count, no ``searchsorted``).

Temporaries are bounded by :data:`BLOCK` entries where a step has to look at every entry, so that
building a corpus of 70 M non-zeros (NYTimes) peaks at about the caller's arrays plus the result's.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BLOCK", "CorpusError", "as_numbers", "integer_ids", "checked_counts", "check_word_range", "sorted_entries",
           "present_documents", "renumber", "block_bincount"]

#: entries per block of the blockwise passes (bounds their temporaries to a few tens of MB)
BLOCK = 1 << 22


class CorpusError(ValueError):
    """Invalid corpus content; the message names the document, line or value that is wrong."""


def as_numbers(values, name: str) -> np.ndarray:
    """``values`` as a numeric array.  numpy makes an object array of a list holding ``None``, a
    string among numbers or an integer beyond 64 bits: the first such entry is named."""
    arr = np.asarray(values)
    if arr.dtype != object:
        return arr
    flat = arr.ravel().tolist()
    for i, v in enumerate(flat):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise CorpusError(f"entry {i}: {name} {v!r} is not a number")
        if isinstance(v, (int, np.integer)) and not -(2**63) <= int(v) < 2**63:
            raise CorpusError(f"entry {i}: {name} {v} does not fit in 64 bits")
    exact = all(isinstance(v, (int, np.integer)) for v in flat)  # ints stay exact
    return np.asarray(flat, np.int64 if exact else np.float64).reshape(arr.shape)


def integer_ids(arr: np.ndarray, name: str) -> np.ndarray:
    """Ids as an integer array: integer input is returned as it is (signed or unsigned, no copy);
    float input must hold integers; anything else is an error naming the first bad entry."""
    if arr.size and arr.dtype.kind not in "iu":
        if arr.dtype.kind in "US":
            for i, v in enumerate(arr.tolist()):
                try:
                    float(v)
                except ValueError:
                    raise CorpusError(f"entry {i}: {name} {v!r} is not a number") from None
        if arr.dtype.kind != "f":
            raise CorpusError(f"{name}s must be integers, got dtype {arr.dtype}")
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise CorpusError(f"entry {i}: {name} {arr[i]} is not an integer")
        bad = np.abs(arr) >= 2.0**63
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise CorpusError(f"entry {i}: {name} {arr[i]} does not fit in 64 bits")
        return arr.astype(np.int64)
    if arr.dtype.kind == "u" and arr.size and arr.max() >= 2**63:
        i = int(np.argmax(arr))
        raise CorpusError(f"entry {i}: {name} {arr[i]} does not fit in 64 bits")
    if not arr.size:
        return arr.astype(np.int64)
    return arr


def checked_counts(counts: np.ndarray, doc_ids: np.ndarray, word_ids: np.ndarray) -> np.ndarray:
    """The counts validated: numeric, finite, non-negative, integral and within int32 (the first
    bad entry named by its document and word).  Integer counts come back as they are."""
    counts = np.asarray(counts)
    if counts.dtype.kind not in "iufb":
        raise CorpusError(f"counts must be numeric, got dtype {counts.dtype}")

    def where(i: int) -> str:
        return f"document {int(doc_ids[i])}, word {int(word_ids[i])}"

    if not counts.size:
        return counts.astype(np.int32)
    if counts.dtype.kind == "f":
        bad = ~np.isfinite(counts)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            what = "NaN" if np.isnan(counts[i]) else "not finite"
            raise CorpusError(f"{where(i)}: count {counts[i]} is {what}")
    if counts.min() < 0:
        i = int(np.flatnonzero(counts < 0)[0])
        raise CorpusError(f"{where(i)}: count {counts[i]} is negative")
    if counts.dtype.kind == "f":
        bad = counts != np.round(counts)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise CorpusError(f"{where(i)}: count {counts[i]} is not an integer")
    if counts.max() > np.iinfo(np.int32).max:
        i = int(np.argmax(counts))
        raise CorpusError(f"{where(i)}: count {counts[i]} does not fit in int32")
    return counts if counts.dtype.kind in "iu" else counts.astype(np.int32)


def check_word_range(word_ids: np.ndarray, n_words: int, doc_ids: np.ndarray) -> None:
    """Every word id in ``[0, n_words)``; else an error naming the first entry outside."""
    if not word_ids.size or (int(word_ids.min()) >= 0 and int(word_ids.max()) < n_words):
        return
    i = int(np.flatnonzero((word_ids < 0) | (word_ids >= n_words))[0])
    raise CorpusError(f"document {int(doc_ids[i])}: word id {int(word_ids[i])} is outside the vocabulary of "
                      f"{n_words} words")


def _in_order(doc_ids: np.ndarray, word_ids: np.ndarray) -> bool:
    """Whether the entries are sorted by document, then strictly by word (so: no duplicates)."""
    n = doc_ids.size
    for s in range(0, max(n - 1, 0), BLOCK):
        d = doc_ids[s:s + BLOCK + 1].astype(np.int64)
        w = word_ids[s:s + BLOCK + 1].astype(np.int64)
        dd = np.diff(d)
        if not np.all((dd > 0) | ((dd == 0) & (np.diff(w) > 0))):
            return False
    return True


def sorted_entries(doc_ids, word_ids, counts, n_words: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """New ``int32`` arrays of the entries sorted by document then word, without zero counts and
    with the counts of repeated (document, word) pairs summed."""
    zeros = bool(counts.size) and int(counts.min()) == 0
    if zeros:
        keep = counts > 0
        doc_ids, word_ids, counts = doc_ids[keep], word_ids[keep], counts[keep]
    if _in_order(doc_ids, word_ids):
        return (np.array(doc_ids, np.int32), np.array(word_ids, np.int32), np.array(counts, np.int32))
    key = doc_ids.astype(np.int64) * max(n_words, 1) + word_ids
    order = np.argsort(key, kind="stable")
    key = key[order]
    d = np.take(doc_ids, order).astype(np.int32)
    w = np.take(word_ids, order).astype(np.int32)
    c = np.take(counts, order)
    del order
    if key.size and np.any(key[1:] == key[:-1]):
        start = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
        c = np.add.reduceat(c.astype(np.int64), start)
        if c.max() > np.iinfo(np.int32).max:
            raise CorpusError("a merged count does not fit in int32")
        d, w = d[start], w[start]
    return d, w, c.astype(np.int32)


def present_documents(doc_ids: np.ndarray) -> np.ndarray:
    """The distinct document ids of sorted entries, in order (O(entries) whatever ``n_docs`` is)."""
    if not doc_ids.size:
        return doc_ids.astype(np.int64)
    starts = np.flatnonzero(doc_ids[1:] != doc_ids[:-1]) + 1
    return doc_ids[np.concatenate([[0], starts])].astype(np.int64)


def renumber(doc_ids: np.ndarray) -> np.ndarray:
    """Ids 0, 1, 2, ... for the documents of sorted entries in their order (empty ones dropped):
    a running count of where the document changes, in int32."""
    if not doc_ids.size:
        return doc_ids.astype(np.int32)
    out = np.empty(doc_ids.size, np.int32)
    out[0] = 0
    np.cumsum(doc_ids[1:] != doc_ids[:-1], dtype=np.int32, out=out[1:])
    return out


def block_bincount(ids: np.ndarray, n: int, weights: np.ndarray | None = None) -> np.ndarray:
    """``int64`` totals of ``weights`` (or occurrences) per id in ``[0, n)``, :data:`BLOCK` entries
    at a time (``np.bincount`` of a whole int32 array makes an int64 copy of it, and float64
    copies of its weights)."""
    out = np.zeros(n, np.int64)
    for s in range(0, ids.size, BLOCK):
        w = None if weights is None else weights[s:s + BLOCK]
        out += np.bincount(ids[s:s + BLOCK], weights=w, minlength=n).astype(np.int64)
    return out
