"""Synthetic corpora at the size of real ones: planted Zipf-shaped topics, Dirichlet θ, lognormal
document lengths, generated in chunks of documents.

The generative process is LDA's with fixed topics: for each document ``d``, a length
``n_d ~ 1 + LogNormal`` (mean ``mean_length``), ``θ_d ~ Dirichlet(alpha)`` over ``n_topics``, and
for each token a topic ``z ~ θ_d`` and a word ``w ~ φ_z``.  The topics are Zipf-shaped and
overlapping, as real ones are: word ``w`` has a global rank ``r_w`` (a random permutation of the
vocabulary), topic ``k`` ranks the words by ``log r_w + spread · ε_kw`` (``ε`` standard normal), and
``φ_kw ∝ (rank_k(w) + 1)^(-zipf)``; so every topic is a Zipf law over the vocabulary, topics share
their most frequent words more often than not, and the corpus-wide frequencies are Zipf-like.

Tokens are drawn without any ``(tokens x topics)`` or ``(documents x words)`` temporary: the
tokens of a chunk are grouped by topic, each topic's words come from sorted uniforms (spacings of
exponentials) merged against its cumulative distribution in one pass, and are then shuffled within
the topic; repeated (document, word) pairs are merged into counts by one sort of the chunk's keys.
The work is O(tokens) per chunk plus one sort, and memory is bounded by the chunk.

The same arguments give the same corpus, chunk size included (each chunk has its own seeded
stream, so chunks can be generated in any order or in parallel).

>>> from topicjax.data import synthetic
>>> gen = synthetic.LDAGenerator(n_docs=50, n_words=200, mean_length=40, n_topics=5, seed=0)
>>> chunk = next(gen.chunks(chunk_docs=50))
>>> chunk.offsets.shape, int(chunk.counts.sum()) == int(chunk.lengths.sum())
((51,), True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, NamedTuple

import numpy as np

__all__ = ["LDAGenerator", "Chunk", "PRESETS"]

#: Statistics of the UCI bag-of-words sets (documents, vocabulary, mean tokens per document).
PRESETS = {
    "nytimes": dict(n_docs=300_000, n_words=102_660, mean_length=332.0),
    "pubmed": dict(n_docs=8_200_000, n_words=141_043, mean_length=89.0),
    "kos": dict(n_docs=3_430, n_words=6_906, mean_length=136.6),
}


class Chunk(NamedTuple):
    """Documents ``first .. first + len(lengths) - 1`` in CSR form (words sorted within a
    document), their token counts and their true topic proportions (``n_topics x docs``)."""

    first: int
    offsets: np.ndarray  # (docs + 1,) int64, starting at 0
    word_ids: np.ndarray  # (nnz,) int32
    counts: np.ndarray  # (nnz,) int32
    lengths: np.ndarray  # (docs,) int64 tokens per document
    theta: np.ndarray  # (n_topics, docs) float32


@dataclass(frozen=True)
class LDAGenerator:
    """A seeded synthetic corpus (see the module docstring); nothing is drawn until
    :meth:`chunks` or :meth:`phi` is called."""

    n_docs: int
    n_words: int
    mean_length: float
    n_topics: int
    seed: int = 0
    alpha: float = 0.1
    zipf: float = 1.07
    spread: float = 1.5
    length_sigma: float = 0.8

    def __post_init__(self):
        for name in ("n_docs", "n_words", "n_topics"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("mean_length", "alpha", "zipf"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if not self.mean_length >= 1:
            raise ValueError(f"mean_length must be at least 1 token, got {self.mean_length!r}")
        for name in ("spread", "length_sigma"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")

    # ------------------------------------------------------------------ topics
    def _topic_ranks(self) -> np.ndarray:
        """(n_topics, n_words) int32: the rank of each word in each topic."""
        rng = np.random.default_rng([self.seed, 0])
        global_rank = rng.permutation(self.n_words).astype(np.float64)
        ranks = np.empty((self.n_topics, self.n_words), np.int32)
        log_r = np.log1p(global_rank)
        for k in range(self.n_topics):
            score = log_r + self.spread * rng.standard_normal(self.n_words)
            ranks[k, np.argsort(score, kind="stable")] = np.arange(self.n_words, dtype=np.int32)
        return ranks

    def _zipf_weights(self) -> np.ndarray:
        w = (np.arange(self.n_words, dtype=np.float64) + 1.0) ** (-self.zipf)
        return w / w.sum()

    def phi(self) -> np.ndarray:
        """The true topics, ``(n_words, n_topics)`` float64 columns summing to 1."""
        return self._zipf_weights()[self._topic_ranks()].T.copy()

    # ------------------------------------------------------------------ documents
    def chunks(self, chunk_docs: int = 20_000, start: int = 0, stop: int | None = None) -> Iterator[Chunk]:
        """Yield the documents ``start .. stop - 1`` in chunks of ``chunk_docs`` (the last may be
        shorter).  A chunk's draws depend on the seed and its first document only."""
        if int(chunk_docs) < 1:
            raise ValueError(f"chunk_docs must be a positive integer, got {chunk_docs!r}")
        stop = self.n_docs if stop is None else min(int(stop), self.n_docs)
        ranks = self._topic_ranks()
        # a word by rank, per topic, and the Zipf CDF over ranks (the same for every topic)
        word_of_rank = np.argsort(ranks, axis=1).astype(np.int32)
        cdf = np.cumsum(self._zipf_weights())
        cdf[-1] = 1.0
        for first in range(int(start), stop, int(chunk_docs)):
            yield self._chunk(first, min(first + int(chunk_docs), stop), word_of_rank, cdf)

    def _chunk(self, first: int, last: int, word_of_rank: np.ndarray, cdf: np.ndarray) -> Chunk:
        rng = np.random.default_rng([self.seed, 1, first, last])
        n, T, W = last - first, self.n_topics, self.n_words
        # 1 + LogNormal with the requested mean: E[exp(N(mu, s^2))] = exp(mu + s^2 / 2)
        s = self.length_sigma
        mu = np.log(max(self.mean_length - 1.0, 1e-3)) - 0.5 * s * s
        lengths = 1 + np.floor(rng.lognormal(mu, s, size=n) + rng.random(n)).astype(np.int64)
        theta = rng.dirichlet(np.full(T, self.alpha), size=n)  # (n, T)
        # topic counts per document, then topic of each token grouped by topic: no token x T array
        per_topic = np.zeros((n, T), np.int64)
        for d0 in range(0, n, 4096):  # rng.multinomial over rows: bounded temporaries
            per_topic[d0:d0 + 4096] = rng.multinomial(lengths[d0:d0 + 4096], theta[d0:d0 + 4096])
        total = int(lengths.sum())
        docs = np.empty(total, np.int64)
        words = np.empty(total, np.int64)
        pos = 0
        doc_index = np.arange(n, dtype=np.int64)
        for k in range(T):
            m_k = per_topic[:, k]
            c = int(m_k.sum())
            if c == 0:
                continue
            # c sorted uniforms (exponential spacings), merged against the Zipf CDF, then shuffled
            e = rng.standard_exponential(c + 1)
            u = np.cumsum(e[:-1]) / e.sum()
            r = np.searchsorted(cdf, u, side="right")
            np.minimum(r, W - 1, out=r)
            w = word_of_rank[k][r]
            rng.shuffle(w)
            docs[pos:pos + c] = np.repeat(doc_index, m_k)
            words[pos:pos + c] = w
            pos += c
        keys = docs * W + words
        del docs, words
        keys.sort()
        new = np.empty(total, bool)
        new[0] = True
        np.not_equal(keys[1:], keys[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        counts = np.diff(np.append(starts, total)).astype(np.int32)
        uniq = keys[starts]
        doc_of = uniq // W
        word_ids = (uniq - doc_of * W).astype(np.int32)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(doc_of, minlength=n), out=offsets[1:])
        return Chunk(first, offsets, word_ids, counts, lengths, theta.T.astype(np.float32))
