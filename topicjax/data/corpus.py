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

Readers for files: ``Corpus.from_uci``, ``from_vw``, ``from_ldac``, ``from_texts``,
``from_text_folder``, ``from_tsv`` and ``load`` (any path); they parse with
:mod:`topicjax.data.readers` and end in :meth:`Corpus.from_entries`, whose steps are
:mod:`topicjax.data.build`.  Writers and the formats' documentation: :mod:`topicjax.data.formats`.

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

from topicjax.data import build
from topicjax.data.splits import completion_tokens, completion_words
from topicjax.data import entries
from topicjax.data.entries import (  # noqa: F401 - published here, where users import them from
    INFERRED_SLACK,
    MAX_ID,
    MAX_PLACEHOLDER_WORDS,
    CorpusError,
    CorpusWarning,
    Entries,
    first_missing,
    inferred_size_limit,
)
from topicjax.data.readers.dispatch import read_entries
from topicjax.data.readers.ldac import ldac_entries
from topicjax.data.readers.texts import text_folder_entries, texts_entries
from topicjax.data.readers.tsv import tsv_entries
from topicjax.data.readers.uci import uci_entries
from topicjax.data.readers.vw import vw_entries

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
        topicjax.data.entries.CorpusError: document 0: word id 3 is outside the vocabulary of 2 words
        """
        return cls(**build.corpus_fields(
            doc_ids, word_ids, counts, vocab=vocab, n_words=n_words, n_docs=n_docs, labels=labels,
            label_names=label_names, modalities=modalities, modality_names=modality_names, doc_names=doc_names,
            empty_docs=empty_docs))

    @classmethod
    def from_dense(cls, matrix, vocab: Sequence[str] | None = None, **kwargs) -> "Corpus":
        """From a dense ``(n_docs, n_words)`` count matrix (documents are rows).

        A matrix has no vocabulary: column ``j`` *is* word ``j`` of ``vocab`` (or ``w{j}``), so the
        columns must be in the vocabulary's order, and a matrix for a fitted model must have its
        columns in the order of the model's vocabulary (a permutation is not detectable).
        """
        d, w, c, (D, W) = entries.dense_entries(matrix)
        return cls.from_entries(d, w, c, vocab=vocab, n_words=W, n_docs=D, **kwargs)

    @classmethod
    def from_sparse(cls, matrix, vocab: Sequence[str] | None = None, **kwargs) -> "Corpus":
        """From a scipy.sparse ``(n_docs, n_words)`` matrix, e.g. CountVectorizer's output.

        Columns are positional, as in :meth:`from_dense`: column ``j`` is word ``j`` of ``vocab``
        (``CountVectorizer.get_feature_names_out()`` for its output).  Without ``vocab`` the words
        are named ``w0, w1, ...`` (at most :data:`MAX_PLACEHOLDER_WORDS` of them); the matrix's
        shape is taken as given (its empty rows are empty documents).
        """
        if not entries.is_sparse_matrix(matrix):
            return cls.from_dense(matrix, vocab, **kwargs)
        D, W = matrix.shape
        rows, cols, data = entries.csr_entries(matrix)
        return cls.from_entries(rows, cols, data, vocab=vocab, n_words=W, n_docs=D, **kwargs)

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
        doc_ids, word_ids, counts, vocab, kwargs = build.list_entries(docs, vocab, kwargs)
        return cls.from_entries(doc_ids, word_ids, counts, vocab=vocab, **kwargs)

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
        ``max_df``, ``token_pattern``, ``lowercase`` ...); see
        :func:`topicjax.data.readers.texts.texts_entries`.
        """
        return cls._read(texts_entries(texts, labels=labels, empty_docs=empty_docs, doc_names=doc_names,
                                       **vectorizer_kwargs))

    @classmethod
    def from_text_folder(cls, path, **kwargs) -> "Corpus":
        """Read a folder of raw text files, one document per file, sub-folders as labels (see
        :func:`topicjax.data.readers.texts.text_folder_entries`)."""
        return cls._read(text_folder_entries(path, **kwargs))

    @classmethod
    def from_uci(cls, path, vocab_path=None, **kwargs) -> "Corpus":
        """Read a UCI bag-of-words corpus: a folder with ``docword.*.txt[.gz]`` and ``vocab.*.txt``,
        or the docword file itself (the format's rules and errors:
        :func:`topicjax.data.readers.uci.uci_entries`)."""
        return cls._read(uci_entries(path, vocab_path, **kwargs))

    @classmethod
    def from_vw(cls, path, **kwargs) -> "Corpus":
        """Read a Vowpal Wabbit text file (BigARTM's format, namespaces as modalities, ``@labels``
        as labels; see :func:`topicjax.data.readers.vw.vw_entries`)."""
        return cls._read(vw_entries(path, **kwargs))

    @classmethod
    def from_ldac(cls, path, vocab=None, **kwargs) -> "Corpus":
        """Read an lda-c file ``N id:count ...`` (see :func:`topicjax.data.readers.ldac.ldac_entries`)."""
        return cls._read(ldac_entries(path, vocab, **kwargs))

    @classmethod
    def from_tsv(cls, path, **kwargs) -> "Corpus":
        """Read a table of documents, one per line (``text[<TAB>partition]<TAB>label``, OCTIS's
        ``corpus.tsv``; see :func:`topicjax.data.readers.tsv.tsv_entries`)."""
        return cls._read(tsv_entries(path, **kwargs))

    @classmethod
    def load(cls, path) -> "Corpus":
        """Read any supported corpus path, choosing the reader from its form (see
        :func:`topicjax.data.formats.read_corpus`)."""
        return cls._read(read_entries(path))

    @classmethod
    def _read(cls, found: Entries) -> "Corpus":
        """The Corpus of what a reader found (its arrays are the reader's to hand over: not copied
        when already in order)."""
        return cls(**build.corpus_fields(found.doc_ids, found.word_ids, found.counts, copy=False, **found.options))

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
        return _frozen(entries.block_bincount(self.word_ids, self.n_words, self.counts))

    @cached_property
    def doc_frequency(self) -> np.ndarray:
        """Number of documents containing each word, ``int64 (n_words,)``."""
        return _frozen(entries.block_bincount(self.word_ids, self.n_words))

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
    def to_sparse(self) -> "scipy.sparse.csr_matrix":
        """``(n_docs, n_words)`` CSR matrix of counts."""
        import scipy.sparse as sp  # here: a corpus read from a file needs none of SciPy

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
        names = self.doc_names
        if names is not None and doc_index is not None:
            names = tuple(names[i] for i in doc_index)
        return Corpus.from_entries(
            doc_ids, word_ids, counts, vocab=self.vocab, n_docs=n_docs, labels=labels,
            label_names=self.label_names if labels is not None else None, modalities=self.modalities,
            modality_names=self.modality_names if self.modalities is not None else None, doc_names=names,
            empty_docs=empty_docs)

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
        split = completion_tokens if protocol == "tokens" else completion_words
        observed, heldout = split(self.counts, self.doc_offsets, fraction, np.random.default_rng(seed))
        obs = self._rebuild(self.doc_ids, self.word_ids, observed, n_docs=self.n_docs)
        held = self._rebuild(self.doc_ids, self.word_ids, heldout, n_docs=self.n_docs)
        return obs, held

    def with_vocab(self, vocab: Sequence[str], *, unknown: str = "drop", empty_docs: str = "error") -> "Corpus":
        """Re-index this corpus onto another vocabulary (e.g. a test corpus onto the training one).

        Words absent from ``vocab`` are dropped (``unknown="drop"``, the protocol of ARTM sec. 5)
        or make an error naming the first of them (``unknown="error"``).
        """
        vocab = tuple(vocab)
        keep, new_w, modalities = build.reindex(self.vocab, self.word_ids, self.modalities, vocab, unknown)
        return Corpus.from_entries(
            self.doc_ids[keep], new_w[keep], self.counts[keep], vocab=vocab, n_docs=self.n_docs, labels=self.labels,
            label_names=self.label_names if self.labels is not None else None, modalities=modalities,
            modality_names=self.modality_names if self.modalities is not None else None, doc_names=self.doc_names,
            empty_docs=empty_docs)

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
        m, names = build.labels_matrix(labels, label_names, self.n_docs)
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
