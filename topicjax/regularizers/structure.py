"""Regularizers of topic structure: decorrelation (ARTM eq. 30-31), document links (32-33),
correlated topics (34-39), coherence (40-43) and topic selection (Note 1)."""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core.estep import EPS
from topicjax.regularizers.base import Context, Regularizer, custom, register
from topicjax.regularizers.resolve import (as_data, check_rate, doc_index, doc_lengths, row_mask, spec, topic_distribution,
                                           topic_index, topic_mask, word_distribution, word_index)

__all__ = ["decorrelate", "document_links", "correlated_topics", "improve_coherence", "topic_selection"]


def _decorrelate_fn(phi, theta, p):
    # -½ Σ_t Σ_{s≠t} Σ_w φ_wt φ_ws over the chosen topics/rows: φ ∂R/∂φ = -φ_wt Σ_{s≠t} φ_ws.
    q = phi * p["tmask"][None, :] * p["rows"][:, None]
    s = q.sum(1)
    return -0.5 * (jnp.sum(s * s) - jnp.sum(q * q))


@register()
def decorrelate(topics=None, modalities=None) -> Regularizer:
    """Decorrelation of topics (eq. 30): ``R = -½ Σ_t Σ_{s≠t} Σ_w φ_wt φ_ws``; M-step
    ``φ_wt ∝ (n_wt - τ φ_wt Σ_{s≠t} φ_ws)_+`` (eq. 31; eq. 54 with ``topics="specific"``).
    The ½ makes τ the γ of eq. 31 (BigARTM's convention)."""

    def binder(ctx: Context):
        return {"tmask": as_data(topic_mask(topics, ctx)), "rows": as_data(row_mask(modalities, ctx))}

    return custom(_decorrelate_fn, name="decorrelate", binder=binder, nonnegative=True, uses_theta=False,
                       spec=spec("decorrelate", topics=topics, modalities=modalities))


# BigARTM's name (DecorrelatorPhi), accepted where a factory is named by a string
register("decorrelate_phi")(decorrelate)


# ----------------------------------------------------------------------------- document links (32-33)
def _links_fn(phi, theta, p):
    # ½ Σ_{d,c} n_dc Σ_t θ_td θ_tc over a symmetric edge list: θ ∂R/∂θ_td = θ_td Σ_c n_dc θ_tc.
    return 0.5 * jnp.sum(p["w"] * jnp.sum(theta[:, p["src"]] * theta[:, p["dst"]], axis=0))


@register()
def document_links(links) -> Regularizer:
    """Covariance of linked documents (eq. 32): ``R = Σ_{d,c} n_dc Σ_t θ_td θ_tc`` over links
    (each undirected link counted once); M-step ``θ_td ∝ n_td + τ θ_td Σ_c n_dc θ_tc`` (eq. 33).

    ``links``: a list of ``(d, c)`` or ``(d, c, weight)`` pairs (undirected), or a (D x D) matrix
    of weights n_dc (dense or scipy.sparse; symmetrised as (N + Nᵀ)/2).  A document id outside the
    corpus is an error.
    """
    import scipy.sparse as sp

    if sp.issparse(links) or (isinstance(links, np.ndarray) and links.ndim == 2 and links.shape[0] == links.shape[1]
                              and links.shape[1] != 2 and links.shape[1] != 3):
        m = sp.coo_matrix(links)
        m = sp.coo_matrix((m + m.T) / 2.0)
        src, dst, w = m.row.astype(np.int64), m.col.astype(np.int64), m.data.astype(np.float64)
        n_matrix = m.shape[0]
        pairs = None
    else:
        pairs = []
        for i, e in enumerate(list(links)):
            e = list(e)
            if len(e) not in (2, 3):
                raise ValueError(f"document_links: link {i} is {e!r}, expected (d, c) or (d, c, weight)")
            pairs.append((e[0], e[1], float(e[2]) if len(e) == 3 else 1.0))
        n_matrix = None

    def binder(ctx: Context):
        if pairs is None:
            if n_matrix != ctx.n_docs:
                raise ValueError(f"link matrix is {n_matrix} x {n_matrix} for {ctx.n_docs} documents")
            s, d, ww = src, dst, w
        else:
            s_l, d_l, w_l = [], [], []
            for i, (a, b, wt) in enumerate(pairs):
                a = doc_index(a, ctx.n_docs, f"document_links (link {i})")
                b = doc_index(b, ctx.n_docs, f"document_links (link {i})")
                if not np.isfinite(wt):
                    raise ValueError(f"link {i}: weight {wt} is not finite")
                # both directions, so that ½ Σ over the edge list counts the link once
                s_l += [a, b]
                d_l += [b, a]
                w_l += [wt, wt]
            s, d, ww = np.asarray(s_l, np.int64), np.asarray(d_l, np.int64), np.asarray(w_l)
        return {"src": np.asarray(s, np.int32), "dst": np.asarray(d, np.int32), "w": as_data(ww)}

    if pairs is not None:
        spec_links = [list(e) for e in pairs]
    else:  # the symmetric matrix as pairs: R = Σ_{d<c} n_dc θ_d·θ_c + Σ_d ½ n_dd θ_d·θ_d
        spec_links = [[int(a), int(b), float(c) if a != b else float(c) / 2] for a, b, c in zip(src, dst, w) if a <= b]
    return custom(_links_fn, name="document_links", binder=binder, nonnegative=True, uses_phi=False,
                       per_document=True, spec=spec("document_links", links=spec_links))


# ----------------------------------------------------------------------------- correlated topics (36-39)
def _ctm_fn(phi, theta, p):
    # -½ Σ_d (η_d - μ)ᵀ Σ⁻¹ (η_d - μ), η_d = ln θ_d (eq. 35-36); θ ∂R/∂θ_td = -Σ_s Σ̃_ts (ln θ_sd - μ_s).
    dev = jnp.log(theta) - p["mu"][:, None]
    return -0.5 * jnp.sum(dev * (p["prec"] @ dev))


def _ctm_update(phi, theta, p, tau=None):
    # Block-coordinate step after each pass (eq. 38-39), inverse with a small ridge, and
    # insignificant entries of Σ⁻¹ set to zero (sec. 4: sparse precision matrix).
    eta = jnp.log(jnp.maximum(theta, EPS))
    mu = eta.mean(1)
    dev = eta - mu[:, None]
    sigma = dev @ dev.T / theta.shape[1]
    T = sigma.shape[0]
    ridge = p["ridge"] * (jnp.trace(sigma) / T + 1e-12)
    prec = jnp.linalg.inv(sigma + ridge * jnp.eye(T, dtype=sigma.dtype))
    big = jnp.abs(prec) >= p["threshold"] * jnp.max(jnp.abs(jnp.diag(prec)))
    prec = jnp.where(big | jnp.eye(T, dtype=bool), prec, 0.0)
    return {**p, "mu": mu, "prec": prec, "sigma": sigma}


@register()
def correlated_topics(mu=None, sigma=None, estimate: bool = True, threshold: float = 0.0,
                      ridge: float = 1e-3) -> Regularizer:
    """The correlated topic model as a regularizer (eq. 34-37): the log-likelihood of the
    logistic-normal model of η_d = ln θ_d, ``R = -½ Σ_d (η_d - μ)ᵀ Σ⁻¹ (η_d - μ)``; M-step
    ``θ_td ∝ (n_td - τ Σ_s Σ̃_ts (ln θ_sd - μ_s))_+`` (eq. 37).

    With ``estimate`` (default) μ and Σ are re-estimated after every pass (eq. 38-39), Σ is
    inverted with a ridge ``ridge * trace(Σ)/T`` and entries of Σ⁻¹ below ``threshold`` times
    its largest diagonal entry are set to zero.  Until the first pass, without given ``mu`` and
    ``sigma``, the regularizer is inactive (μ = 0, Σ⁻¹ = 0).  Learned μ, Σ⁻¹ are kept for
    ``transform`` and saved with the model.
    """

    def binder(ctx: Context):
        T = ctx.n_topics
        m = np.zeros(T) if mu is None else np.asarray(mu, np.float64)
        if sigma is None:
            prec = np.zeros((T, T))
            sig = np.zeros((T, T))
        else:
            sig = np.asarray(sigma, np.float64)
            if sig.shape != (T, T):
                raise ValueError(f"sigma has shape {sig.shape}, expected ({T}, {T})")
            prec = np.linalg.inv(sig)
        if m.shape != (T,):
            raise ValueError(f"mu has shape {m.shape}, expected ({T},)")
        return {"mu": as_data(m), "prec": as_data(prec), "sigma": as_data(sig),
                "ridge": np.float64(ridge), "threshold": np.float64(threshold)}

    return custom(_ctm_fn, name="correlated_topics", binder=binder, nonnegative=True, uses_phi=False,
                       update=_ctm_update if estimate else None, learned=("mu", "prec", "sigma"),
                       spec=spec("correlated_topics", mu=mu, sigma=sigma, estimate=estimate,
                                  threshold=threshold, ridge=ridge))


# ----------------------------------------------------------------------------- coherence (40-43)
def _coherence_kl_fn(phi, theta, p):
    # τ Σ_t n_t Σ_w p̂(w|t) ln φ_wt with p̂(w|t) = Σ_{v≠w} C_wv φ_vt (eq. 40-41) and n_t = Σ_d n_d θ_td,
    # both held constant in the M-step as in the paper: φ ∂R/∂φ_wt = Σ_{v≠w} C_wv n_t φ_vt (eq. 42,
    # with n_vt = n_t φ_vt, eq. 40's own identity).
    sub = phi[p["idx"]]
    n_t = jax.lax.stop_gradient(theta @ p["doc_lengths"])
    phat = jax.lax.stop_gradient(p["C"] @ sub)
    return jnp.sum((p["tmask"] * n_t)[None, :] * phat * jnp.log(sub))


def _coherence_newman_fn(phi, theta, p):
    # Σ_t ln Σ_uv C_uv φ_ut φ_vt (eq. 43): φ ∂R/∂φ_wt = 2 φ_wt (C φ_t)_w / (φ_tᵀ C φ_t).
    sub = phi[p["idx"]]
    q = jnp.sum(sub * (p["C"] @ sub), axis=0)
    return jnp.sum(p["tmask"] * jnp.log(q + EPS))


@register()
def improve_coherence(form: str = "kl", cooc=None, words=None, max_words: int | None = 2000, topics=None) -> Regularizer:
    """Regularizers that make topics more coherent, from document co-occurrence of words (BigARTM's
    ``ImproveCoherencePhi``).

    * ``form="kl"`` (eq. 40-42): ``R = Σ_t n_t Σ_w p̂(w|t) ln φ_wt`` with
      p̂(w|t) = Σ_{v≠w} C_wv φ_vt, C_wv = p̂(w|v) = N_wv / N_v (documents holding both words over
      documents holding v); M-step ``φ_wt ∝ n_wt + τ Σ_{v≠w} C_wv n_vt``.
    * ``form="newman"`` (eq. 43, Newman et al. 2011): ``R = Σ_t ln Σ_uv C_uv φ_ut φ_vt`` with
      C_uv = N_uv where PMI(u, v) = ln(|D| N_uv / (N_u N_v)) > 0, else 0 (u = v included, as
      written in the paper).

    Bag-of-words corpora have no word order, so the paper's ten-word window becomes the whole
    document.  ``cooc``: a (K x K) matrix over ``words`` (indices) to use instead; otherwise it is
    computed from the training corpus over ``words`` or the ``max_words`` most frequent words
    (a dense K x K matrix; ``None`` = every word).  ``topics`` restricts the regularizer.
    """
    if form not in ("kl", "newman"):
        raise ValueError(f"improve_coherence: form must be 'kl' or 'newman', got {form!r}")

    def binder(ctx: Context):
        word_rows = np.flatnonzero(ctx.word_rows)
        if words is not None:
            idx = np.asarray([word_index(w, ctx, "improve_coherence") for w in words], np.int64)
        elif cooc is not None:
            idx = word_rows[: np.asarray(cooc).shape[0]]
        else:
            if ctx.corpus is None:
                raise ValueError("improve_coherence needs the corpus (or cooc=) to count co-occurrences")
            wc = np.asarray(ctx.corpus.word_counts)
            k = wc.size if max_words is None else min(int(max_words), wc.size)
            idx = np.sort(np.argsort(-wc, kind="stable")[:k])
        if cooc is not None:
            C = np.asarray(cooc, np.float64)
            if C.shape != (idx.size, idx.size):
                raise ValueError(f"cooc has shape {C.shape}, expected ({idx.size}, {idx.size})")
        else:
            if ctx.corpus is None:
                raise ValueError("improve_coherence needs the corpus (or cooc=) to count co-occurrences")
            import scipy.sparse as sp

            c = ctx.corpus
            B = sp.csc_matrix((np.ones(c.nnz), (c.doc_ids, c.word_ids)), shape=(c.n_docs, c.n_words))[:, idx]
            N = np.asarray((B.T @ B).todense())
            Nw = np.diag(N).copy()
            if form == "kl":
                C = np.divide(N, Nw[None, :], out=np.zeros_like(N), where=Nw[None, :] > 0)
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    pmi = np.log(c.n_docs * N / np.outer(Nw, Nw))
                C = np.where(np.isfinite(pmi) & (pmi > 0), N, 0.0)
        if form == "kl":
            C = C.copy()
            np.fill_diagonal(C, 0.0)  # v ≠ w in eq. 40
        tm = topic_mask(topics, ctx)
        p = {"idx": np.asarray(idx, np.int32), "C": as_data(C)}
        if form == "kl":
            p["doc_lengths"] = as_data(doc_lengths(ctx, "improve_coherence"))
        p["tmask"] = as_data(tm)
        return p

    return custom(_coherence_kl_fn if form == "kl" else _coherence_newman_fn, name=f"coherence_{form}",
                       binder=binder, nonnegative=True, uses_theta=False,
                       spec=spec("improve_coherence", form=form, cooc=cooc, words=words, max_words=max_words, topics=topics))


# models saved before the factory was renamed name it "coherence" in their specs
register("coherence")(improve_coherence)


# ----------------------------------------------------------------------------- topic selection
def _topic_selection_fn(phi, theta, p):
    # -(n/|T_sel|) Σ_t m_t ln p(t), p(t) = Σ_d n_d θ_td / n:
    # θ ∂R/∂θ_td = -m_t (n/|T_sel|) n_d θ_td / n_t.
    n_t = theta @ p["doc_lengths"]
    return -p["scale"] * jnp.sum(p["tmask"] * jnp.log(n_t / p["n"]))


@register()
def topic_selection(topics=None) -> Regularizer:
    """Topic selection (Note 1; BigARTM's ``TopicSelectionTheta``): sparsing of the topic
    distribution p(t) = Σ_d n_d θ_td / n, ``R = -(n / |T|) Σ_t ln p(t)``; M-step
    ``θ_td ∝ (n_td - τ (n/|T|) n_d θ_td / n_t)_+``.  Near a fixed point n_td ≈ n_d θ_td, so a
    topic smaller than τ times the average topic size n/|T| loses every document, becomes
    over-regularized (Note 1) and is removed: fitting more topics than needed with this
    regularizer chooses their number (τ ≈ 0.3-0.8)."""

    def binder(ctx: Context):
        n_d = doc_lengths(ctx, "topic_selection")
        tm = topic_mask(topics, ctx)
        return {"doc_lengths": as_data(n_d), "n": np.float64(n_d.sum()), "tmask": as_data(tm),
                "scale": np.float64(n_d.sum() / tm.sum())}

    return custom(_topic_selection_fn, name="topic_selection", binder=binder, nonnegative=True, uses_phi=False,
                       per_document=True, spec=spec("topic_selection", topics=topics))
