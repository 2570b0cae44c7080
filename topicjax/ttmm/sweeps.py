"""Sparse sweeps of TTMM over the non-zeros, in log space: log P(d | h=j) (eq. 2), the exact
log P(d) (eq. 3), the posteriors of eq. 6 and 18, and the expected topic shares of the tokens."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from topicjax.core import kernels, layout, numerics
from topicjax.core.estep import EPS
from topicjax.core.layout import DocWordCounts
from topicjax.data.corpus import Corpus
from topicjax.ttmm.params import TTMMParams
from topicjax.core.compiled import jit

__all__ = ["theme_layout", "doc_rows", "sparse_sums", "xla_sums", "kernel_sums", "doc_sums", "centred_doc_sums", "word_sums", "safe_log", "theme_terms", "normalize_rows",
           "doc_log_likelihood", "theme_posterior", "doc_topic_posterior", "token_topic_shares", "EPS"]

#: Target number of gathered values per chunk (chunk x J): 4M floats = 16 MB.
CHUNK_VALUES = 1 << 22
#: Rows of the per-document tables of a bucketed fit are a multiple of this (:func:`doc_rows`): a
#: padding row has no token and costs its J or K values, so the small corpora of a test suite or of
#: scikit-learn's checks (30 to 120 documents) share one shape.
DOC_FLOOR = 128


def theme_layout(corpus: Corpus, n_themes: int = 1, chunk: int | None = None, buckets: bool = False) -> DocWordCounts:
    """:func:`topicjax.core.layout.prepare` with a chunk size suited to J (each chunk gathers chunk
    x J values), without the ``doc`` array: the compiled kernel reads a piece's document from
    ``piece_doc``, and so do the scans of the pure-JAX sums, a chunk at a time
    (:func:`topicjax.core.layout.slot_docs`).  ``buckets``: pieces and chunks rounded up to a
    bucket (``prepare``'s ``buckets``; zero counts), so that corpora of similar size share the
    compiled sweeps; the sweeps' ``n_docs`` may then be a bucket too (:func:`doc_rows`), its
    rows after the corpus's documents without tokens."""
    if chunk is None:
        chunk = int(np.clip(CHUNK_VALUES // max(int(n_themes), 1), 1024, layout.DEFAULT_CHUNK))
    return layout.prepare(corpus, chunk, with_doc=False, word_mirror=False, buckets=buckets)  # TTMM reads no mirror


def doc_rows(n_docs: int, buckets: bool, step: int = DOC_FLOOR) -> int:
    """Rows of the per-document tables (log P(d), the posteriors) of the compiled programs of a
    fit or an inference on ``n_docs`` documents: :func:`topicjax.core.layout.bucket_size` of it
    (a multiple of ``step``, default :data:`DOC_FLOOR`) with ``buckets``, else ``n_docs``.
    The rows after the documents have no token; the fits mask them out of L and of π's update
    (:func:`topicjax.ttmm.em.em_step`), the estimator cuts them off on the host."""
    return layout.bucket_size(n_docs, step) if buckets else int(n_docs)


def sparse_sums(table, data: DocWordCounts, n_out: int, *, by_doc: bool):
    """``N @ table`` (``by_doc``: row d is Σ_w n_dw table[w]) or ``Nᵀ @ table`` (row w is
    Σ_d n_dw table[d]), chunk by chunk over the non-zeros (padding has count 0).

    On CPU with the compiled kernel (:mod:`topicjax.core.kernels`, ``TOPICJAX_ESTEP``) and the
    sliced layout, the products run in the fused multi-threaded E-step kernel
    (:func:`kernel_sums`); otherwise in :func:`xla_sums`."""
    if data.piece_doc is not None and kernels.use_ffi(table.dtype):
        return _kernel_sums_ad(n_out, by_doc, table, data)
    return xla_sums(table, data, n_out, by_doc=by_doc)


@partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _kernel_sums_ad(n_out, by_doc, table, data):
    return kernel_sums(table, data, n_out, by_doc=by_doc)


@_kernel_sums_ad.defjvp
def _kernel_sums_jvp(n_out, by_doc, primals, tangents):
    # the FFI call has no derivative rules: tangents (of any order, and their transposes for
    # reverse mode) come from the pure-JAX products; the values from the kernel
    xla = lambda t, d: xla_sums(t, d, n_out, by_doc=by_doc)
    return _kernel_sums_ad(n_out, by_doc, *primals), jax.jvp(xla, primals, tangents)[1]


def xla_sums(table, data: DocWordCounts, n_out: int, *, by_doc: bool):
    """:func:`sparse_sums` in pure JAX: a scan of scatter-adds over the chunks."""

    def body(acc, chunk):
        docs, w, n = chunk
        d = layout.slot_docs(docs, n.shape[0])
        dst, src = (d, w) if by_doc else (w, d)
        return acc.at[dst].add(n[:, None] * table[src]), None

    acc0 = jnp.zeros((n_out, table.shape[1]), table.dtype)
    out, _ = jax.lax.scan(body, acc0, (layout.chunk_docs(data), data.word, data.count))
    return out


def kernel_sums(table, data: DocWordCounts, n_out: int, *, by_doc: bool):
    """:func:`sparse_sums` in the fused E-step kernel of ARTM (:func:`topicjax.core.kernels.estep_counts`).

    The kernel computes ``p = φ_w · θ_d``, ``∂L/∂θ_d = Σ_w (n_dw / p) φ_w`` and ``∂L/∂φ_w = Σ_d
    (n_dw / p) θ_d``.  One extra column that is 1 in both ``φ`` and ``θ``, with ``θ`` (or ``φ``)
    zero on the others, makes every ``p`` exactly 1, so the gradients are the sparse products:
    ``by_doc`` takes ``φ = [table, 1]``, ``θ = [0, 1]`` and reads ``∂L/∂θ``; otherwise ``φ = [0,
    1]``, ``θ = [table, 1]ᵀ`` and ``∂L/∂φ``.  The kernel spends one more dot product per token than
    a plain product would (``p``), on all cores.  A non-finite entry of ``table`` makes its whole
    row non-finite (``0 · inf`` in ``p``) instead of its column only."""
    X = table.shape[1]
    dt = table.dtype
    if by_doc:
        phi = jnp.concatenate([table, jnp.ones((table.shape[0], 1), dt)], axis=1)
        theta = jnp.zeros((X + 1, n_out), dt).at[X].set(1)
        _, _, g_theta = kernels.estep_counts(phi, theta, data, False, True, xla=None)
        return g_theta[:X].T
    phi = jnp.zeros((n_out, X + 1), dt).at[:, X].set(1)
    theta = jnp.concatenate([table, jnp.ones((table.shape[0], 1), dt)], axis=1).T
    _, g_phi, _ = kernels.estep_counts(phi, theta, data, True, False, xla=None)
    return g_phi[:, :X]


def doc_sums(table: Float[Array, "W X"], data: DocWordCounts, n_docs: int) -> Float[Array, "D X"]:
    """``N @ table``: row d is Σ_w n_dw table[w]."""
    return sparse_sums(table, data, n_docs, by_doc=True)


def word_sums(table: Float[Array, "D X"], data: DocWordCounts, n_words: int) -> Float[Array, "W X"]:
    """``Nᵀ @ table``: row w is Σ_d n_dw table[d]."""
    return sparse_sums(table, data, n_words, by_doc=False)


def safe_log(x):
    return jnp.log(jnp.maximum(x, EPS))


def centred_doc_sums(log_table: Float[Array, "W X"], data: DocWordCounts, n_docs: int):
    """``N @ log_table`` as ``(rel, base)``: ``rel[d, x] = Σ_w n_dw (log_table[w, x] − c_w)`` and
    ``base[d] = Σ_w n_dw c_w`` with ``c_w = max_x log_table[w, x]``, so that ``N @ log_table =
    rel + base[:, None]``.

    A posterior over the columns (themes, topics) depends on ``rel`` alone.  The plain float32
    sums are of size |Σ n_dw log p| (thousands for a long document) and carry an absolute error
    of that size times a few ulps, which is an error of the same size in the log posterior: a
    relative error of ~1e-3 in π after one EM iteration on KOS, and a GPU, whose scatter-adds
    run in any order, disagreeing with the CPU (and with itself) by that much.  The centred sums are
    of the size of the log-ratios between columns only."""
    c = jnp.max(log_table, axis=1, keepdims=True)
    sums = doc_sums(jnp.concatenate([log_table - c, c], axis=1), data, n_docs)
    return sums[:, :-1], sums[:, -1]


def theme_terms(params: TTMMParams, data: DocWordCounts, n_docs: int):
    """``A = τβ`` (eq. 1), the theme posterior log P(h=j|d) (eq. 6) as (D, J), and log P(d) (eq.
    3) as (D,).  log P(d|h=j) (eq. 2) is never formed in linear space, and only its differences
    between themes enter the posterior (:func:`centred_doc_sums`)."""
    pi, tau, beta = params
    A = tau @ beta
    rel, base = centred_doc_sums(safe_log(A).T, data, n_docs)
    log_joint = safe_log(pi)[None, :] + rel
    lse = jax.nn.logsumexp(log_joint, axis=1)
    return A, log_joint - lse[:, None], lse + base


def normalize_rows(counts, fallback):
    """Rows of ``counts`` normalised to sum to one; a row with no mass keeps ``fallback``'s row
    (a theme no document belongs to any more keeps its topic mixture instead of becoming NaN)."""
    s = counts.sum(axis=1, keepdims=True)
    return jnp.where(s > 0, counts / jnp.where(s > 0, s, 1), fallback)


# ============================================================================ inference
def _doc_log_likelihood_impl(params: TTMMParams, data: DocWordCounts, n_docs: int) -> Float[Array, " D"]:
    return theme_terms(params, data, n_docs)[2]


def _theme_posterior_impl(params: TTMMParams, data: DocWordCounts, n_docs: int) -> Float[Array, "D J"]:
    return jnp.exp(theme_terms(params, data, n_docs)[1])


def _topic_posterior_impl(params: TTMMParams, data: DocWordCounts, n_docs: int) -> Float[Array, "D K"]:
    pi, tau, beta = params
    log_prior = safe_log(pi @ tau)  # Σ_j π_j τ_jk
    log_words = centred_doc_sums(safe_log(beta).T, data, n_docs)[0]  # Σ_w n_dw log β_kw, (D, K), up to a row constant
    return jax.nn.softmax(log_prior[None, :] + log_words, axis=1)


def _token_topic_shares_impl(params: TTMMParams, data: DocWordCounts, n_docs: int) -> Float[Array, "D K"]:
    pi, tau, beta = params
    A, log_post, _ = theme_terms(params, data, n_docs)
    P = jnp.exp(log_post)
    inv_a = (1.0 / jnp.maximum(A, EPS)).T  # (W, J)
    beta_t = beta.T  # (W, K)

    def body(acc, chunk):
        docs, w, n = chunk
        d = layout.slot_docs(docs, n.shape[0])
        # Σ_j P_dj Q_jkw = β_kw Σ_j (P_dj / A_jw) τ_jk: a (B, J) @ (J, K) product per chunk
        v = ((P[d] * inv_a[w]) @ tau) * beta_t[w] * n[:, None]
        return acc.at[d].add(v), None

    acc0 = jnp.zeros((n_docs, tau.shape[1]), tau.dtype)
    acc, _ = jax.lax.scan(body, acc0, (layout.chunk_docs(data), data.word, data.count))
    return acc / jnp.maximum(acc.sum(1, keepdims=True), EPS)


doc_log_likelihood = numerics.full_precision(jit(_doc_log_likelihood_impl, static_argnums=(2,)))
doc_log_likelihood.__doc__ = """Exact log P(d) of every document (eq. 3), ``(n_docs,)``, in log space.

``log P(d) = logsumexp_j [log π_j + Σ_w n_dw log (τβ)_jw]``; cost O(nnz·J + JKW) — the paper's
O(JK|d|) per document, with τβ shared by all documents.  ``data`` comes from :func:`theme_layout`.
"""

theme_posterior = numerics.full_precision(jit(_theme_posterior_impl, static_argnums=(2,)))
theme_posterior.__doc__ = """Theme posteriors P(h=j | d) (eq. 6), ``(n_docs, J)``: the soft clustering of documents."""

doc_topic_posterior = numerics.full_precision(jit(_topic_posterior_impl, static_argnums=(2,)))
doc_topic_posterior.__doc__ = """Topic posteriors P(t=k | d) of eq. 18, ``(n_docs, K)``: the paper's document features.

Eq. 18 defines ``P(t=k, d) = Π_w β_kw^{n_dw} Σ_j π_j τ_jk``: the topic is drawn once for the
whole document.  Its sum over k is therefore not P(d) of eq. 3 (where every token draws its own
topic), so dividing by eq. 3 as printed would not give a distribution (and, in linear space, would
under- or overflow).  We normalise over k instead, in log space:
``P(t=k|d) = softmax_k(log Σ_j π_j τ_jk + Σ_w n_dw log β_kw)``.  For long documents this is
close to one-hot; see :func:`token_topic_shares` for a smoother alternative.
"""

token_topic_shares = numerics.full_precision(jit(_token_topic_shares_impl, static_argnums=(2,)))
token_topic_shares.__doc__ = """Expected share of a document's tokens drawn from each topic, ``(n_docs, K)``.

``E[n_dk | d] / |d| = (1/|d|) Σ_w n_dw Σ_j P(h=j|d) Q_jkw`` with Q of eq. 7: the topic composition
of the document under the exact posterior (not in the paper; offered as a model-consistent
alternative to the eq. 18 features).  Q is never built: per chunk it is a (B, J) @ (J, K) product.
"""
