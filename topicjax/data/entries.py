"""The array steps that turn coordinate entries (document id, word id, count) into a Corpus's
arrays, with memory close to the result's own; and what every reader and the Corpus share below
them: :class:`CorpusError`, :class:`CorpusWarning`, the size limits (:data:`MAX_ID`,
:func:`inferred_size_limit`) and :class:`Entries`, what a reader returns.

:func:`topicjax.data.build.corpus_fields` (``Corpus.from_entries``) runs them in order:

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

import sys
from typing import NamedTuple

import numpy as np

from topicjax.core.errors import CorpusError  # noqa: F401 - owned by core (which raises it too), published here

__all__ = ["BLOCK", "CorpusError", "CorpusWarning", "MAX_ID", "MAX_PLACEHOLDER_WORDS", "INFERRED_SLACK",
           "inferred_size_limit", "first_missing", "Entries", "dense_entries", "csr_entries", "as_numbers", "integer_ids", "checked_counts", "check_word_range", "sorted_entries",
           "present_documents", "renumber", "block_bincount"]

#: entries per block of the blockwise passes (bounds their temporaries to about ten MB)
BLOCK = 1 << 20


class CorpusWarning(UserWarning):
    """Content that is read as it is but may not mean what was intended (e.g. two documents of a
    Vowpal Wabbit file with one name)."""


#: Document and word ids are stored as ``int32``: no size (documents, words) may exceed this.
MAX_ID = int(np.iinfo(np.int32).max)

#: The largest vocabulary of placeholder names ``w0, w1, ...`` made when no vocabulary is given
#: (a tuple of that many strings costs about 0.3 GB and a second to build): pass the vocabulary
#: for wider matrices.
MAX_PLACEHOLDER_WORDS = 1 << 22

#: See :func:`inferred_size_limit`.
INFERRED_SLACK = 1024


def inferred_size_limit(n_seen: int) -> int:
    """The largest size that may be *inferred* from ids, or read from a file header, when only
    ``n_seen`` distinct ids occur in the data: ``2 * n_seen + INFERRED_SLACK``.

    A vocabulary inferred from the largest word id (lda-c without a vocabulary,
    :meth:`Corpus.from_lists` without ``vocab``), a number of documents inferred from the largest
    document id, integer labels or modalities taken as column indices, or a UCI header's ``D``
    with ``empty_docs="drop"``: each must stay within this bound of what the data shows, so a
    single hostile id (``1 99999999999:1``) is an error naming it instead of an allocation of
    1e11 names.  Ids that never occur are never renumbered silently: a corpus whose ids really
    are that sparse is read by giving the size explicitly (``vocab``, ``n_words``, ``n_docs``,
    ``label_names``).

    >>> inferred_size_limit(10)
    1044
    """
    return 2 * int(n_seen) + INFERRED_SLACK


def first_missing(present: np.ndarray, n: int) -> int | None:
    """The smallest of ``0 .. n-1`` not in the sorted distinct ``present`` (None when all are);
    O(len(present)), never O(n), so that a huge ``n`` costs nothing.

    >>> first_missing(np.array([0, 1, 3]), 5), first_missing(np.array([0, 1]), 2)
    (2, None)
    """
    present = np.asarray(present)
    k = min(int(present.size), int(n))
    gaps = np.flatnonzero(present[:k] != np.arange(k))
    if gaps.size:
        return int(gaps[0])
    return k if k < n else None


class Entries(NamedTuple):
    """What a file reader found: coordinate entries and the keywords of
    :meth:`~topicjax.data.corpus.Corpus.from_entries` (vocabulary, sizes, labels, names...).

    The readers of :mod:`topicjax.data.readers` return this, not a Corpus, so that they sit below
    :mod:`topicjax.data.corpus`, whose ``Corpus.from_uci`` and siblings call them."""

    doc_ids: np.ndarray
    word_ids: np.ndarray
    counts: np.ndarray
    options: dict


def dense_entries(matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """``(doc_ids, word_ids, counts, shape)`` of the non-zeros of a dense ``(documents, words)``
    matrix; a non-finite value is an error naming its document and word."""
    m = np.asarray(matrix)
    if m.ndim != 2:
        raise CorpusError(f"expected a 2-d (documents x words) matrix, got shape {m.shape}")
    if m.dtype.kind == "f" and not np.all(np.isfinite(m)):
        d, w = np.argwhere(~np.isfinite(m))[0]
        raise CorpusError(f"document {d}: count {m[d, w]} for word {w} is not finite")
    d, w = np.nonzero(m)
    return d, w, m[d, w], m.shape


def is_sparse_matrix(x) -> bool:
    """Whether ``x`` is a scipy.sparse matrix or array, without importing SciPy's sparse module
    (0.2-0.3 s of CPU in a process that reads a corpus from a file): an object of that module
    exists only once the module is loaded."""
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(x)


def csr_entries(matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(doc_ids, word_ids, counts)`` of a scipy.sparse ``(documents, words)`` matrix: a CSR
    matrix's rows without a COO copy of it, any other format through COO."""
    if matrix.format == "csr":
        csr = matrix if matrix.has_sorted_indices else matrix.sorted_indices()
        D = matrix.shape[0]
        rows = np.repeat(np.arange(D, dtype=np.int32 if D <= MAX_ID else np.int64), np.diff(csr.indptr))
        return rows, csr.indices, csr.data
    import scipy.sparse as sp  # loaded already: ``matrix`` is one of its objects

    coo = sp.coo_matrix(matrix)
    return coo.row, coo.col, coo.data


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
        # int32 ids differ by less than 2**31: their differences need no wider copy
        d, w = (a[s:s + BLOCK + 1] if a.dtype == np.int32 else a[s:s + BLOCK + 1].astype(np.int64)
                for a in (doc_ids, word_ids))
        dd = np.diff(d)
        if not np.all((dd > 0) | ((dd == 0) & (np.diff(w) > 0))):
            return False
    return True


def sorted_entries(doc_ids, word_ids, counts, n_words: int, copy: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``int32`` arrays of the entries sorted by document then word, without zero counts and
    with the counts of repeated (document, word) pairs summed: new arrays, or with ``copy=False``
    (arrays the caller hands over, as the file readers do) the given ones themselves where they
    already are int32 and in order."""
    zeros = bool(counts.size) and int(counts.min()) == 0
    if zeros:
        keep = counts > 0
        doc_ids, word_ids, counts = doc_ids[keep], word_ids[keep], counts[keep]
    if _in_order(doc_ids, word_ids):
        return tuple(np.array(a, np.int32, copy=copy or a.dtype != np.int32) for a in (doc_ids, word_ids, counts))
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
