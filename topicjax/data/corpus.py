"""The immutable sparse bag-of-words corpus shared by every model.

A :class:`Corpus` holds the non-zero entries ``n_dw`` of the document-word count matrix as three
parallel numpy arrays (``doc_ids``, ``word_ids``, ``counts``), sorted by document and then by word,
plus the vocabulary, optional labels and an optional modality of every word.  It is validated when
it is built, so every model can trust it:

* counts are finite, positive integers (a zero entry is simply absent);
* ids are inside ``[0, n_docs)`` and ``[0, n_words)``;
* duplicate ``(doc, word)`` entries are summed (the documented meaning of a repeated entry);
* every document has at least one token, unless the corpus was built with
  ``empty_docs="drop"``, in which case those documents are removed and counted in
  :attr:`Corpus.dropped_docs`.

Readers for files live in :mod:`topicjax.data.formats`; they all end in :meth:`Corpus.from_entries`.

>>> import topicjax as tj
>>> c = tj.Corpus.from_entries([0, 0, 1], [0, 2, 1], [2, 1, 3], vocab=["a", "b", "c"])
>>> c.n_docs, c.n_words, c.n_tokens
(2, 3, 6)
>>> c.doc_lengths.tolist()
[3, 3]
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from topicjax.data import entries as E
from topicjax.data.entries import CorpusError

__all__ = [
    "Corpus",
    "CorpusError",
    "CorpusWarning",
    "MAX_ID",
    "MAX_PLACEHOLDER_WORDS",
    "INFERRED_SLACK",
    "inferred_size_limit",
    "first_missing",
]


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


def _size(value, name: str) -> int:
    """A size given by the caller (``n_docs``, ``n_words``): an integer in ``[0, MAX_ID]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise CorpusError(f"{name} must be a non-negative integer, got {value!r}")
    value = int(value)
    if value < 0:
        raise CorpusError(f"{name} must be a non-negative integer, got {value}")
    if value > MAX_ID:
        raise CorpusError(f"{name}={value} is more than {MAX_ID} (ids are stored as int32)")
    return value


def _as_vocab(vocab, n_words: int | None) -> tuple[str, ...]:
    if vocab is None:
        if n_words is None:
            raise CorpusError("either vocab or n_words must be given")
        n_words = _size(n_words, "n_words")
        if n_words > MAX_PLACEHOLDER_WORDS:
            raise CorpusError(
                f"n_words={n_words} without a vocabulary: placeholder names are made for at most "
                f"{MAX_PLACEHOLDER_WORDS} words; pass the vocabulary"
            )
        return tuple(f"w{i}" for i in range(n_words))
    if isinstance(vocab, (str, bytes)):
        raise CorpusError(f"vocab must be a sequence of words, not a single string ({vocab[:40]!r})")
    vocab = tuple(str(v) for v in vocab)
    if len(vocab) > MAX_ID:
        raise CorpusError(f"the vocabulary has {len(vocab)} words, more than {MAX_ID} (ids are stored as int32)")
    if len(set(vocab)) != len(vocab):
        seen: dict[str, int] = {}
        for i, v in enumerate(vocab):
            if v in seen:
                raise CorpusError(f"vocabulary entry {v!r} appears twice (positions {seen[v]} and {i})")
            seen[v] = i
    return vocab


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Corpus:
    """An immutable, validated sparse bag-of-words corpus.

    Build it with :meth:`from_entries`, :meth:`from_dense`, :meth:`from_sparse`, :meth:`from_lists`
    (gensim's ``[(word_id, count), ...]`` documents), :meth:`from_texts`, or a file reader
    (:meth:`from_uci`, :meth:`from_vw`, :meth:`from_ldac`).  The constructor itself expects
    already-normalised arrays and is not meant to be called directly.

    Attributes
    ----------
    doc_ids, word_ids, counts:
        ``int32`` arrays of length ``nnz``: entry ``i`` says word ``word_ids[i]`` occurs
        ``counts[i]`` times in document ``doc_ids[i]``.  Sorted by document, then word.
    vocab:
        Tuple of ``n_words`` strings.
    labels:
        ``None`` or a boolean ``(n_docs, n_labels)`` indicator matrix (one ``True`` per row for a
        single-label corpus, any number for a multi-label one).
    label_names:
        Names of the label columns.
    modalities:
        ``None`` or an ``int32`` array giving the modality index of every word (for multimodal
        models such as ARTM with BigARTM-style class ids); names in ``modality_names``.
    doc_names:
        Optional names of the documents (file names, ids of the source).
    dropped_docs:
        Indices (in the numbering of the source) of documents that had no tokens and were dropped
        because the corpus was read with ``empty_docs="drop"``; empty otherwise.
    """

    doc_ids: np.ndarray
    word_ids: np.ndarray
    counts: np.ndarray
    vocab: tuple[str, ...]
    n_docs: int
    labels: np.ndarray | None = None
    label_names: tuple[str, ...] = ()
    modalities: np.ndarray | None = None
    modality_names: tuple[str, ...] = ()
    doc_names: tuple[str, ...] | None = None
    dropped_docs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self):
        # immutable in fact, not only by convention: the derived arrays are cached
        for a in (self.doc_ids, self.word_ids, self.counts):
            if isinstance(a, np.ndarray):
                a.setflags(write=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_entries(
        cls,
        doc_ids,
        word_ids,
        counts,
        *,
        vocab: Sequence[str] | None = None,
        n_words: int | None = None,
        n_docs: int | None = None,
        labels=None,
        label_names: Sequence[str] | None = None,
        modalities=None,
        modality_names: Sequence[str] | None = None,
        doc_names: Sequence[str] | None = None,
        empty_docs: str = "error",
    ) -> "Corpus":
        """Validate and normalise coordinate entries into a Corpus.

        ``labels`` may be a sequence of one label per document (ints or strings), a sequence of
        collections of labels per document (multi-label), or a boolean ``(n_docs, n_labels)``
        matrix.  ``empty_docs`` is ``"error"`` (default: a document without tokens is an error
        naming it) or ``"drop"`` (such documents are removed and listed in ``dropped_docs``).

        Sizes: ``n_docs`` and ``n_words`` given by the caller are taken as given, up to
        :data:`MAX_ID` (ids are int32; a placeholder vocabulary up to :data:`MAX_PLACEHOLDER_WORDS`),
        and cost memory only where the result holds them (``dropped_docs`` with
        ``empty_docs="drop"``; nothing when an empty document is an error).  Sizes *inferred*
        from the largest id are bounded by :func:`inferred_size_limit`.

        >>> Corpus.from_entries([0], [3], [1], vocab=["a", "b"])
        Traceback (most recent call last):
        ...
        topicjax.data.corpus.CorpusError: document 0: word id 3 is outside the vocabulary of 2 words
        """
        if empty_docs not in ("error", "drop"):
            raise ValueError(f"empty_docs must be 'error' or 'drop', got {empty_docs!r}")
        doc_ids = E.as_numbers(doc_ids, "document id")
        word_ids = E.as_numbers(word_ids, "word id")
        counts = E.as_numbers(counts, "count")
        if not (doc_ids.shape == word_ids.shape == counts.shape) or doc_ids.ndim != 1:
            raise CorpusError(
                f"doc_ids, word_ids and counts must be 1-d arrays of one length, got shapes "
                f"{doc_ids.shape}, {word_ids.shape}, {counts.shape}"
            )
        doc_ids = E.integer_ids(doc_ids, "document id")
        word_ids = E.integer_ids(word_ids, "word id")
        # Sizes are checked before anything of that size is allocated (a placeholder vocabulary,
        # per-document arrays): see inferred_size_limit.
        vocab_t = _as_vocab(vocab, n_words)
        if n_words is not None and vocab is not None and n_words != len(vocab_t):
            raise CorpusError(f"n_words={n_words} but the vocabulary has {len(vocab_t)} entries")
        W = len(vocab_t)
        counts = E.checked_counts(counts, doc_ids, word_ids)
        if doc_ids.size and int(doc_ids.min()) < 0:
            i = int(np.argmin(doc_ids))
            raise CorpusError(f"entry {i}: document id {int(doc_ids[i])} is negative")
        E.check_word_range(word_ids, W, doc_ids)
        n_docs_from_ids = None
        if n_docs is None:
            # Documents after the last one with an entry are empty; the per-document names or
            # labels, when given, say how many documents there are.
            n_docs = int(doc_ids.max()) + 1 if doc_ids.size else 0
            if n_docs > MAX_ID:
                i = int(np.argmax(doc_ids))
                raise CorpusError(f"entry {i}: document id {int(doc_ids[i])} is more than {MAX_ID - 1} (int32)")
            n_docs_from_ids = n_docs
            if doc_names is not None:
                n_docs = max(n_docs, len(doc_names))
            if labels is not None and hasattr(labels, "__len__"):
                n_docs = max(n_docs, len(labels))
        else:
            n_docs = _size(n_docs, "n_docs")
            if doc_ids.size and int(doc_ids.max()) >= n_docs:
                i = int(np.argmax(doc_ids))
                raise CorpusError(f"entry {i}: document id {int(doc_ids[i])} is outside [0, {n_docs})")

        # Zero entries carry no information: dropped; duplicates merged by summing.
        doc_ids, word_ids, counts = E.sorted_entries(doc_ids, word_ids, counts, W)
        present = E.present_documents(doc_ids)
        n_empty = n_docs - int(present.size)
        if (
            n_empty and n_docs_from_ids is not None and n_docs == n_docs_from_ids
            and n_docs > inferred_size_limit(present.size)
        ):
            raise CorpusError(
                f"document id {n_docs - 1} would make {n_docs} documents of which only {present.size} have "
                f"tokens (more than {inferred_size_limit(present.size)} is not inferred from ids); pass n_docs"
            )

        labels_m, label_names_t = _labels_matrix(labels, label_names, n_docs)
        modalities_a, modality_names_t = _modalities(modalities, modality_names, W)
        if doc_names is not None:
            doc_names = tuple(str(n) for n in doc_names)
            if len(doc_names) != n_docs:
                raise CorpusError(f"{len(doc_names)} document names for {n_docs} documents")

        dropped = np.zeros(0, np.int64)
        if n_empty:
            if empty_docs == "error":
                first = first_missing(present, n_docs)
                which = f"document {first}" + (f" ({doc_names[first]})" if doc_names is not None else "")
                raise CorpusError(
                    f"{which} has no tokens ({n_empty} empty document(s) in all); "
                    "pass empty_docs='drop' to remove them"
                )
            # O(entries) renumbering; the only array of size n_docs is dropped_docs itself.
            doc_ids = E.renumber(doc_ids)
            if labels_m is not None:
                labels_m = labels_m[present]
            if doc_names is not None:
                doc_names = tuple(doc_names[i] for i in present.tolist())
            empty_mask = np.ones(n_docs, bool)
            empty_mask[present] = False
            dropped = np.flatnonzero(empty_mask).astype(np.int64)
            n_docs = int(present.size)
        return cls(
            doc_ids=doc_ids,
            word_ids=word_ids,
            counts=counts,
            vocab=vocab_t,
            n_docs=int(n_docs),
            labels=labels_m,
            label_names=label_names_t,
            modalities=modalities_a,
            modality_names=modality_names_t,
            doc_names=doc_names,
            dropped_docs=dropped,
        )

    @classmethod
    def from_dense(cls, matrix, vocab: Sequence[str] | None = None, **kwargs) -> "Corpus":
        """From a dense ``(n_docs, n_words)`` count matrix (documents are rows).

        A matrix has no vocabulary: column ``j`` *is* word ``j`` of ``vocab`` (or ``w{j}``), so the
        columns must be in the vocabulary's order, and a matrix for a fitted model must have its
        columns in the order of the model's vocabulary (a permutation is not detectable).
        """
        m = np.asarray(matrix)
        if m.ndim != 2:
            raise CorpusError(f"expected a 2-d (documents x words) matrix, got shape {m.shape}")
        if m.dtype.kind == "f" and not np.all(np.isfinite(m)):
            d, w = np.argwhere(~np.isfinite(m))[0]
            raise CorpusError(f"document {d}: count {m[d, w]} for word {w} is not finite")
        d, w = np.nonzero(m)
        return cls.from_entries(d, w, m[d, w], vocab=vocab, n_words=m.shape[1], n_docs=m.shape[0], **kwargs)

    @classmethod
    def from_sparse(cls, matrix, vocab: Sequence[str] | None = None, **kwargs) -> "Corpus":
        """From a scipy.sparse ``(n_docs, n_words)`` matrix, e.g. CountVectorizer's output.

        Columns are positional, as in :meth:`from_dense`: column ``j`` is word ``j`` of ``vocab``
        (``CountVectorizer.get_feature_names_out()`` for its output).  Without ``vocab`` the words
        are named ``w0, w1, ...`` (at most :data:`MAX_PLACEHOLDER_WORDS` of them); the matrix's
        shape is taken as given (its empty rows are empty documents).
        """
        if not sp.issparse(matrix):
            return cls.from_dense(matrix, vocab, **kwargs)
        D, W = matrix.shape
        if matrix.format == "csr":  # rows are documents: their ids without a COO copy of the matrix
            csr = matrix if matrix.has_sorted_indices else matrix.sorted_indices()
            rows = np.repeat(np.arange(D, dtype=np.int32 if D <= MAX_ID else np.int64), np.diff(csr.indptr))
            return cls.from_entries(rows, csr.indices, csr.data, vocab=vocab, n_words=W, n_docs=D, **kwargs)
        coo = sp.coo_matrix(matrix)
        return cls.from_entries(coo.row, coo.col, coo.data, vocab=vocab, n_words=W, n_docs=D, **kwargs)

    @classmethod
    def from_lists(
        cls, docs: Iterable[Iterable[tuple[int, float]]], vocab: Sequence[str] | None = None, **kwargs
    ) -> "Corpus":
        """From gensim-style documents: an iterable of ``[(word_id, count), ...]`` lists.

        ``vocab`` may also be a mapping ``id -> word`` such as a gensim ``Dictionary``.  Without
        ``vocab`` or ``n_words`` the vocabulary is ``w0 .. w{largest id}``, inferred only while the
        largest id is within :func:`inferred_size_limit` of the number of distinct ids (so a stray
        id ``10**8`` is an error naming it, not a vocabulary of 100M words); pass ``n_words`` or
        ``vocab`` for sparser ids.
        """
        d_list, w_list, c_list = [], [], []
        n = 0
        for d, doc in enumerate(docs):
            n = d + 1
            for item in doc:
                try:
                    w, c = item
                except (TypeError, ValueError):
                    raise CorpusError(f"document {d}: entry {item!r} is not a (word_id, count) pair") from None
                d_list.append(d)
                w_list.append(w)
                c_list.append(c)
        if vocab is not None and not isinstance(vocab, (list, tuple, np.ndarray)):
            mapping = dict(vocab.items()) if hasattr(vocab, "items") else dict(enumerate(vocab))
            gaps = [i for i in range(len(mapping)) if i not in mapping]
            if gaps:
                raise CorpusError(f"the vocabulary mapping has no word for id {gaps[0]} (ids must be 0..{len(mapping) - 1})")
            vocab = [mapping[i] for i in range(len(mapping))]
        kwargs.setdefault("n_docs", n)
        w_arr = E.as_numbers(w_list, "word id")
        if vocab is None and kwargs.get("n_words") is None:
            kwargs["n_words"] = 0
            if w_arr.size:
                ok = np.issubdtype(w_arr.dtype, np.number) and bool(np.all(np.isfinite(w_arr)))
                top = int(np.max(w_arr)) if ok else 0
                if ok and top >= 0 and np.all(w_arr == np.round(w_arr)):
                    n_distinct = int(np.unique(w_arr).size)
                    if top + 1 > inferred_size_limit(n_distinct):
                        i = int(np.argmax(w_arr))
                        raise CorpusError(
                            f"document {d_list[i]}: word id {top} would make a vocabulary of {top + 1} words for "
                            f"{n_distinct} distinct ids (more than {inferred_size_limit(n_distinct)} is not "
                            "inferred); pass vocab or n_words"
                        )
                    kwargs["n_words"] = top + 1
                # otherwise from_entries names the bad id
        return cls.from_entries(np.asarray(d_list, np.int64), w_arr, E.as_numbers(c_list, "count"), vocab=vocab, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        labels=None,
        *,
        empty_docs: str = "error",
        doc_names: Sequence[str] | None = None,
        **vectorizer_kwargs,
    ) -> "Corpus":
        """Tokenise raw texts with scikit-learn's ``CountVectorizer``.

        Keyword arguments go to ``CountVectorizer`` (``stop_words="english"``, ``min_df``,
        ``max_df``, ``token_pattern``, ``lowercase`` ...); see :func:`topicjax.data.formats.read_texts`.
        """
        from topicjax.data.formats import read_texts

        return read_texts(texts, labels=labels, empty_docs=empty_docs, doc_names=doc_names, **vectorizer_kwargs)

    @classmethod
    def from_uci(cls, path, vocab_path=None, **kwargs) -> "Corpus":
        """Read a UCI bag-of-words corpus: a folder with ``docword.*.txt[.gz]`` and ``vocab.*.txt``,
        or the docword file itself (see :func:`topicjax.data.formats.read_uci`)."""
        from topicjax.data.formats import read_uci

        return read_uci(path, vocab_path, **kwargs)

    @classmethod
    def from_vw(cls, path, **kwargs) -> "Corpus":
        """Read a Vowpal Wabbit text file (BigARTM's format; see :func:`topicjax.data.formats.read_vw`)."""
        from topicjax.data.formats import read_vw

        return read_vw(path, **kwargs)

    @classmethod
    def from_ldac(cls, path, vocab=None, **kwargs) -> "Corpus":
        """Read an lda-c file ``N id:count ...`` (see :func:`topicjax.data.formats.read_ldac`)."""
        from topicjax.data.formats import read_ldac

        return read_ldac(path, vocab, **kwargs)

    @classmethod
    def load(cls, path) -> "Corpus":
        """Read any supported corpus path, choosing the reader from its form (see
        :func:`topicjax.data.formats.read_corpus`)."""
        from topicjax.data.formats import read_corpus

        return read_corpus(path)

    # ------------------------------------------------------------------ properties
    @property
    def n_words(self) -> int:
        return len(self.vocab)

    @property
    def nnz(self) -> int:
        return int(self.counts.size)

    @property
    def n_tokens(self) -> int:
        return int(self.counts.sum(dtype=np.int64))

    # Derived arrays are computed once and kept (the corpus's arrays are read-only), read-only
    # themselves; each is O(n_docs) or O(n_words), computed in blocks without O(nnz) temporaries.
    @cached_property
    def doc_lengths(self) -> np.ndarray:
        """Tokens per document, ``int64 (n_docs,)``."""
        off = self.doc_offsets
        out = np.zeros(self.n_docs, np.int64)
        if self.nnz:
            nonempty = off[1:] > off[:-1]
            out[nonempty] = np.add.reduceat(self.counts, off[:-1][nonempty], dtype=np.int64)
        return _frozen(out)

    @cached_property
    def word_counts(self) -> np.ndarray:
        """Tokens per word over the whole corpus, ``int64 (n_words,)``."""
        return _frozen(E.block_bincount(self.word_ids, self.n_words, self.counts))

    @cached_property
    def doc_frequency(self) -> np.ndarray:
        """Number of documents containing each word, ``int64 (n_words,)``."""
        return _frozen(E.block_bincount(self.word_ids, self.n_words))

    @cached_property
    def doc_offsets(self) -> np.ndarray:
        """``(n_docs + 1,)`` offsets: document ``d``'s entries are ``[offsets[d], offsets[d+1])``."""
        # the entries are sorted by document: a binary search per document, no O(nnz) temporary
        return _frozen(np.searchsorted(self.doc_ids, np.arange(self.n_docs + 1), side="left").astype(np.int64))

    @property
    def multilabel(self) -> bool:
        return self.labels is not None and bool(np.any(self.labels.sum(1) != 1))

    @property
    def label_ids(self) -> np.ndarray:
        """For a single-label corpus, the label index of each document, ``(n_docs,)``."""
        if self.labels is None:
            raise ValueError("this corpus has no labels")
        if self.multilabel:
            raise ValueError("this corpus is multi-label; use .labels (an indicator matrix)")
        return np.argmax(self.labels, axis=1)

    def __repr__(self) -> str:
        extra = f", {len(self.label_names)} labels" if self.labels is not None else ""
        if self.modalities is not None:
            extra += f", modalities {list(self.modality_names)}"
        return f"Corpus(n_docs={self.n_docs}, n_words={self.n_words}, n_tokens={self.n_tokens}, nnz={self.nnz}{extra})"

    def __len__(self) -> int:
        return self.n_docs

    # ------------------------------------------------------------------ conversions
    def to_sparse(self) -> sp.csr_matrix:
        """``(n_docs, n_words)`` CSR matrix of counts."""
        return sp.csr_matrix(
            (self.counts.astype(np.float64), (self.doc_ids, self.word_ids)), shape=(self.n_docs, self.n_words)
        )

    def to_dense(self) -> np.ndarray:
        """Dense ``(n_docs, n_words)`` count matrix (only for small corpora)."""
        m = np.zeros((self.n_docs, self.n_words), np.int64)
        m[self.doc_ids, self.word_ids] = self.counts
        return m

    def to_lists(self) -> list[list[tuple[int, int]]]:
        """gensim-style documents: a list of ``[(word_id, count), ...]`` per document."""
        off = self.doc_offsets
        w, c = self.word_ids.tolist(), self.counts.tolist()
        return [list(zip(w[off[d] : off[d + 1]], c[off[d] : off[d + 1]])) for d in range(self.n_docs)]

    def equals(self, other: "Corpus") -> bool:
        """Exact equality of content (entries, vocabulary, labels, modalities)."""
        if not isinstance(other, Corpus):
            return False
        same = (
            self.n_docs == other.n_docs
            and self.vocab == other.vocab
            and np.array_equal(self.doc_ids, other.doc_ids)
            and np.array_equal(self.word_ids, other.word_ids)
            and np.array_equal(self.counts, other.counts)
            and (self.labels is None) == (other.labels is None)
            and (self.modalities is None) == (other.modalities is None)
        )
        if same and self.labels is not None:
            same = np.array_equal(self.labels, other.labels) and self.label_names == other.label_names
        if same and self.modalities is not None:
            same = np.array_equal(self.modalities, other.modalities) and self.modality_names == other.modality_names
        return bool(same)

    # ------------------------------------------------------------------ selection and splits
    def subset(self, docs) -> "Corpus":
        """The documents ``docs`` (indices or a boolean mask), renumbered in the given order."""
        docs = np.asarray(docs)
        if docs.dtype == bool:
            if docs.shape != (self.n_docs,):
                raise ValueError(f"boolean mask of shape {docs.shape} for {self.n_docs} documents")
            docs = np.flatnonzero(docs)
        docs = docs.astype(np.int64)
        if docs.size and (docs.min() < 0 or docs.max() >= self.n_docs):
            bad = docs[(docs < 0) | (docs >= self.n_docs)][0]
            raise ValueError(f"document index {int(bad)} is outside [0, {self.n_docs})")
        off = self.doc_offsets
        pieces = [np.arange(off[d], off[d + 1]) for d in docs]
        idx = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
        new_doc = np.repeat(np.arange(docs.size), off[docs + 1] - off[docs])
        return self._rebuild(
            new_doc, self.word_ids[idx], self.counts[idx], n_docs=int(docs.size), doc_index=docs
        )

    def _rebuild(self, doc_ids, word_ids, counts, *, n_docs, doc_index=None, empty_docs="error") -> "Corpus":
        labels = self.labels[doc_index] if (self.labels is not None and doc_index is not None) else self.labels
        names = (
            tuple(self.doc_names[i] for i in doc_index)
            if (self.doc_names is not None and doc_index is not None)
            else self.doc_names
        )
        return Corpus.from_entries(
            doc_ids,
            word_ids,
            counts,
            vocab=self.vocab,
            n_docs=n_docs,
            labels=labels,
            label_names=self.label_names if labels is not None else None,
            modalities=self.modalities,
            modality_names=self.modality_names if self.modalities is not None else None,
            doc_names=names,
            empty_docs=empty_docs,
        )

    def train_test_split(self, test_size: float | int = 0.1, *, seed: int = 0) -> tuple["Corpus", "Corpus"]:
        """Split documents at random into a training and a test corpus (same vocabulary).

        ``test_size`` is a fraction in (0, 1) or a number of documents.  The same seed always
        gives the same split.
        """
        D = self.n_docs
        is_int = isinstance(test_size, (int, np.integer)) and not isinstance(test_size, (bool, np.bool_))
        is_fraction = isinstance(test_size, (float, np.floating)) and 0.0 <= test_size <= 1.0  # not NaN
        if not (is_int or is_fraction):  # np.float32(0.1) is a fraction too, not int(0.1) = 0 documents
            raise ValueError(f"test_size must be a fraction in (0, 1) or a number of documents, got {test_size!r}")
        n_test = int(test_size) if is_int else int(round(float(test_size) * D))
        if not 0 < n_test < D:
            raise ValueError(f"test_size={test_size} leaves no training or no test documents out of {D}")
        perm = np.random.default_rng(seed).permutation(D)
        return self.subset(np.sort(perm[n_test:])), self.subset(np.sort(perm[:n_test]))

    def completion_split(self, protocol: str = "tokens", *, fraction: float = 0.5, seed: int = 0):
        """Split each document in two parts for held-out evaluation by document completion.

        * ``protocol="tokens"`` (ARTM sec. 5): each token of a document goes to the observed part
          with probability ``fraction`` (tokens are split, not distinct words, so a word may be on
          both sides);
        * ``protocol="words"`` (PTM sec. 7, eq. 32): the distinct words of each document are split
          into two disjoint sets.

        Returns ``(observed, heldout)``: two corpora with the same documents and vocabulary.
        Every document keeps at least one token on each side; a document with fewer than 2 tokens
        (or, for ``"words"``, fewer than 2 distinct words) cannot be split and raises an error
        naming it.
        """
        if protocol not in ("tokens", "words"):
            raise ValueError(f"protocol must be 'tokens' or 'words', got {protocol!r}")
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"fraction must be in (0, 1), got {fraction}")
        rng = np.random.default_rng(seed)
        off = self.doc_offsets
        if protocol == "tokens":
            short = np.flatnonzero(self.doc_lengths < 2)
            if short.size:
                raise CorpusError(
                    f"document {int(short[0])} has {int(self.doc_lengths[short[0]])} token(s); "
                    "document completion needs at least 2"
                )
            observed = rng.binomial(self.counts, fraction).astype(np.int64)
            heldout = self.counts - observed
            # Guarantee both parts are non-empty: move one token across where a side is empty.
            for d in range(self.n_docs):
                s, e = off[d], off[d + 1]
                if observed[s:e].sum() == 0:
                    j = s + int(rng.integers(e - s))
                    observed[j] += 1
                    heldout[j] -= 1
                elif heldout[s:e].sum() == 0:
                    j = s + int(rng.integers(e - s))
                    observed[j] -= 1
                    heldout[j] += 1
        else:
            n_distinct = off[1:] - off[:-1]
            short = np.flatnonzero(n_distinct < 2)
            if short.size:
                raise CorpusError(
                    f"document {int(short[0])} has {int(n_distinct[short[0]])} distinct word(s); "
                    "the disjoint-words completion needs at least 2"
                )
            side = rng.random(self.nnz) < fraction
            for d in range(self.n_docs):
                s, e = off[d], off[d + 1]
                if side[s:e].all() or not side[s:e].any():
                    j = s + int(rng.integers(e - s))
                    side[j] = not side[j]
            observed = np.where(side, self.counts, 0)
            heldout = np.where(side, 0, self.counts)
        obs = self._rebuild(self.doc_ids, self.word_ids, observed, n_docs=self.n_docs)
        held = self._rebuild(self.doc_ids, self.word_ids, heldout, n_docs=self.n_docs)
        return obs, held

    def with_vocab(self, vocab: Sequence[str], *, unknown: str = "drop", empty_docs: str = "error") -> "Corpus":
        """Re-index this corpus onto another vocabulary (e.g. a test corpus onto the training one).

        Words absent from ``vocab`` are dropped (``unknown="drop"``, the protocol of ARTM sec. 5)
        or make an error naming the first of them (``unknown="error"``).
        """
        if unknown not in ("drop", "error"):
            raise ValueError(f"unknown must be 'drop' or 'error', got {unknown!r}")
        vocab = tuple(vocab)
        index = {w: i for i, w in enumerate(vocab)}
        mapping = np.array([index.get(w, -1) for w in self.vocab], np.int64)
        new_w = mapping[self.word_ids] if self.nnz else np.zeros(0, np.int64)
        missing = new_w < 0
        if missing.any():
            if unknown == "error":
                w = self.vocab[int(self.word_ids[np.flatnonzero(missing)[0]])]
                raise CorpusError(f"word {w!r} is not in the target vocabulary ({int(missing.sum())} entries affected)")
        keep = ~missing
        modalities = None
        if self.modalities is not None:
            modalities = np.zeros(len(vocab), np.int32)
            has = mapping >= 0
            modalities[mapping[has]] = self.modalities[has]
        return Corpus.from_entries(
            self.doc_ids[keep],
            new_w[keep],
            self.counts[keep],
            vocab=vocab,
            n_docs=self.n_docs,
            labels=self.labels,
            label_names=self.label_names if self.labels is not None else None,
            modalities=modalities,
            modality_names=self.modality_names if self.modalities is not None else None,
            doc_names=self.doc_names,
            empty_docs=empty_docs,
        )

    def check_same_vocab(self, other: "Corpus", what: str = "test corpus") -> None:
        """Raise a clear error when ``other`` does not share this corpus's vocabulary."""
        if self.vocab != other.vocab:
            if len(self.vocab) != len(other.vocab):
                detail = f"{len(other.vocab)} words vs {len(self.vocab)}"
            else:
                i = next(i for i, (a, b) in enumerate(zip(self.vocab, other.vocab)) if a != b)
                detail = f"word {i} is {other.vocab[i]!r} vs {self.vocab[i]!r}"
            raise CorpusError(
                f"the {what} has a different vocabulary ({detail}); use corpus.with_vocab(train.vocab)"
            )

    def with_labels(self, labels, label_names=None) -> "Corpus":
        """A copy with labels attached (see :meth:`from_entries` for accepted forms)."""
        m, names = _labels_matrix(labels, label_names, self.n_docs)
        return replace(self, labels=m, label_names=names)

    def select_modality(self, name: str) -> "Corpus":
        """The tokens of one modality only, re-indexed onto that modality's words."""
        if self.modalities is None:
            raise ValueError("this corpus has no modalities")
        if name not in self.modality_names:
            raise ValueError(f"unknown modality {name!r}; known: {list(self.modality_names)}")
        m = self.modality_names.index(name)
        words = np.flatnonzero(self.modalities == m)
        sub_vocab = [self.vocab[i] for i in words]
        mapping = -np.ones(self.n_words, np.int64)
        mapping[words] = np.arange(words.size)
        keep = mapping[self.word_ids] >= 0
        return Corpus.from_entries(
            self.doc_ids[keep], mapping[self.word_ids[keep]], self.counts[keep], vocab=sub_vocab,
            n_docs=self.n_docs, labels=self.labels,
            label_names=self.label_names if self.labels is not None else None,
            doc_names=self.doc_names, empty_docs="drop",
        )

    def check_topics(self, n_topics: int) -> None:
        """Raise when a model with ``n_topics`` topics cannot be fitted to this corpus."""
        if int(n_topics) != n_topics or n_topics < 1:
            raise ValueError(f"the number of topics must be a positive integer, got {n_topics!r}")
        if self.n_docs == 0:  # say so, rather than "more topics than its 0 tokens"
            raise ValueError("the corpus has no documents (an empty file, or every document dropped as empty)")
        if n_topics > self.n_tokens:
            raise ValueError(f"{n_topics} topics is more than the {self.n_tokens} tokens of the corpus")


def _is_label_int(v) -> bool:
    """An integer label (a column index), excluding booleans, which are names ("True")."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _labels_matrix(labels, label_names, n_docs: int):
    """Normalise labels to a boolean ``(n_docs, n_labels)`` matrix and its column names.

    * a 2-d numpy array is the indicator matrix itself (columns named ``label_names`` or
      ``"0", "1", ...``);
    * otherwise one entry per document: a single label, or a collection (list, tuple, set,
      array) of labels for a multi-label document.  Integer labels are column indices when
      ``label_names`` is given or when every label is an integer (columns ``"0".."max"``);
      any other label is looked up by its string, the columns being the sorted distinct strings
      unless ``label_names`` fixes them.
    """
    if labels is None:
        return None, ()
    if isinstance(labels, np.ndarray) and labels.ndim == 2:
        m = labels.astype(bool)
        if m.shape[0] != n_docs:
            raise CorpusError(f"label matrix has {m.shape[0]} rows for {n_docs} documents")
        names = tuple(str(n) for n in label_names) if label_names is not None else tuple(str(i) for i in range(m.shape[1]))
        if len(names) != m.shape[1]:
            raise CorpusError(f"{len(names)} label names for {m.shape[1]} label columns")
        return m, names
    per_doc = [
        list(l) if isinstance(l, (list, tuple, set, frozenset, np.ndarray)) else [l] for l in labels
    ]
    if len(per_doc) != n_docs:
        raise CorpusError(f"{len(per_doc)} labels for {n_docs} documents")
    values = [v for ls in per_doc for v in ls]
    by_index = label_names is not None or (bool(values) and all(_is_label_int(v) for v in values))
    if label_names is not None:
        names = tuple(str(n) for n in label_names)
    elif by_index:
        for d, ls in enumerate(per_doc):
            for v in ls:
                if v < 0:
                    raise CorpusError(f"document {d}: label {v} is negative")
        n_distinct = len(set(int(v) for v in values))
        top = int(max(values))
        if top + 1 > inferred_size_limit(n_distinct):
            d = next(d for d, ls in enumerate(per_doc) if any(int(v) == top for v in ls))
            raise CorpusError(
                f"document {d}: integer label {top} would make {top + 1} label columns for {n_distinct} distinct "
                f"labels (more than {inferred_size_limit(n_distinct)} is not inferred); pass label_names or string labels"
            )
        names = tuple(str(i) for i in range(top + 1))
    else:
        names = tuple(sorted({str(v) for v in values}))
    index = {n: i for i, n in enumerate(names)}
    m = np.zeros((n_docs, len(names)), bool)
    for d, ls in enumerate(per_doc):
        for v in ls:
            if by_index and _is_label_int(v):
                if not 0 <= v < len(names):
                    raise CorpusError(f"document {d}: label {v} is outside [0, {len(names)})")
                m[d, int(v)] = True
            elif str(v) in index:
                m[d, index[str(v)]] = True
            else:
                raise CorpusError(f"document {d}: label {v!r} is not among the label names")
    return m, names


def _modalities(modalities, modality_names, n_words: int):
    if modalities is None:
        return None, ()
    mod = np.asarray(modalities)
    if mod.shape != (n_words,):
        raise CorpusError(f"modalities must give one modality per word ({n_words}), got shape {mod.shape}")
    if mod.dtype.kind in "iu":
        if modality_names is None and mod.size:
            n_distinct = int(np.unique(mod).size)
            if mod.min() >= 0 and int(mod.max()) + 1 > inferred_size_limit(n_distinct):
                raise CorpusError(
                    f"word {int(np.argmax(mod))}: modality index {int(mod.max())} would make {int(mod.max()) + 1} "
                    f"modalities for {n_distinct} distinct indices; pass modality_names"
                )
        names = tuple(modality_names) if modality_names is not None else tuple(f"m{i}" for i in range(int(mod.max()) + 1 if mod.size else 0))
        if mod.size and (mod.min() < 0 or mod.max() >= len(names)):
            raise CorpusError(f"modality index outside [0, {len(names)})")
        return mod.astype(np.int32), names
    names = tuple(modality_names) if modality_names is not None else tuple(dict.fromkeys(str(m) for m in mod))
    index = {n: i for i, n in enumerate(names)}
    try:
        return np.array([index[str(m)] for m in mod], np.int32), names
    except KeyError as e:
        raise CorpusError(f"modality {e.args[0]!r} is not among the modality names") from None
