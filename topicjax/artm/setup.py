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
           "device_data", "theta_width", "phi_rows", "context", "aux_arrays"]


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
    """The device layout of weighted entries: local (:func:`topicjax.core.layout.prepare`, its
    pieces rounded up to a bucket unless ``TOPICJAX_BUCKETS=off``: corpora of similar size share
    the compiled programs) or, with a ``mesh``, sharded over its devices with Θ split by documents
    (:func:`topicjax.core.sharding.shard` with ``shard_theta=True``)."""
    if mesh is not None:
        return sharding.shard(src, mesh, chunk=chunk, dtype=dtype, shard_theta=True)
    return layout.prepare(src, chunk, dtype=dtype, with_doc=False, buckets=layout.buckets_on())


def theta_width(n_docs: int, reg, device_scores=(), phi_shape=None, nnz: int = 0) -> int:
    """Columns of Θ in the compiled programs of a local fit or ``transform`` of ``n_docs``
    documents: :func:`topicjax.core.layout.bucket_size` of it (at most 12.5 % more, or up to 15 more
    columns, :data:`~topicjax.core.layout.DOC_STEP`, and at least
    :data:`~topicjax.core.layout.DOC_FLOOR`), so that corpora of similar size share one
    program, or ``n_docs`` itself.

    The columns after the documents are no document: θ = 0 and ``doc_alive`` = 0 from the start
    (``ARTM._init_batch``), no token, so neither Φ, the documents' Θ, the likelihood nor the
    history change, and the estimators drop them on the host.  Exact (``n_docs``) when buckets are
    off (``TOPICJAX_BUCKETS=off``), for a corpus of more than
    :data:`~topicjax.core.layout.BUCKET_MAX_NONZEROS` non-zeros ``nnz`` (its passes dwarf the
    programs' build) and whenever something in the program reads Θ as a whole:

    * a regularizer term whose function reads Θ (found by tracing it at Φ of ``phi_shape`` and Θ
      of ``n_docs`` columns: every plain ``R(phi, theta)`` that uses ``theta``, ``sparse_theta``,
      ``label_regularization``, ...; a function that cannot be traced counts as reading it), or one
      with an ``update`` (it may, and its data is sized by the documents): ``R`` must see Θ of the
      real documents exactly, and cutting the padding off inside the program needs the number of
      documents as a static shape, which would compile a program per corpus again;
    * a score computed on the device (``device_scores``; ARTM's default ``sparsity`` counts Θ's
      zeros over its columns).
    """
    n_docs = int(n_docs)
    if device_scores or not layout.buckets_on() or int(nnz) > layout.BUCKET_MAX_NONZEROS:
        return n_docs
    if reg.terms:
        if phi_shape is None:
            raise ValueError("theta_width: a regularizer with terms needs phi_shape (rows, topics)")
        theta = jax.ShapeDtypeStruct((int(phi_shape[1]), n_docs), jnp.float32)
        phi = jax.ShapeDtypeStruct(tuple(int(x) for x in phi_shape), jnp.float32)
        if any(t.update is not None or _reads_theta(t, p, phi, theta) for t, p in zip(reg.terms, reg.params)):
            return n_docs
    return layout.bucket_size(n_docs, layout.DOC_STEP, layout.DOC_FLOOR)


def _reads_theta(term, params, phi, theta) -> bool:
    """Whether ``term``'s function reads Θ: its traced program (no compilation) has Θ as an
    operand of some operation or as its value; True when it cannot be traced (its error is the
    regularizer check's to report)."""
    try:
        jaxpr = jax.make_jaxpr(lambda p, t: term.fn(p, t, params))(phi, theta).jaxpr
    except Exception:  # noqa: BLE001 - refused later, with its message, by Regularizer.check
        return True
    var = jaxpr.invars[1]
    return any(v is var for eqn in jaxpr.eqns for v in eqn.invars) or any(v is var for v in jaxpr.outvars)


def phi_rows(st: Structure, reg, device_scores=()) -> int:
    """Rows of Φ in the compiled programs of a local fit or ``transform`` over ``st``: the
    vocabulary rounded up to a bucket (:func:`topicjax.core.layout.bucket_size`, a multiple of
    :data:`~topicjax.core.layout.DOC_STEP`, at least :data:`~topicjax.core.layout.WORD_FLOOR`), so
    that corpora over vocabularies of similar size
    share one program, or ``st.n_rows`` itself.

    The rows after the words are no word: zero in the initial Φ (:func:`topicjax.artm.algorithm.init`'s
    ``real_words``), no token, so no step gives them mass, and the estimators drop them on the host.
    Exact when buckets are off (``TOPICJAX_BUCKETS=off``), for a corpus ``st.corpus`` of more than
    :data:`~topicjax.core.layout.BUCKET_MAX_NONZEROS` non-zeros, and whenever something reads Φ as
    a whole or its rows are more than one distribution: a regularizer term (what ``R(phi, theta)``
    sees must be the model's Φ), a score computed on the device, several modalities or classes
    (Ψ's rows follow the words').
    """
    n = int(st.n_rows)
    if (reg.terms or device_scores or len(st.mod_names) > 1 or st.classes or not layout.buckets_on()
            or st.corpus.nnz > layout.BUCKET_MAX_NONZEROS):
        return n
    return layout.bucket_size(n, layout.DOC_STEP, layout.WORD_FLOOR)


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
