"""Reference topic coherence: C_V, C_NPMI, C_UCI over boolean sliding windows, and UMass.

The measures of Röder, Both and Hinneburg (2015, "Exploring the space of topic coherence
measures"), each a segmentation of the top words, a probability estimate, a confirmation measure
and an aggregation, computed as gensim's ``CoherenceModel`` computes them (equal to it to 1e-6 on
its own test corpus, see ``tests/evaluation/test_coherence.py``):

===========  ======================  =============================================  ==========
measure      segmentation            confirmation of a segment (W', W*)             window
===========  ======================  =============================================  ==========
``c_v``      one-set: (w_i, W)       cosine of the NPMI context vectors             110
                                     v(W') = (Σ_{w∈W'} NPMI(w, w_j)^γ)_{j=1..k}
``c_npmi``   one-one: (w_i, w_j)     NPMI = PMI / -log(P(w_i, w_j) + ε)             10
``c_uci``    one-one: (w_i, w_j)     PMI = log((P(w_i, w_j) + ε) / (P(w_i) P(w_j)))  10
``u_mass``   one-preceding: (w_i,    log((P(w_i, w_j) + ε) / P(w_j)), j ranked      documents
             w_j), j < i             above i; 0 when P(w_j) = 0
===========  ======================  =============================================  ==========

Each topic's value is the arithmetic mean over its segments (``c_v``: the k words; one-one: the
k(k-1) ordered pairs, the same mean as over unordered ones; ``u_mass``: the k(k-1)/2 pairs, a
*mean*, where :func:`topicjax.evaluation.metrics.coherence` with ``measure="umass"`` gives PTM eq. 33's
*sum*).  ε = 1e-12.  Probabilities are shares of boolean windows (see
:mod:`topicjax.evaluation.window_counts` for how windows are counted, gensim's way by default);
UMass uses documents as windows.  These differ from the document co-occurrence measures of
:func:`topicjax.evaluation.metrics.coherence` (ARTM eq. 58), which stay as they are.

Topics are given as Φ (``W x T``, or ``G x W x T`` for G models of a ``fit_many`` of one size,
or a list of ``W x T_g``), as fitted models (``phi_`` and ``vocab_``), as word lists or as id
arrays.  The counts of the union of all top words are computed once, on the device, and every
topic of every model is scored in one batched call (float64).

>>> from topicjax.evaluation.coherence import reference_coherence
>>> from topicjax.evaluation.reference_texts import ReferenceTexts
>>> ref = ReferenceTexts.from_token_lists([["a", "b"], ["a", "x", "b"], ["a", "c"], ["b"]])
>>> # documents: P(a) = P(b) = 3/4, P(a, b) = 2/4, P(a, c) = 1/4; UMass log(P(a, w) / P(a))
>>> reference_coherence([["a", "b"], ["a", "c"]], ref, measure="u_mass").round(4).tolist()  # log 2/3, log 1/3
[-0.4055, -1.0986]
>>> # windows of 2: [a b] [a x] [x b] [a c] [b]; P(a) = 3/5, P(b) = 3/5, P(a, b) = 1/5
>>> reference_coherence([["a", "b"]], ref, measure="c_uci", window=2).round(4).tolist()  # log (1/5) / (9/25)
[-0.5878]
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .window_counts import COUNTINGS, _padded_counts
from topicjax.core.compiled import jit

__all__ = ["reference_coherence", "topic_word_ids", "MEASURES", "DEFAULT_WINDOWS", "EPSILON"]

#: Default window of each measure (gensim's ``SLIDING_WINDOW_SIZES``); ``None``: whole documents.
DEFAULT_WINDOWS = {"c_v": 110, "c_npmi": 10, "c_uci": 10, "u_mass": None}
MEASURES = tuple(DEFAULT_WINDOWS)
#: ε of the direct confirmation measures (Röder et al. 2015; gensim's ``EPSILON``).
EPSILON = 1e-12


# ----------------------------------------------------------------------------- topics
def _is_model(x) -> bool:
    return hasattr(x, "phi_") and hasattr(x, "vocab_")


def _map_ids(ids: np.ndarray, vocab, ref_index: dict[str, int] | None) -> np.ndarray:
    """Ids into ``vocab`` -> ids into the reference vocabulary (``-1``: not in it)."""
    if ref_index is None:
        return ids
    table = np.array([ref_index.get(str(w), -1) for w in vocab], np.int64)
    return table[ids]


def _from_phi(phi, top_n: int, vocab, ref_vocab, ref_index, what: str):
    phi = np.asarray(phi)
    if phi.ndim != 2:
        raise ValueError(f"{what}: phi must be W x T, got shape {phi.shape}")
    if not np.all(np.isfinite(phi)):
        raise ValueError(f"{what}: phi contains non-finite values")
    W = phi.shape[0]
    if vocab is None:
        if W != len(ref_vocab):
            raise ValueError(f"{what}: phi has {W} words but the reference has {len(ref_vocab)}; pass vocab= "
                             "(the words of phi's rows) to match them by name")
        index = None
    else:
        if len(vocab) != W:
            raise ValueError(f"{what}: phi has {W} words but vocab has {len(vocab)}")
        index = None if tuple(map(str, vocab)) == tuple(ref_vocab) else ref_index
    if top_n > W:
        raise ValueError(f"{what}: top_n={top_n} is more than the {W} words of phi")
    order = np.argsort(-phi, axis=0, kind="stable")[:top_n].T  # (T, k)
    removed = ~np.any(phi > 0, axis=0)  # a zeroed (removed) topic has no top words
    return _map_ids(order, vocab, index), removed


def _from_words(topics, ref_index, what: str):
    rows = [list(t) for t in topics]
    if not rows:
        return np.zeros((0, 0), np.int64), np.zeros(0, bool)
    k = len(rows[0])
    for t, r in enumerate(rows):
        if isinstance(r, (str, bytes)) or len(r) != k:
            raise ValueError(f"{what}: topic {t} has {len(r)} words, topic 0 has {k}; give topics of one length")
        if len(set(r)) != len(r):
            raise ValueError(f"{what}: topic {t} repeats a word: {r}")
    ids = np.array([[ref_index.get(str(w), -1) for w in r] for r in rows], np.int64).reshape(len(rows), k)
    return ids, np.zeros(len(rows), bool)


def topic_word_ids(topics, ref_vocab: Sequence[str], *, vocab=None, top_n: int = 10):
    """Top words of every topic as ids into ``ref_vocab`` (``-1``: a word the reference lacks).

    Returns ``(groups, shape)``: ``groups`` is a list of ``(ids (T_g, k), removed (T_g,))``, one
    per model, and ``shape`` says how to return the scores: ``"flat"`` (one model, ``(T,)``),
    ``"stacked"`` (``(G, T)``) or ``"list"`` (a list of ``(T_g,)``).  See :func:`reference_coherence` for
    the accepted forms of ``topics``.
    """
    ref_vocab = tuple(ref_vocab)
    ref_index = {w: i for i, w in enumerate(ref_vocab)}

    def phi_group(phi, words, what):
        return _from_phi(phi, top_n, words, ref_vocab, ref_index, what)

    def own_vocab(model):
        return model.vocab_ if vocab is None else vocab

    seq = isinstance(topics, (list, tuple)) and len(topics) > 0
    if _is_model(topics):
        return [phi_group(topics.phi_, own_vocab(topics), "model")], "flat"
    if seq and all(_is_model(m) for m in topics):
        return [phi_group(m.phi_, own_vocab(m), f"model {g}") for g, m in enumerate(topics)], "list"
    if seq and all(isinstance(m, np.ndarray) and m.ndim == 2 and m.dtype.kind == "f" for m in topics):
        return [phi_group(m, vocab, f"phi {g}") for g, m in enumerate(topics)], "list"
    if hasattr(topics, "shape") and hasattr(topics, "dtype"):  # numpy or jax array
        arr = np.asarray(topics)
        if arr.dtype.kind == "f":
            if arr.ndim == 2:
                return [phi_group(arr, vocab, "phi")], "flat"
            if arr.ndim == 3:
                return [phi_group(p, vocab, f"phi {g}") for g, p in enumerate(arr)], "stacked"
            raise ValueError(f"phi must be W x T or G x W x T, got shape {arr.shape}")
        if arr.dtype.kind in "iu":
            if arr.ndim not in (2, 3):
                raise ValueError(f"word-id topics must be T x k or G x T x k, got shape {arr.shape}")
            words = ref_vocab if vocab is None else tuple(map(str, vocab))
            if arr.size and (arr.min() < 0 or arr.max() >= len(words)):
                raise ValueError(f"word ids must lie in [0, {len(words)})")
            grid = arr if arr.ndim == 3 else arr[None]
            groups = [_from_words([[words[i] for i in row] for row in g], ref_index, f"topics {n}")
                      for n, g in enumerate(grid)]
            return groups, ("stacked" if arr.ndim == 3 else "flat")
        if arr.dtype.kind not in "UO" or arr.ndim not in (2, 3):
            raise TypeError(f"cannot read topics from an array of dtype {arr.dtype} and shape {arr.shape}")
        topics = arr.tolist()
        seq = len(topics) > 0
    if isinstance(topics, (list, tuple)):
        nested = seq and all(isinstance(t, (list, tuple, np.ndarray)) and len(t) > 0 for t in topics) \
            and all(isinstance(x, (list, tuple, np.ndarray)) for x in topics[0])
        if nested:  # one list of topics per model
            return [_from_words(g, ref_index, f"model {n}") for n, g in enumerate(topics)], "list"
        return [_from_words(topics, ref_index, "topics")], "flat"
    raise TypeError("topics must be a fitted model, phi (W x T or G x W x T), word lists or word-id arrays, "
                    f"got {type(topics).__name__}")


# ----------------------------------------------------------------------------- scores
@partial(jit, static_argnames=("measure", "gamma"))
def _scores(n, occ, co, top, eps, *, measure: str, gamma: float):
    """Coherence of every topic (rows of ``top``: indices into the counted words); float64."""
    n = n.astype(jnp.float64)
    p = occ[top].astype(jnp.float64) / n  # (B, k)
    pij = co[top[:, :, None], top[:, None, :]].astype(jnp.float64) / n  # (B, k, k)
    k = top.shape[1]
    if measure == "u_mass":
        # segment (w_i, w_j), j < i: log((P(w_i, w_j) + ε) / P(w_j)); gensim scores 0 if P(w_j) = 0
        pj = jnp.broadcast_to(p[:, None, :], pij.shape)
        lc = jnp.where(pj > 0, jnp.log((pij + eps) / jnp.where(pj > 0, pj, 1.0)), 0.0)
        below = jnp.tril(jnp.ones((k, k), bool), -1)
        return jnp.sum(jnp.where(below, lc, 0.0), axis=(1, 2)) / (k * (k - 1) / 2)
    pmi = jnp.log((pij + eps) / (p[:, :, None] * p[:, None, :]))
    off = ~jnp.eye(k, dtype=bool)
    if measure == "c_uci":
        return jnp.sum(jnp.where(off, pmi, 0.0), axis=(1, 2)) / (k * (k - 1))
    npmi = pmi / -jnp.log(pij + eps)
    if measure == "c_npmi":
        return jnp.sum(jnp.where(off, npmi, 0.0), axis=(1, 2)) / (k * (k - 1))
    # c_v: context vector of w_i is row i of NPMI^γ over the topic's words; that of W is their sum
    m = npmi if gamma == 1.0 else npmi ** gamma
    whole = jnp.sum(m, axis=1)  # (B, k): Σ_i m[i, j]
    dots = jnp.einsum("bij,bj->bi", m, whole)
    norms = jnp.sqrt(jnp.sum(m * m, axis=2)) * jnp.sqrt(jnp.sum(whole * whole, axis=1))[:, None]
    return jnp.mean(dots / norms, axis=1)


def _bucket_rows(n: int) -> int:
    """``n`` topics rounded up to a power of two (at least 8)."""
    return max(8, 1 << int(np.ceil(np.log2(max(n, 1)))))


def _chunks(ids: np.ndarray, max_union: int):
    """Consecutive ranges of topics whose union of words has at most ``max_union`` words."""
    start, seen = 0, set()
    for t in range(ids.shape[0]):
        words = set(ids[t][ids[t] >= 0].tolist())
        if t > start and len(seen | words) > max_union:
            yield start, t
            start, seen = t, set()
        seen |= words
    yield start, ids.shape[0]


def reference_coherence(
    topics,
    reference,
    *,
    measure: str | Sequence[str] = "c_v",
    top_n: int = 10,
    vocab: Sequence[str] | None = None,
    window: int | None | str = "default",
    counting: str = "gensim",
    eps: float = EPSILON,
    gamma: float = 1.0,
    missing: str = "error",
    max_union: int = 4096,
):
    """Coherence of every topic against a reference corpus (Röder et al. 2015; gensim's values).

    Parameters
    ----------
    topics:
        * a fitted model with ``phi_`` (W x T) and ``vocab_``, or a list of them;
        * Φ as an array ``W x T`` (or ``G x W x T``: the models of a ``fit_many`` of one size),
          or a list of ``W x T_g`` arrays; the ``top_n`` most probable words of each column are
          scored, and an all-zero column (a topic removed or zeroed by sparsing) scores NaN;
        * word lists: ``[["w1", "w2", ...], ...]`` (T topics of k words, in rank order) or a list
          of such lists (one per model); integer arrays ``T x k`` / ``G x T x k`` of word ids.
    reference:
        :class:`~topicjax.evaluation.reference_texts.ReferenceTexts` (token order kept; needed for
        the windows).  ``u_mass`` also accepts a :class:`~topicjax.data.corpus.Corpus`.
    measure:
        ``"c_v"``, ``"c_npmi"``, ``"c_uci"``, ``"u_mass"``, or a sequence of them: a dict of
        results is then returned (measures with the same window share one count).
    vocab:
        The words of Φ's rows (or of the ids) when they are not the reference's; words are then
        matched by name.  A model's ``vocab_`` is used by default.
    window:
        Window size; ``"default"`` is 110 for ``c_v``, 10 for ``c_npmi`` and ``c_uci``, documents
        (``None``) for ``u_mass``.
    counting:
        ``"gensim"`` (default, gensim's incremental window update) or ``"exact"`` (a word counts
        in every window it occurs in); see :mod:`topicjax.evaluation.window_counts`.
    eps, gamma:
        ε of the confirmation measures and γ of C_V's context vectors.
    missing:
        A top word the reference lacks (not in its vocabulary, or never in it) makes the measures
        undefined: ``"error"`` (default) names it; ``"nan"`` scores that topic NaN.
    max_union:
        At most this many distinct words are counted together (a ``U x U`` int32 matrix); more
        topics are processed in consecutive groups.

    Returns
    -------
    ``(T,)`` for one model, ``(G, T)`` for a ``G x W x T`` Φ or ``G x T x k`` ids, a list of
    ``(T_g,)`` arrays for a list of models or arrays; a dict of these for several measures.
    """
    measures = (measure,) if isinstance(measure, str) else tuple(measure)
    for m in measures:
        if m not in DEFAULT_WINDOWS:
            raise ValueError(f"unknown coherence measure {m!r}; known: {MEASURES}")
    if counting not in COUNTINGS:
        raise ValueError(f"counting must be one of {COUNTINGS}, got {counting!r}")
    if missing not in ("error", "nan"):
        raise ValueError(f"missing must be 'error' or 'nan', got {missing!r}")
    if int(top_n) != top_n or top_n < 2:
        raise ValueError(f"top_n must be an integer >= 2, got {top_n!r}")
    if int(max_union) != max_union or max_union < 1:
        raise ValueError(f"max_union must be a positive integer, got {max_union!r}")
    if not np.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite non-negative number, got {eps!r}")
    groups, shape = topic_word_ids(topics, reference.vocab, vocab=vocab, top_n=int(top_n))
    ks = {g[0].shape[1] for g in groups if g[0].shape[0]}
    if len(ks) > 1:
        raise ValueError(f"the topics have different numbers of words ({sorted(ks)})")
    k = ks.pop() if ks else int(top_n)
    if k < 2:
        raise ValueError("a topic needs at least 2 words")
    ids = np.concatenate([g[0] for g in groups]).reshape(-1, k)
    removed = np.concatenate([g[1] for g in groups])

    windows: dict[object, list[str]] = {}
    for m in measures:
        w = DEFAULT_WINDOWS[m] if isinstance(window, str) and window == "default" else window
        if m == "u_mass" and w is not None:
            raise ValueError("u_mass counts documents; leave window at its default (None)")
        windows.setdefault(w, []).append(m)

    out = {m: np.full(ids.shape[0], np.nan) for m in measures}
    live = np.flatnonzero(~removed)
    for w, ms in windows.items():
        for s, e in _chunks(ids[live], int(max_union)):
            rows = live[s:e]
            if rows.size == 0:
                continue
            sub = ids[rows]
            union = np.unique(sub[sub >= 0])
            _, n_windows, occ_dev, co_dev = _padded_counts(reference, union, window=w, counting=counting)
            occ = np.asarray(occ_dev)
            local = np.searchsorted(union, np.where(sub >= 0, sub, union[0] if union.size else 0))
            absent = (sub < 0) | (occ[local] == 0) if union.size else np.ones_like(sub, bool)
            if absent.any() and missing == "error":
                t, j = np.argwhere(absent)[0]
                word = (reference.vocab[sub[t, j]] if sub[t, j] >= 0 else "(not in the reference vocabulary)")
                where = "has no window" if sub[t, j] >= 0 else "is unknown"
                raise ValueError(f"topic {int(rows[t])}: top word {j} {word!r} {where} in the reference "
                                 f"({int(absent.any(1).sum())} topics have such words); use missing='nan' to "
                                 "score them NaN")
            # the topics padded to a power of two with copies of the first (their scores dropped):
            # the compiled programs then depend on the padded sizes only, not on each call's
            top = np.concatenate([local, np.repeat(local[:1], _bucket_rows(len(rows)) - len(rows), axis=0)])
            with jax.enable_x64(True):
                for m in ms:
                    vals = np.asarray(_scores(jnp.asarray(n_windows, jnp.int64), occ_dev, co_dev, jnp.asarray(top),
                                              jnp.float64(eps), measure=m, gamma=float(gamma)))[:len(rows)]
                    out[m][rows] = np.where(absent.any(1), np.nan, vals)

    def shaped(v: np.ndarray):
        if shape == "flat":
            return v
        sizes = np.cumsum([g[0].shape[0] for g in groups])[:-1]
        parts = np.split(v, sizes)
        return np.stack(parts) if shape == "stacked" else parts

    res = {m: shaped(v) for m, v in out.items()}
    return res[measure] if isinstance(measure, str) else res
