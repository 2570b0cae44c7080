"""Reference texts for sliding-window coherence: documents kept as ordered token-id sequences.

A bag of words (:class:`~topicjax.data.corpus.Corpus`) has lost the order of the tokens, which the
boolean sliding windows of C_V, C_NPMI and C_UCI (Röder, Both, Hinneburg 2015) need.
:class:`ReferenceTexts` keeps it: the token ids of every document, concatenated, with the offsets
of the documents.  A token outside the vocabulary (a stop word, a rare word dropped by
``min_df``) is kept as a *gap* (id ``-1``): it occupies a position, so it widens no window and
merges no two documents, exactly as gensim's ``CoherenceModel`` treats the tokens of its texts
that are not top words of a topic.

>>> from topicjax.evaluation.reference_texts import ReferenceTexts
>>> ref = ReferenceTexts.from_texts(["The cat sat on the mat.", "A dog!"], vocab=["cat", "dog", "mat"])
>>> ref.n_docs, ref.n_tokens, ref.n_gaps  # "a" is too short for the default token pattern
(2, 7, 4)
>>> ref.documents()[0]
[None, 'cat', None, None, None, 'mat']
>>> ref.n_windows(3)  # 6 - 3 + 1 windows in the first document, one in the second (shorter)
5
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

__all__ = ["ReferenceTexts", "DEFAULT_TOKEN_PATTERN"]

#: scikit-learn ``CountVectorizer``'s default: runs of two or more word characters.
DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"


def _vocab_index(vocab) -> tuple[tuple[str, ...], dict[str, int]]:
    vocab = tuple(str(v) for v in vocab)
    index: dict[str, int] = {}
    for i, w in enumerate(vocab):
        if w in index:
            raise ValueError(f"vocabulary entry {w!r} appears twice (positions {index[w]} and {i})")
        index[w] = i
    return vocab, index


@dataclass(frozen=True, eq=False)
class ReferenceTexts:
    """Ordered token ids of a reference corpus (immutable).

    Attributes
    ----------
    token_ids:
        ``int32 (n_tokens,)``: the tokens of all documents, concatenated in order; ``-1`` for a
        token outside ``vocab`` (a gap).
    doc_offsets:
        ``int64 (n_docs + 1,)``: document ``d`` is ``token_ids[doc_offsets[d]:doc_offsets[d+1]]``.
        Empty documents are kept (gensim counts one window for each, see :meth:`n_windows`).
    vocab:
        Tuple of the ``n_words`` words the ids refer to.

    Build it with :meth:`from_texts` (raw strings and a tokenizer), :meth:`from_token_lists`
    (already tokenised documents) or :meth:`from_ids`.
    """

    token_ids: np.ndarray
    doc_offsets: np.ndarray
    vocab: tuple[str, ...]

    def __post_init__(self):
        ids = np.asarray(self.token_ids)
        off = np.asarray(self.doc_offsets)
        if ids.ndim != 1 or off.ndim != 1 or off.size < 1:
            raise ValueError("token_ids and doc_offsets must be one-dimensional (doc_offsets holds n_docs + 1 values)")
        if off[0] != 0 or off[-1] != ids.size or np.any(np.diff(off) < 0):
            raise ValueError(f"doc_offsets must rise from 0 to n_tokens = {ids.size}")
        if ids.size and (ids.min() < -1 or ids.max() >= len(self.vocab)):
            bad = int(np.flatnonzero((ids < -1) | (ids >= len(self.vocab)))[0])
            doc = int(np.searchsorted(off, bad, side="right") - 1)
            raise ValueError(f"document {doc}, token {bad - int(off[doc])}: id {int(ids[bad])} is outside "
                             f"[-1, {len(self.vocab)})")
        object.__setattr__(self, "token_ids", ids.astype(np.int32, copy=False))
        object.__setattr__(self, "doc_offsets", off.astype(np.int64, copy=False))
        object.__setattr__(self, "vocab", tuple(self.vocab))

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_ids(cls, docs: Iterable[Sequence[int]], vocab: Sequence[str]) -> "ReferenceTexts":
        """From documents given as sequences of word ids into ``vocab`` (``-1`` marks a gap)."""
        vocab, _ = _vocab_index(vocab)
        arrays = [np.asarray(d, np.int64).reshape(-1) for d in docs]
        lengths = np.array([a.size for a in arrays], np.int64)
        ids = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
        return cls(ids, np.concatenate([[0], np.cumsum(lengths)]), vocab)

    @classmethod
    def from_token_lists(cls, docs: Iterable[Sequence[str]], vocab: Sequence[str] | None = None) -> "ReferenceTexts":
        """From tokenised documents (sequences of strings, e.g. gensim's ``texts``).

        With ``vocab`` (e.g. a model's ``vocab_``), tokens outside it become gaps; without it the
        vocabulary is every distinct token, sorted.
        """
        docs = [list(d) for d in docs]
        for i, d in enumerate(docs):
            bad = next((t for t in d if not isinstance(t, str)), None)
            if bad is not None:
                raise TypeError(f"document {i}: token {bad!r} is a {type(bad).__name__}, not a string")
        if vocab is None:
            vocab = sorted({t for d in docs for t in d})
        vocab, index = _vocab_index(vocab)
        lengths = np.array([len(d) for d in docs], np.int64)
        get = index.get
        ids = np.fromiter((get(t, -1) for d in docs for t in d), np.int64, count=int(lengths.sum()))
        return cls(ids, np.concatenate([[0], np.cumsum(lengths)]), vocab)

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        vocab: Sequence[str] | None = None,
        *,
        tokenizer: Callable[[str], Sequence[str]] | None = None,
        token_pattern: str = DEFAULT_TOKEN_PATTERN,
        lowercase: bool = True,
    ) -> "ReferenceTexts":
        """Tokenise raw strings, keeping the order of the tokens.

        The default tokenizer is scikit-learn ``CountVectorizer``'s (lower-case, then the tokens
        matching ``token_pattern``), so a reference built with the ``vocab`` of a corpus made by
        :meth:`Corpus.from_texts` with the same ``token_pattern`` finds every word of it.  Stop
        words and words the vectorizer dropped stay as gaps: do not remove them, or windows
        would span more text than ``window`` tokens.  ``tokenizer`` (``str -> list of str``)
        replaces the pattern and the lower-casing.
        """
        if isinstance(texts, (str, bytes)):
            raise TypeError("texts must be a sequence of documents, not a single string")
        if tokenizer is None:
            pattern = re.compile(token_pattern)

            def tokenizer(text: str) -> list[str]:
                return pattern.findall(text.lower() if lowercase else text)

        docs = []
        for i, t in enumerate(texts):
            if isinstance(t, bytes):
                raise TypeError(f"text {i} is bytes; decode it first (e.g. t.decode('latin-1'))")
            if not isinstance(t, str):
                raise TypeError(f"text {i} is a {type(t).__name__}, not a string")
            docs.append(tokenizer(t))
        return cls.from_token_lists(docs, vocab)

    # ------------------------------------------------------------------ properties
    @property
    def n_docs(self) -> int:
        return int(self.doc_offsets.size - 1)

    @property
    def n_tokens(self) -> int:
        """Positions, gaps included."""
        return int(self.token_ids.size)

    @property
    def n_words(self) -> int:
        return len(self.vocab)

    @property
    def n_gaps(self) -> int:
        """Tokens outside the vocabulary."""
        return int(np.count_nonzero(self.token_ids < 0))

    @property
    def doc_lengths(self) -> np.ndarray:
        """Positions per document (gaps included), ``int64 (n_docs,)``."""
        return np.diff(self.doc_offsets)

    def n_windows(self, window: int | None) -> int:
        """Number of boolean sliding windows of ``window`` tokens (gensim's counting):
        ``max(1, n_d - window + 1)`` per document, so a document shorter than the window, and
        even an empty one, is one window.  ``window=None``: one window per document."""
        if window is None:
            return self.n_docs
        return int(np.maximum(1, self.doc_lengths - int(window) + 1).sum())

    def documents(self) -> list[list[str | None]]:
        """The documents as lists of words, ``None`` for a gap (for inspection)."""
        words = np.array(list(self.vocab) + [None], dtype=object)
        off = self.doc_offsets
        return [words[self.token_ids[off[d]:off[d + 1]]].tolist() for d in range(self.n_docs)]

    def __repr__(self) -> str:
        return (f"ReferenceTexts(n_docs={self.n_docs}, n_tokens={self.n_tokens}, n_words={self.n_words}, "
                f"n_gaps={self.n_gaps})")
