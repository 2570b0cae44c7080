"""The structure of an ARTM model, built on the host from the estimator's settings and a corpus:
topic names and background topics, modalities and their weights, classes (ARTM Theorem 3), the
weighted token counts moved to the device, and the regularizer bound to all of that.

Everything here runs once per fit (or per ``transform``); the iterations themselves are the
compiled step of :mod:`topicjax.artm.algorithm`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.artm.algorithm import EMAux
from topicjax.core import layout, sharding
from topicjax.regularizers import LABELS_MODALITY, Context
from topicjax.regularizers.resolve import topic_index
from topicjax.regularizers.schedules import is_number

__all__ = ["Structure", "FitProblem", "topic_structure", "modality_structure", "class_frequencies", "weighted_entries",
           "device_data", "context", "aux_arrays"]


@dataclass
class Structure:
    """Host-side description of one ARTM model (what a fit and ``transform`` share)."""

    corpus: Any
    names: tuple
    background: tuple
    row_mod: np.ndarray
    mod_names: tuple
    weights: np.ndarray
    classes: tuple = ()
    class_freq: np.ndarray | None = None
    labels: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return int(self.row_mod.size)


class FitProblem(NamedTuple):
    """What :meth:`ARTM.fit <topicjax.artm.ARTM.fit>` computes before its first iteration
    (:meth:`ARTM.fit_problem`): code that runs its own iterations of
    :func:`topicjax.artm.algorithm.step` (the tuner of :mod:`topicjax.tune`) starts from it and gets
    the fit of the estimator."""

    structure: Structure
    data: Any
    n_weighted: float
    reg: Any
    aux: EMAux
    state: Any
    cfg: Any


def topic_structure(n_components: int, background_topics, topic_names) -> tuple[tuple, tuple]:
    """Topic names and background topic indices (the last ``B`` topics for an int ``B``)."""
    T = int(n_components)
    bt = 0 if background_topics is None else background_topics
    names = None
    if topic_names is not None:
        names = [str(n) for n in topic_names]
        if len(names) != T:
            raise ValueError(f"{len(names)} topic names for {T} topics")
        if len(set(names)) != T:
            raise ValueError("topic names must be unique")
    if is_number(bt):
        B = int(bt)
        if B != bt or not 0 <= B <= T:
            raise ValueError(f"background_topics={bt!r} must be an integer in [0, {T}] or a list of topics")
        background = list(range(T - B, T))
    else:
        ctx = Context(n_words=1, n_topics=T, n_docs=1, topic_names=tuple(names or ()))
        try:
            background = sorted({topic_index(t, ctx) for t in bt})
        except ValueError as e:
            raise ValueError(f"background_topics: {e}") from None
    if names is None:
        bg = set(background)
        names, i, j = [], 0, 0
        for t in range(T):
            if t in bg:
                names.append(f"background_{j}")
                j += 1
            else:
                names.append(f"topic_{i}")
                i += 1
    return tuple(names), tuple(background)


def modality_structure(corpus, modality_weights, label_names=None, label_tau: float = 1.0):
    """``(row_mod, mod_names, weights, classes)``: the modality of every row of Φ (the class rows
    of Ψ last, as the modality :data:`LABELS_MODALITY` weighted by ``label_tau``)."""
    W = corpus.n_words
    if corpus.modalities is not None:
        row_mod = np.asarray(corpus.modalities, np.int32)
        mod_names = list(corpus.modality_names)
    else:
        row_mod = np.zeros(W, np.int32)
        mod_names = ["words"]
    weights = np.ones(len(mod_names))
    for name, w in (modality_weights or {}).items():
        if name not in mod_names:
            raise ValueError(f"modality_weights: unknown modality {name!r}; the corpus has {mod_names}")
        if not (is_number(w) and math.isfinite(w) and w >= 0):
            raise ValueError(f"modality_weights[{name!r}] = {w!r} must be a finite number >= 0")
        weights[mod_names.index(name)] = float(w)
    if not (weights > 0).any():
        raise ValueError("every modality has weight 0")
    classes = ()
    if label_names is not None:
        classes = tuple(label_names)
        row_mod = np.concatenate([row_mod, np.full(len(classes), len(mod_names), np.int32)])
        mod_names.append(LABELS_MODALITY)
        weights = np.append(weights, label_tau)
    return row_mod, tuple(mod_names), weights, classes


def class_frequencies(labels, doc_lengths) -> np.ndarray:
    """p̂_c of the labelled documents, each document's n_d spread over its classes (eq. 46)."""
    lab = np.asarray(labels, bool)
    n_lab = np.maximum(lab.sum(1), 1)
    m = (lab / n_lab[:, None]) * np.asarray(doc_lengths, np.float64)[:, None]
    return m.sum(0) / max(m.sum(), 1e-300)


def weighted_entries(corpus, row_weights, row_mod, labels=None):
    """Word tokens weighted by their modality, then class tokens ``m_dc = n_d [c ∈ C_d] / |C_d|``
    weighted by τ (eq. 45-46), as CSR entries sorted by document; and their weighted total."""
    weights = np.asarray(row_weights, np.float64)
    if labels is None and np.all(weights[np.unique(row_mod[: corpus.n_words])] == 1.0):
        # one modality of weight 1 (the common case): the corpus's own sorted entries, no copies
        # but the float counts (the general path below sorts int64 copies of every entry)
        src = SimpleNamespace(doc_ids=corpus.doc_ids, word_ids=corpus.word_ids, counts=corpus.counts,
                              nnz=corpus.nnz, n_docs=corpus.n_docs, doc_offsets=corpus.doc_offsets)
        return src, float(corpus.n_tokens)
    d = corpus.doc_ids.astype(np.int64)
    w = corpus.word_ids.astype(np.int64)
    c = corpus.counts.astype(np.float64) * row_weights[row_mod[w]]
    if labels is not None:
        lab = np.asarray(labels, bool)
        n_lab = lab.sum(1)
        dd, cc = np.nonzero(lab)
        m = corpus.doc_lengths[dd] / n_lab[dd] * row_weights[-1]
        d = np.concatenate([d, dd])
        w = np.concatenate([w, corpus.n_words + cc])
        c = np.concatenate([c, m])
    keep = c > 0
    d, w, c = d[keep], w[keep], c[keep]
    order = np.lexsort((w, d))  # sorted by document: the E-step's Θ accumulation relies on it
    d = d[order]
    offsets = np.concatenate([[0], np.cumsum(np.bincount(d, minlength=corpus.n_docs))]).astype(np.int64)
    src = SimpleNamespace(doc_ids=d, word_ids=w[order], counts=c[order], nnz=int(d.size), n_docs=corpus.n_docs,
                          doc_offsets=offsets)
    return src, float(c.sum())


def device_data(src, chunk=None, dtype=jnp.float32, mesh=None):
    """The device layout of weighted entries: local (:func:`topicjax.core.layout.prepare`) or,
    with a ``mesh``, sharded over its devices with Θ split by documents
    (:func:`topicjax.core.sharding.shard` with ``shard_theta=True``)."""
    if mesh is not None:
        return sharding.shard(src, mesh, chunk=chunk, dtype=dtype, shard_theta=True)
    return layout.prepare(src, chunk, dtype=dtype, with_doc=False)


def context(st: Structure, n_topics: int, phase: str, fitted=None, corpus=None) -> Context:
    corpus = st.corpus if corpus is None else corpus
    return Context(
        n_words=st.n_rows, n_topics=int(n_topics), n_docs=corpus.n_docs, topic_names=st.names,
        background=st.background, doc_lengths=np.asarray(corpus.doc_lengths, np.float64), corpus=corpus,
        row_modality=st.row_mod, modality_names=st.mod_names, class_names=st.classes, class_freq=st.class_freq,
        phase=phase, fitted=fitted,
    )


def aux_arrays(st: Structure, n_topics: int) -> EMAux:
    bg = np.zeros(int(n_topics), bool)
    bg[list(st.background)] = True
    put = jax.device_put  # transfers; jnp.asarray of a host array compiles a program per shape
    if len(st.mod_names) > 1:
        return EMAux(put(np.asarray(st.row_mod, np.int32)), put(np.asarray(st.weights > 0)), put(bg))
    return EMAux(None, None, put(bg))
