"""Resolution of a regularizer's arguments against the model it is bound to (:class:`Context`):
topic names and subsets, modalities, word and document ids, prior distributions.  Every function
raises ``ValueError`` with a clear message; :meth:`Term.bind` prefixes the regularizer's name."""

from __future__ import annotations

import numpy as np

from topicjax.regularizers.base import Context

__all__ = ["topic_mask", "topic_index", "row_mask", "doc_lengths", "word_distribution", "topic_distribution",
           "doc_index", "word_index", "check_rate", "as_data", "spec"]


def spec(factory: str, **kwargs) -> dict:
    """The JSON spec ``{"factory": name, "kwargs": {...}}`` that rebuilds a pool member."""
    return {"factory": factory, "kwargs": kwargs}


def as_data(x) -> np.ndarray:
    """Floating data of a regularizer as float64 numpy (cast to the model's dtype when bound)."""
    return np.asarray(x, np.float64)


def topic_mask(topics, ctx: Context) -> np.ndarray:
    """Boolean mask of the topics a regularizer acts on: ``None`` (all), ``"specific"``,
    ``"background"``, a topic name or index, or a list of those."""
    T = ctx.n_topics
    if topics is None:
        return np.ones(T, bool)
    if isinstance(topics, str) and topics in ("specific", "background"):
        bg = np.zeros(T, bool)
        bg[list(ctx.background)] = True
        if topics == "background":
            if not bg.any():
                raise ValueError("topics='background' but the model has no background topics (set background_topics)")
            return bg
        if bg.all():
            raise ValueError("topics='specific' but every topic is a background topic")
        return ~bg
    if isinstance(topics, (str, int, np.integer)):
        topics = [topics]
    mask = np.zeros(T, bool)
    for t in topics:
        mask[topic_index(t, ctx)] = True
    return mask


def topic_index(t, ctx: Context) -> int:
    names = list(ctx.topic_names)
    if isinstance(t, str):
        if t in names:
            return names.index(t)
        if t.lstrip("-").isdigit():  # a JSON-decoded index
            t = int(t)
        else:
            shown = names if len(names) <= 8 else names[:8] + ["..."]
            raise ValueError(f"unknown topic {t!r}; the topics are {shown}")
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
        raise ValueError(f"a topic must be an index or a name, got {t!r}")
    if not 0 <= int(t) < ctx.n_topics:
        raise ValueError(f"topic index {int(t)} is outside [0, {ctx.n_topics})")
    return int(t)


def row_mask(modalities, ctx: Context) -> np.ndarray:
    """Rows of Φ a Φ-regularizer acts on: the word rows (default) or the named modalities."""
    if modalities is None:
        return ctx.word_rows
    if isinstance(modalities, str):
        modalities = [modalities]
    mask = np.zeros(ctx.n_words, bool)
    for m in modalities:
        if m not in ctx.modality_names:
            raise ValueError(f"unknown modality {m!r}; the model has {list(ctx.modality_names)}")
        mask |= ctx.row_modality == ctx.modality_names.index(m)
    return mask


def doc_lengths(ctx: Context, who: str) -> np.ndarray:
    if ctx.doc_lengths is None:
        raise ValueError(f"{who} needs the document lengths: bind it to a corpus (Context.build)")
    return np.asarray(ctx.doc_lengths, np.float64)


def word_distribution(beta, ctx: Context, rows: np.ndarray, who: str) -> np.ndarray:
    """β over the rows of Φ: None -> 1 per word, 'uniform' -> 1/|W|, 'background' -> n_w / n,
    or a given array over the words (all rows of Φ, or only the word rows)."""
    W = ctx.n_words
    if beta is None:
        return rows.astype(np.float64)
    if isinstance(beta, str):
        if beta == "uniform":
            return rows / max(rows.sum(), 1)
        if beta == "background":
            if ctx.corpus is None:
                raise ValueError(f"{who}: beta='background' needs the corpus (n_w / n)")
            counts = np.zeros(W)
            wc = np.asarray(ctx.corpus.word_counts, np.float64)
            counts[np.flatnonzero(ctx.word_rows)[: wc.size]] = wc
            counts = counts * rows
            return counts / max(counts.sum(), 1e-300)
        raise ValueError(f"{who}: beta must be None, 'uniform', 'background' or an array, got {beta!r}")
    b = np.asarray(beta, np.float64)
    n_word_rows = int(ctx.word_rows.sum())
    if b.shape == (n_word_rows,) and n_word_rows != W:
        full = np.zeros(W)
        full[ctx.word_rows] = b
        b = full
    if b.shape != (W,):
        raise ValueError(f"{who}: beta has shape {b.shape}, expected ({W},)")
    if not np.all(np.isfinite(b)) or (b < 0).any():
        raise ValueError(f"{who}: beta must be finite and non-negative")
    return b * rows


def topic_distribution(alpha, ctx: Context, who: str) -> np.ndarray:
    T = ctx.n_topics
    if alpha is None:
        return np.ones(T)
    if isinstance(alpha, str):
        if alpha == "uniform":
            return np.full(T, 1.0 / T)
        raise ValueError(f"{who}: alpha must be None, 'uniform' or an array, got {alpha!r}")
    a = np.asarray(alpha, np.float64)
    if a.shape != (T,):
        raise ValueError(f"{who}: alpha has shape {a.shape}, expected ({T},)")
    if not np.all(np.isfinite(a)) or (a < 0).any():
        raise ValueError(f"{who}: alpha must be finite and non-negative")
    return a


def doc_index(d, n_docs: int, who: str) -> int:
    if isinstance(d, str) and d.lstrip("-").isdigit():
        d = int(d)
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
        raise ValueError(f"{who}: document {d!r} is not an index")
    if not 0 <= int(d) < n_docs:
        raise ValueError(f"{who}: document {int(d)} does not exist (the corpus has {n_docs} documents)")
    return int(d)



def check_rate(rate, who):
    if rate is None:
        return None
    rate = float(rate)
    if not 0.0 < rate < 1.0:
        raise ValueError(f"{who}: rate must be in (0, 1), got {rate}")
    return rate


def word_index(w, ctx: Context, who: str) -> int:
    vocab = ctx.vocab
    if isinstance(w, (int, np.integer)) and not isinstance(w, bool):
        if not 0 <= int(w) < ctx.n_words:
            raise ValueError(f"{who}: word index {int(w)} is outside [0, {ctx.n_words})")
        return int(w)
    index = getattr(ctx, "_vocab_index", None)
    if index is None:
        index = {v: i for i, v in enumerate(vocab)}
        object.__setattr__(ctx, "_vocab_index", index)
    if w not in index:
        raise ValueError(f"{who}: word {w!r} is not in the vocabulary")
    return index[w]
