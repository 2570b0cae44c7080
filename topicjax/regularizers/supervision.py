"""Semi-supervised regularizers (ARTM eq. 27-29) and label regularization (eq. 51-52)."""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core.estep import EPS
from topicjax.regularizers.base import Context, Regularizer, custom, register
from topicjax.regularizers.resolve import (as_data, check_rate, doc_index, doc_lengths, row_mask, spec, topic_distribution,
                                           topic_index, topic_mask, word_distribution, word_index)

from topicjax.regularizers.smoothing import phi_log_fn, theta_log_fn

__all__ = ["seed_words", "labelled_documents", "semi_supervised", "label_regularization"]


@register()
def seed_words(words: Mapping) -> Regularizer:
    """Seed words of topics (eq. 27-28): ``words = {topic: [word, ...]}`` (names or indices);
    ``R = Σ_{t∈T_0} Σ_{w∈W_t} ln φ_wt / |W_t|``, M-step ``φ_wt ∝ n_wt + τ [w∈W_t] / |W_t|``."""
    words = dict(words)

    def binder(ctx: Context):
        b = np.zeros((ctx.n_words, ctx.n_topics))
        for t, ws in words.items():
            ti = topic_index(t, ctx)
            ws = [ws] if isinstance(ws, (str, int, np.integer)) else list(ws)
            if not ws:
                raise ValueError(f"seed_words: topic {t!r} has no words")
            for w in ws:
                b[word_index(w, ctx, "seed_words"), ti] = 1.0 / len(set(ws))
        return {"sign": np.float64(1.0), "beta": as_data(b), "tmask": np.ones(ctx.n_topics),
                "scale": np.ones(ctx.n_topics)}

    return custom(phi_log_fn, name="seed_words", binder=binder, nonnegative=True, uses_theta=False,
                       spec=spec("seed_words", words=words))


@register()
def labelled_documents(doc_topics) -> Regularizer:
    """Documents labelled with topics (eq. 27, 29): ``doc_topics = {doc: [topic, ...]}`` or a
    boolean (D x T) matrix; ``R = Σ_{d∈D_0} Σ_{t∈T_d} ln θ_td / |T_d|``, M-step
    ``θ_td ∝ n_td + τ [t∈T_d] / |T_d|``.  A document id outside the corpus is an error."""
    if not isinstance(doc_topics, Mapping):
        arr = np.asarray(doc_topics)
        if arr.ndim != 2:
            raise ValueError("labelled_documents: doc_topics must be a mapping {doc: topics} or a (D, T) matrix")
        doc_topics_m = {int(d): [int(t) for t in np.flatnonzero(arr[d])] for d in range(arr.shape[0]) if arr[d].any()}
        shape = arr.shape
    else:
        doc_topics_m = dict(doc_topics)
        shape = None

    def binder(ctx: Context):
        if shape is not None and shape != (ctx.n_docs, ctx.n_topics):
            raise ValueError(f"doc_topics matrix has shape {shape}, expected ({ctx.n_docs}, {ctx.n_topics})")
        a = np.zeros((ctx.n_topics, ctx.n_docs))
        for d, ts in doc_topics_m.items():
            di = doc_index(d, ctx.n_docs, "labelled_documents")
            ts = [ts] if isinstance(ts, (str, int, np.integer)) else list(ts)
            idx = sorted({topic_index(t, ctx) for t in ts})
            if not idx:
                raise ValueError(f"document {di} has an empty topic list")
            a[idx, di] = 1.0 / len(idx)
        return {"sign": np.float64(1.0), "alpha": as_data(a), "tmask": np.ones(ctx.n_topics),
                "scale": np.ones(ctx.n_docs)}

    return custom(theta_log_fn, name="labelled_documents", binder=binder, nonnegative=True,
                       uses_phi=False, per_document=True, spec=spec("labelled_documents", doc_topics=doc_topics_m))


def _semi_fn(phi, theta, p):
    return p["beta0"] * phi_log_fn(phi, theta, p["phi"]) + p["alpha0"] * theta_log_fn(phi, theta, p["theta"])


@register()
def semi_supervised(doc_topics=None, words=None, alpha0: float = 1.0, beta0: float = 1.0) -> Regularizer:
    """Eq. 27 in one regularizer: ``β_0 R_seed_words + α_0 R_labelled_documents`` (M-step 28-29)."""
    if doc_topics is None and words is None:
        raise ValueError("semi_supervised needs doc_topics, words or both")
    parts = {
        "phi": seed_words(words) if words is not None else None,
        "theta": labelled_documents(doc_topics) if doc_topics is not None else None,
    }
    spec_docs = parts["theta"].terms[0].spec["kwargs"]["doc_topics"] if parts["theta"] is not None else None

    def binder(ctx: Context):
        T, D, W = ctx.n_topics, ctx.n_docs, ctx.n_words
        zphi = {"sign": np.float64(0), "beta": np.zeros((W, 1)), "tmask": np.ones(T),
                "scale": np.ones(T)}
        zth = {"sign": np.float64(0), "alpha": np.zeros((T, 1)), "tmask": np.ones(T),
               "scale": np.ones(D)}
        return {
            "phi": parts["phi"].terms[0].binder(ctx) if parts["phi"] is not None else zphi,
            "theta": parts["theta"].terms[0].binder(ctx) if parts["theta"] is not None else zth,
            "alpha0": np.float64(alpha0), "beta0": np.float64(beta0),
        }

    return custom(_semi_fn, name="semi_supervised", binder=binder, nonnegative=True,
                       per_document=doc_topics is not None,
                       spec=spec("semi_supervised", doc_topics=spec_docs, words=words, alpha0=alpha0, beta0=beta0))



# ----------------------------------------------------------------------------- label regularization (51-52)
def _label_reg_fn(phi, theta, p):
    # Σ_c p̂_c ln Σ_t ψ_ct p(t), p(t) = n_t / n held constant: ψ ∂R/∂ψ_ct = p̂_c ψ_ct n_t / Σ_s ψ_cs n_s.
    pt = jax.lax.stop_gradient(theta @ p["doc_lengths"])
    pt = pt / pt.sum()
    psi = phi[p["rows"]]
    return jnp.sum(p["freq"] * jnp.log(psi @ pt))


@register()
def label_regularization() -> Regularizer:
    """Label regularization (eq. 51): ``R = Σ_c p̂_c ln p(c)``, p(c) = Σ_t ψ_ct p(t), p(t) = n_t/n,
    with p̂_c the class frequencies of the labelled training documents; M-step
    ``ψ_ct ∝ m_ct + τ p̂_c ψ_ct n_t / Σ_s ψ_cs n_s`` (eq. 52: τ is the ξ of the paper).
    Needs a model with classes (``ARTM(label_weight=...)`` fitted with labels)."""

    def binder(ctx: Context):
        rows = ctx.class_rows
        if rows.size == 0 or ctx.class_freq is None:
            raise ValueError("label_regularization needs a model with classes: fit ARTM(label_weight=...) with labels")
        return {"rows": np.asarray(rows, np.int32), "freq": as_data(ctx.class_freq),
                "doc_lengths": as_data(doc_lengths(ctx, "label_regularization"))}

    return custom(_label_reg_fn, name="label_regularization", binder=binder, nonnegative=True,
                       uses_theta=False, spec=spec("label_regularization"))
