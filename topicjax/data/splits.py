"""The document-completion splits of held-out evaluation, on a corpus's CSR arrays.

:meth:`topicjax.data.corpus.Corpus.completion_split` builds its two corpora from the counts these
give: every document keeps at least one token on each side, and a document too short to be split
is an error naming it.

>>> import numpy as np
>>> counts, offsets = np.array([3, 1, 2]), np.array([0, 2, 3])
>>> obs, held = completion_tokens(counts, offsets, 0.5, np.random.default_rng(0))
>>> (obs + held).tolist() == counts.tolist(), bool(obs[:2].sum() and held[:2].sum() and obs[2] and held[2])
(True, True)
"""

from __future__ import annotations

import numpy as np

from topicjax.data.entries import CorpusError

__all__ = ["completion_tokens", "completion_words"]


def completion_tokens(counts: np.ndarray, off: np.ndarray, fraction: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """ARTM sec. 5: each token of a document goes to the observed part with probability
    ``fraction`` (tokens are split, not distinct words, so a word may be on both sides); returns
    the observed and held-out counts of every entry."""
    n_docs = off.size - 1
    total = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    lengths = total[off[1:]] - total[off[:-1]]  # tokens per document
    short = np.flatnonzero(lengths < 2)
    if short.size:
        raise CorpusError(
            f"document {int(short[0])} has {int(lengths[short[0]])} token(s); "
            "document completion needs at least 2"
        )
    observed = rng.binomial(counts, fraction).astype(np.int64)
    heldout = counts - observed
    # Guarantee both parts are non-empty: move one token across where a side is empty.
    for d in range(n_docs):
        s, e = off[d], off[d + 1]
        if observed[s:e].sum() == 0:
            j = s + int(rng.integers(e - s))
            observed[j] += 1
            heldout[j] -= 1
        elif heldout[s:e].sum() == 0:
            j = s + int(rng.integers(e - s))
            observed[j] -= 1
            heldout[j] += 1
    return observed, heldout


def completion_words(counts: np.ndarray, off: np.ndarray, fraction: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """PTM sec. 7, eq. 32: the distinct words of each document split into two disjoint sets;
    returns the observed and held-out counts of every entry."""
    n_docs = off.size - 1
    n_distinct = off[1:] - off[:-1]
    short = np.flatnonzero(n_distinct < 2)
    if short.size:
        raise CorpusError(
            f"document {int(short[0])} has {int(n_distinct[short[0]])} distinct word(s); "
            "the disjoint-words completion needs at least 2"
        )
    side = rng.random(counts.size) < fraction
    for d in range(n_docs):
        s, e = off[d], off[d + 1]
        if side[s:e].all() or not side[s:e].any():
            j = s + int(rng.integers(e - s))
            side[j] = not side[j]
    observed = np.where(side, counts, 0)
    heldout = np.where(side, 0, counts)
    return observed, heldout
