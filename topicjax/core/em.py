"""One EM driver for the EM family: sparse expected counts, the regularized M-step, and the loop.

The central identity (ARTM Theorem 2, eq. 14-16): for the log-likelihood (ARTM eq. 4)

    L(Φ, Θ) = Σ_d Σ_w n_dw log Σ_t φ_wt θ_td

the E-step counts are gradients,  n_wt = φ_wt ∂L/∂φ_wt  and  n_td = θ_td ∂L/∂θ_td  (eq. 7-8),
so the regularized M-step for any differentiable regularizer R is

    φ_wt ∝ (φ_wt ∂(L + R)/∂φ_wt)_+ ,      θ_td ∝ (θ_td ∂(L + R)/∂θ_td)_+ .

:func:`log_likelihood` is a ``jax.custom_vjp`` function whose forward pass already accumulates both
gradients in one sweep over the non-zeros (per piece of a document: gather the rows of Φ and the
document's θ, two batched matrix-vector products, scatter the weighted ratios into Φ's gradient;
see :func:`expected_counts`), so one ``jax.value_and_grad(L + R)`` yields the likelihood, the
counts and the regularizer terms at the price of a single E-step.  Nothing of size D x W is ever
built: the non-zeros are processed in cache-sized blocks by ``lax.scan``.

The pieces:

* :func:`prepare` turns a :class:`~topicjax.data.corpus.Corpus` into padded device arrays
  (:class:`DocWordCounts`);
* :func:`init` / :func:`make_step` are the pure ``init(key, ...) -> state`` and
  ``step(state, data, coefs) -> state`` pair for PLSA/ARTM (PLSA is ``regularizer=None``);
* :func:`run` is the shared Python loop (tolerance, maximum iterations, tqdm progress, history)
  used by every EM-type model of the package; :func:`run_scan` is the same loop compiled with
  ``lax.scan`` for a fixed number of iterations, so whole fits can be ``vmap``-ped.

Reproducibility: on CPU the same seed gives the same bits run after run.  On GPU the
scatter-adds of the E-step use atomic additions whose order varies, so repeated runs agree to
float32 round-off, not bitwise; set ``XLA_FLAGS=--xla_gpu_deterministic_ops=true`` before JAX
starts for bitwise repeatable GPU runs (slower).  CPU and GPU results differ in the last bits.

Example
-------
>>> import jax, topicjax as tj
>>> from topicjax import em
>>> corpus, _ = tj.datasets.make_bars(n_docs=50, seed=0)
>>> data = em.prepare(corpus)
>>> state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 10)
>>> step = em.make_step()
>>> state = step(state, data, None)
>>> bool(abs(state.phi.sum(0) - 1).max() < 1e-5)
True
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from topicjax.core import kernels

__all__ = [
    "DocWordCounts",
    "EMState",
    "prepare",
    "init",
    "expected_counts",
    "log_likelihood",
    "regularized_counts",
    "normalize_columns",
    "make_step",
    "infer_theta",
    "run",
    "run_scan",
    "make_offline_step",
    "theta_counts",
    "NumericalError",
]

#: Smallest value a probability is clamped to before a log or a division (float32-safe).
EPS = 1e-30
#: Default number of slots (non-zeros plus padding) per stored chunk.  The E-step re-blocks the
#: chunks to a size that suits the number of topics and the backend (see :func:`expected_counts`).
DEFAULT_CHUNK = 16384
#: Default chunk on accelerators (GPU/TPU), where a block is a whole chunk and larger blocks
#: amortise kernel launches: on an H100, KOS at T = 100 takes 0.53 ms per step with 65536-slot
#: chunks against 0.75 ms with 16384 (experiments/results/bench_grid_gpu.md).
ACCEL_CHUNK = 65536
#: Width of a document piece: :func:`prepare` cuts every document's list of distinct words into
#: pieces of this many slots (the last piece of a document is padded with zero counts).
PIECE = 16
#: Elements (slots x topics) of one E-step block on CPU (1.6 MB of gathered float32 rows).
#: Smaller blocks pay the per-iteration overhead of the XLA loop (~20 operations per block),
#: larger ones fall out of cache; see the block-size sweep of experiments/bench_em.py.
CPU_BLOCK_ELEMENTS = 409_600
#: Elements of one E-step block on accelerators (256 MB of float32): only a batch of models
#: (:func:`expected_counts` under ``jax.vmap``) reaches it; one model's block is a whole chunk.
ACCEL_BLOCK_ELEMENTS = 1 << 26


class NumericalError(FloatingPointError):
    """Raised when a fit produces non-finite values instead of propagating them silently."""


class DocWordCounts(NamedTuple):
    """Non-zero counts of a corpus on the device, padded into ``(n_chunks, chunk)`` blocks.

    Entries are sorted by document (the corpus order).  :func:`prepare` stores them in a *sliced*
    layout: every document's distinct words are cut into pieces of ``chunk // K`` slots (``K`` =
    ``piece_doc.shape[1]`` pieces per chunk, :data:`PIECE` = 16 slots by default); each chunk is
    ``K`` whole pieces, and ``piece_doc[c, k]`` is the document of piece ``k`` of chunk ``c``.
    Padding slots (the tail of a document's last piece, and whole pieces that fill the last
    chunk) have count 0, word id 0 and the document id of their piece, so they contribute
    nothing and the document ids stay sorted.

    ``piece_doc`` may be ``None`` (a hand-built ``DocWordCounts(doc, word, count)`` in any order,
    with padding of count 0): :func:`expected_counts` then uses its unsliced kernel.  Code that
    only rescales counts, like ``data._replace(count=data.count * mask[data.doc])``, keeps the
    layout valid.
    """

    doc: Int[Array, "C B"]
    word: Int[Array, "C B"]
    count: Float[Array, "C B"]
    piece_doc: Int[Array, "C K"] | None = None


class EMState(NamedTuple):
    """State of PLSA/ARTM EM.

    ``loglik`` is L(Φ, Θ) of the parameters *before* the last step (it is a by-product of that
    step's E-step), summed with compensation so that it is accurate to float64 level even in
    float32; ``reg`` is the regularizer value at the same point.
    """

    phi: Float[Array, "W T"]
    theta: Float[Array, "T D"]
    loglik: Float[Array, ""]
    reg: Float[Array, ""]
    iteration: Int[Array, ""]


def prepare(corpus, chunk: int | None = None, dtype=jnp.float32) -> DocWordCounts:
    """Move a corpus's non-zeros to the device in the sliced layout of :class:`DocWordCounts`.

    ``chunk`` is the number of slots per stored chunk (default :data:`DEFAULT_CHUNK` on CPU,
    :data:`ACCEL_CHUNK` on accelerators, or fewer for a small corpus), rounded up to a whole
    number of pieces.  It bounds the memory of one E-step block; the E-step itself may work on a
    divisor of it (see :func:`expected_counts`).  A ``chunk`` below :data:`PIECE` also narrows the pieces to ``chunk`` slots.
    """
    nnz = corpus.nnz
    if nnz == 0:
        raise ValueError("the corpus has no tokens")
    if chunk is not None and int(chunk) < 1:
        raise ValueError(f"chunk must be a positive number of non-zeros, got {chunk}")
    width = PIECE if chunk is None else min(PIECE, int(chunk))
    offsets = np.asarray(corpus.doc_offsets, np.int64)
    n_pieces = int((-(-np.diff(offsets) // width)).sum())
    if chunk is None:
        default = DEFAULT_CHUNK if jax.default_backend() == "cpu" else ACCEL_CHUNK
        k = min(default // width, n_pieces)
        if k > 64:  # a multiple of 64 pieces leaves power-of-two divisors for re-blocking
            k = -(-k // 64) * 64
    else:
        k = -(-int(chunk) // width)
    arrays = _sliced_layout(offsets, corpus.word_ids, corpus.counts, width, k, dtype=dtype)
    return DocWordCounts(*(jnp.asarray(a) for a in arrays))


def _sliced_layout(offsets, word_ids, counts, width: int, k: int, n_chunks: int | None = None, dtype=np.float32):
    """The sliced layout of :class:`DocWordCounts` as numpy arrays ``(doc, word, count, piece_doc)``.

    ``offsets`` (D + 1) delimit the documents' entries in ``word_ids`` / ``counts`` (CSR);
    pieces of ``width`` slots, ``k`` pieces per chunk, and at least ``n_chunks`` chunks (more
    padding chunks, e.g. to give every batch of a stream one shape).  Padding slots and pieces
    carry count 0, word 0 and the id of the last document, so ids stay sorted.
    """
    offsets = np.asarray(offsets, np.int64)
    nnz = int(offsets[-1] - offsets[0])
    D = offsets.size - 1
    pieces_per_doc = -(-np.diff(offsets) // width)
    n_pieces = int(pieces_per_doc.sum())
    need = max(1, -(-n_pieces // k))
    if n_chunks is None:
        n_chunks = need
    elif n_chunks < need:
        raise ValueError(f"{n_pieces} pieces do not fit in {n_chunks} chunks of {k}")
    total_pieces = n_chunks * k
    piece_doc = np.repeat(np.arange(D, dtype=np.int64), pieces_per_doc)
    last = piece_doc[-1] if n_pieces else 0
    piece_doc = np.concatenate([piece_doc, np.full(total_pieces - n_pieces, last, np.int64)])
    # The j-th entry of document d goes to slot (first piece of d + j // width) * width + j % width.
    first_piece = np.cumsum(pieces_per_doc) - pieces_per_doc
    doc_ids = np.repeat(np.arange(D, dtype=np.int64), np.diff(offsets))
    rank = np.arange(nnz, dtype=np.int64) - (offsets[doc_ids] - offsets[0])
    slot = (first_piece[doc_ids] + rank // width) * width + rank % width
    n_slots = total_pieces * width
    word = np.zeros(n_slots, np.int32)
    word[slot] = np.asarray(word_ids)[offsets[0]:offsets[-1]]
    count = np.zeros(n_slots, np.dtype(dtype))
    count[slot] = np.asarray(counts)[offsets[0]:offsets[-1]]
    doc = np.repeat(piece_doc.astype(np.int32), width)
    return (doc.reshape(n_chunks, k * width), word.reshape(n_chunks, k * width),
            count.reshape(n_chunks, k * width), piece_doc.astype(np.int32).reshape(n_chunks, k))


def init(key, n_words: int, n_docs: int, n_topics: int, *, dtype=jnp.float32) -> EMState:
    """Random initial Φ (columns drawn uniformly then normalised) and uniform Θ.

    Uniform Θ is BigARTM's default; random Φ breaks the topic symmetry.  The result depends on
    ``key`` only (bits can differ between CPU and GPU for the same key).
    """
    phi = jax.random.uniform(key, (n_words, n_topics), dtype=dtype, minval=0.05, maxval=1.0)
    phi = phi / phi.sum(0, keepdims=True)
    theta = jnp.full((n_topics, n_docs), 1.0 / n_topics, dtype=dtype)
    z = jnp.zeros((), dtype)
    return EMState(phi, theta, z, z, jnp.zeros((), jnp.int32))


def _kahan_add(total, comp, x):
    # Compensated summation: `total + comp` carries the running sum to ~2x working precision,
    # so a million float32 log-terms keep the small changes a convergence test looks at.
    y = x - comp
    t = total + y
    return t, (t - total) - y


def expected_counts(
    phi: Float[Array, "W T"],
    theta: Float[Array, "T D"],
    data: DocWordCounts,
    *,
    need_phi: bool = True,
    need_theta: bool = True,
):
    """One sweep over the non-zeros: the log-likelihood and the gradients of L.

    Returns ``(loglik, dL/dphi (W, T) or None, dL/dtheta (T, D) or None)``.  The E-step counts
    are ``phi * dL/dphi`` = n_wt and ``theta * dL/dtheta`` = n_td (ARTM eq. 7-8).

    For data in the sliced layout of :func:`prepare` a block of ``k`` pieces of ``L`` slots is
    processed as dense batched products (:func:`_sliced_counts`): ``p = Φ[w] θ_d`` is one
    batched matrix-vector product per piece, ``∂L/∂θ_d = Σ_w (n_dw / p_dw) φ_w`` another, and
    only ``∂L/∂Φ`` needs a scatter-add.  The block size is chosen per backend and number of
    topics (:func:`_block_pieces`).  Hand-built data without ``piece_doc`` uses the unsliced
    gather/scatter kernel.  Results agree to float round-off; bits may differ between kernels,
    block sizes and backends.

    On CPU the sliced E-step runs the fused, multi-threaded C++ kernel of
    :mod:`topicjax.core.kernels` (one pass over each document's non-zeros; ``TOPICJAX_ESTEP``
    selects it or this module's pure-JAX kernels, which accelerators always use); derivatives of
    the counts themselves (second order) take their tangents from the pure-JAX kernel.

    Under ``jax.vmap`` over Φ and/or Θ (a batch of models on one corpus, e.g.
    ``ARTM.fit_grid``) the sliced kernel is not vmapped element by element: a batching rule
    (:func:`jax.custom_batching.custom_vmap`) lays the models side by side, Φ as (W, G, T) and Θ
    as (D, G, T), and runs :func:`_sliced_counts_models`, whose gathers read the G models' rows
    of a word or document as one contiguous block.  On an H100 this makes the E-step of 32 KOS
    models at T = 100 3.2x the throughput of one model at a time, where a plain vmap gives 1.1x
    (experiments/results/bench_grid_gpu.md).
    """
    phi, theta = jnp.asarray(phi), jnp.asarray(theta)
    if data.piece_doc is not None:
        # The sliced kernel never reads `doc` (pieces carry their document): leave it out, so a
        # compiled step does not keep it alive.
        outs = _counts_fn(need_phi, need_theta)(phi, theta, data._replace(doc=None))
        it = iter(outs)
        ll = next(it)
        return ll, (next(it) if need_phi else None), (next(it) if need_theta else None)
    return _flat_counts(phi, theta, data, need_phi, need_theta)


_COUNTS_FNS: dict = {}


def _counts_fn(need_phi: bool, need_theta: bool):
    """The sliced E-step as a ``custom_vmap`` function returning ``(ll, [g_phi], [g_theta])``."""
    key = (need_phi, need_theta)
    if key in _COUNTS_FNS:
        return _COUNTS_FNS[key]

    def pack(ll, g_phi, g_theta):
        return (ll,) + ((g_phi,) if need_phi else ()) + ((g_theta,) if need_theta else ())

    # kernels.sliced_counts* run the fused C++ kernel on CPU (see topicjax.core.kernels) or the
    # pure-JAX kernels given as `xla`.
    @jax.custom_batching.custom_vmap
    def counts(phi, theta, data):
        return pack(*kernels.sliced_counts(phi, theta, data, need_phi, need_theta, xla=_sliced_counts))

    @counts.def_vmap
    def counts_batched(axis_size, in_batched, phi, theta, data):
        phi_b, theta_b, data_b = in_batched
        n_out = 1 + need_phi + need_theta
        if data_b.word or data_b.piece_doc:
            # Models on different corpora layouts: no shared rows to gather, plain vmap.
            axes = (0 if phi_b else None, 0 if theta_b else None, jax.tree.map(lambda b: 0 if b else None, data_b))
            out = jax.vmap(lambda p, t, d: pack(*kernels.sliced_counts(p, t, d, need_phi, need_theta, xla=_sliced_counts)),
                           in_axes=axes)(
                phi, theta, data)
            return out, (True,) * n_out
        G = axis_size
        if G == 1:  # a batch of one model: the single-model kernel and its layout
            one = lambda x, b: x[0] if b else x  # noqa: E731
            out = counts(one(phi, phi_b), one(theta, theta_b), jax.tree.map(one, data, data_b))
            return tuple(o[None] for o in out), (True,) * n_out
        phi_w = jnp.moveaxis(phi, 0, 1) if phi_b else jnp.broadcast_to(phi[:, None], (phi.shape[0], G, phi.shape[1]))
        theta_w = (jnp.transpose(theta, (2, 0, 1)) if theta_b
                   else jnp.broadcast_to(theta.T[:, None], (theta.shape[1], G, theta.shape[0])))
        count = jnp.moveaxis(data.count, 0, -1) if data_b.count else data.count[..., None]
        ll, g_phi, g_theta = kernels.sliced_counts_models(phi_w, theta_w, count, data, need_phi, need_theta,
                                                          xla=_sliced_counts_models)
        g_phi = jnp.moveaxis(g_phi, 1, 0) if need_phi else None
        g_theta = jnp.transpose(g_theta, (1, 2, 0)) if need_theta else None
        return pack(ll, g_phi, g_theta), (True,) * n_out

    # Derivatives of the counts themselves (second order: Hessian-vector products, reverse mode
    # through EM steps) take their tangents from the pure-JAX kernel: custom_vmap has no
    # reverse-mode rule and the C++ kernel no derivatives.  The values still come from `counts`.
    @jax.custom_jvp
    def counts_ad(phi, theta, data):
        return counts(phi, theta, data)

    @counts_ad.defjvp
    def counts_jvp(primals, tangents):
        xla = lambda p, t, d: pack(*_sliced_counts(p, t, d, need_phi, need_theta))  # noqa: E731
        return counts_ad(*primals), jax.jvp(xla, primals, tangents)[1]

    _COUNTS_FNS[key] = counts_ad
    return counts_ad


def _block_pieces(n_pieces: int, width: int, n_topics: int, itemsize: int, backend: str | None = None) -> int:
    """Pieces per E-step block: a divisor of the stored chunk's ``n_pieces``.

    On CPU the gathered ``(pieces x width x T)`` rows of a block should hold about
    :data:`CPU_BLOCK_ELEMENTS` float32 values (half as many float64 ones); on accelerators the
    whole stored chunk is one block, since their per-iteration cost is a kernel launch and larger
    blocks fill the device better, unless it would exceed :data:`ACCEL_BLOCK_ELEMENTS` (a batch
    of models, where ``n_topics`` is models x topics).
    """
    backend = backend or jax.default_backend()
    limit = CPU_BLOCK_ELEMENTS if backend == "cpu" else ACCEL_BLOCK_ELEMENTS
    target = max(1, limit * 4 // (max(itemsize, 1) * width * max(n_topics, 1)))
    if backend != "cpu" and n_pieces <= target:
        return n_pieces
    if n_pieces <= target:
        return n_pieces
    best = max(d for d in range(1, target + 1) if n_pieces % d == 0)
    # A poor factorisation (e.g. a prime number of pieces) would make tiny blocks with a large
    # loop overhead; one larger block is the better of the two evils.
    return best if 4 * best >= target else n_pieces


def _sliced_counts(phi, theta, data, need_phi, need_theta, theta_rows=None):
    """The E-step over the sliced layout (see :class:`DocWordCounts`), in blocks of pieces.

    Per block of ``k`` pieces of ``L`` slots (ARTM eq. 4, 7-8):

    * ``rows = Φ[w]`` (k, L, T) and the topic vector ``θ_d`` of each piece (k, T) are gathered
      once;
    * ``p = einsum(rows, θ)`` (k, L): a batched matrix-vector product, ``r = n / p``;
    * ``∂L/∂θ_d += einsum(r, rows)``: another one, added into the gradient of Θ per piece (k
      columns, sorted), instead of a scatter of every non-zero;
    * ``∂L/∂Φ_w += r θ_d``: a scatter-add of the (k L, T) block.

    Compared with gathering θ_d for every non-zero and scattering both gradients by non-zero
    (the previous kernel, :func:`_flat_counts`), this halves the (non-zero x T) memory traffic:
    on KOS on CPU it is 1.4x, 2.0x and 2.4x faster at T = 50, 100, 200 than that kernel with its
    old 16k chunks (the kernel sweep of experiments/results/bench_em.md).

    ``theta_rows`` chooses how θ_d is read and its gradient written: ``False`` (the CPU default)
    gathers columns of Θ (T, D) and adds into a (T, D) gradient directly, which saves two
    transposed (D, T) copies of Θ (on 20 Newsgroups at T = 100 this keeps the peak memory of a
    step under 2x the counts + Φ + Θ) and is as fast at T <= 100 on CPU (up to ~20% slower at
    T = 200); ``True`` (the default elsewhere) works on rows of Θᵀ, whose contiguous reads suit
    accelerators.
    """
    W, T = phi.shape
    D = theta.shape[1]
    dtype = phi.dtype
    if theta_rows is None:
        theta_rows = jax.default_backend() != "cpu"
    C, B = data.word.shape
    K = data.piece_doc.shape[1]
    L = B // K
    k = _block_pieces(K, L, T, jnp.dtype(dtype).itemsize)
    n_blocks = C * (K // k)
    blocks = (
        data.piece_doc.reshape(n_blocks, k),
        data.word.reshape(n_blocks, k, L),
        data.count.reshape(n_blocks, k, L).astype(dtype),
    )
    theta_t = theta.T if theta_rows else None
    hi = jax.lax.Precision.HIGHEST  # no reduced-precision (TF32/bf16) products on accelerators

    def body(carry, blk):
        ll, comp, g_phi, g_theta = carry
        d, w, n = blk
        rows = phi[w]  # (k, L, T)
        th = theta_t[d] if theta_rows else theta[:, d].T  # (k, T)
        p = jnp.maximum(jnp.einsum("klt,kt->kl", rows, th, precision=hi), EPS)
        ll, comp = _kahan_add(ll, comp, jnp.sum(n * jnp.log(p)))
        r = n / p
        if need_theta:
            if theta_rows:
                g_d = jnp.einsum("kl,klt->kt", r, rows, precision=hi)
                g_theta = g_theta.at[d].add(g_d, indices_are_sorted=True)
            else:
                g_d = jnp.einsum("kl,klt->tk", r, rows, precision=hi)
                g_theta = g_theta.at[:, d].add(g_d, indices_are_sorted=True)
        if need_phi:
            g_phi = g_phi.at[w.reshape(-1)].add((r[:, :, None] * th[:, None, :]).reshape(k * L, T))
        return (ll, comp, g_phi, g_theta), None

    z = jnp.zeros((), dtype)
    g_phi0 = jnp.zeros((W, T), dtype) if need_phi else z
    g_theta0 = (jnp.zeros((D, T) if theta_rows else (T, D), dtype)) if need_theta else z
    (ll, _, g_phi, g_theta), _ = jax.lax.scan(body, (z, z, g_phi0, g_theta0), blocks)
    if not need_theta:
        g_theta = None
    elif theta_rows:
        g_theta = g_theta.T
    return ll, (g_phi if need_phi else None), g_theta


def _sliced_counts_models(phi, theta, count, data, need_phi, need_theta):
    """:func:`_sliced_counts` for G models side by side on one corpus layout.

    ``phi`` (W, G, T), ``theta`` (D, G, T) (rows of every model's Θᵀ), ``count`` (C, B, G) or
    (C, B, 1) (the same counts for all models).  Returns ``ll`` (G,), ``∂L/∂Φ`` (W, G, T) and
    ``∂L/∂Θ`` as (D, G, T).  Each gathered row ``Φ[w]`` is the (G, T) block of all models, so the
    index work of a non-zero is shared by the G models and reads are contiguous; the products
    and the per-model normalisations ``p = Σ_t φ θ`` are batched over ``g``.
    """
    W, G, T = phi.shape
    D = theta.shape[0]
    dtype = phi.dtype
    C, B = data.word.shape
    K = data.piece_doc.shape[1]
    L = B // K
    k = _block_pieces(K, L, G * T, jnp.dtype(dtype).itemsize)
    n_blocks = C * (K // k)
    Gc = count.shape[-1]
    blocks = (
        data.piece_doc.reshape(n_blocks, k),
        data.word.reshape(n_blocks, k, L),
        count.reshape(n_blocks, k, L, Gc).astype(dtype),
    )
    hi = jax.lax.Precision.HIGHEST

    def body(carry, blk):
        ll, comp, g_phi, g_theta = carry
        d, w, n = blk
        rows = phi[w]  # (k, L, G, T)
        th = theta[d]  # (k, G, T)
        p = jnp.maximum(jnp.einsum("klgt,kgt->klg", rows, th, precision=hi), EPS)
        ll, comp = _kahan_add(ll, comp, jnp.sum(n * jnp.log(p), axis=(0, 1)))
        r = n / p  # (k, L, G)
        if need_theta:
            g_theta = g_theta.at[d].add(jnp.einsum("klg,klgt->kgt", r, rows, precision=hi), indices_are_sorted=True)
        if need_phi:
            g_phi = g_phi.at[w.reshape(-1)].add((r[..., None] * th[:, None]).reshape(k * L, G, T))
        return (ll, comp, g_phi, g_theta), None

    z = jnp.zeros((G,), dtype)
    g_phi0 = jnp.zeros((W, G, T), dtype) if need_phi else jnp.zeros((), dtype)
    g_theta0 = jnp.zeros((D, G, T), dtype) if need_theta else jnp.zeros((), dtype)
    (ll, _, g_phi, g_theta), _ = jax.lax.scan(body, (z, z, g_phi0, g_theta0), blocks)
    return ll, (g_phi if need_phi else None), (g_theta if need_theta else None)


def _flat_counts(phi, theta, data, need_phi, need_theta):
    """The unsliced E-step: per non-zero, gather ``Φ[w]`` and ``Θᵀ[d]``, scatter both gradients.

    Used for hand-built :class:`DocWordCounts` without ``piece_doc`` (any order of entries).
    Chunks are re-blocked like the sliced kernel's (a divisor of the stored chunk).
    """
    W, T = phi.shape
    D = theta.shape[1]
    dtype = phi.dtype
    C, B = data.word.shape
    b = _block_pieces(B, 1, T, jnp.dtype(dtype).itemsize)
    n_blocks = C * (B // b)
    blocks = (
        data.doc.reshape(n_blocks, b),
        data.word.reshape(n_blocks, b),
        data.count.reshape(n_blocks, b).astype(dtype),
    )
    theta_t = theta.T

    def body(carry, chunk):
        ll, comp, g_phi, g_theta = carry
        d, w, n = chunk
        rows = phi[w]  # (B, T)
        cols = theta_t[d]  # (B, T)
        p = jnp.maximum(jnp.sum(rows * cols, axis=-1), EPS)
        ll, comp = _kahan_add(ll, comp, jnp.sum(n * jnp.log(p)))
        r = n / p
        if need_phi:
            g_phi = g_phi.at[w].add(r[:, None] * cols)
        if need_theta:
            g_theta = g_theta.at[d].add(r[:, None] * rows)
        return (ll, comp, g_phi, g_theta), None

    z = jnp.zeros((), dtype)
    g_phi0 = jnp.zeros((W, T), dtype) if need_phi else jnp.zeros((), dtype)
    g_theta0 = jnp.zeros((D, T), dtype) if need_theta else jnp.zeros((), dtype)
    (ll, _, g_phi, g_theta), _ = jax.lax.scan(body, (z, z, g_phi0, g_theta0), blocks)
    return ll, (g_phi if need_phi else None), (g_theta.T if need_theta else None)


@jax.custom_vjp
def log_likelihood(phi: Float[Array, "W T"], theta: Float[Array, "T D"], data: DocWordCounts):
    """L(Φ, Θ) = Σ n_dw log Σ_t φ_wt θ_td (ARTM eq. 4), differentiable in Φ and Θ.

    Its gradient is computed in the same sweep as its value (see the module docstring), so
    ``jax.value_and_grad`` costs one E-step.  Probabilities are clamped at ``EPS``.
    """
    return expected_counts(phi, theta, data, need_phi=False, need_theta=False)[0]


def _ll_fwd(phi, theta, data):
    ll, g_phi, g_theta = expected_counts(phi, theta, data)
    return ll, (g_phi, g_theta, data)


def _ll_bwd(res, ct):
    g_phi, g_theta, data = res
    return ct * g_phi, ct * g_theta, jax.tree.map(lambda a: None, data)


log_likelihood.defvjp(_ll_fwd, _ll_bwd)


def _clamped(x):
    """``max(x, EPS)`` in value with the gradient of ``x`` (a straight-through clamp)."""
    return x + jax.lax.stop_gradient(jnp.maximum(x, EPS) - x)


def regularized_counts(phi, theta, data, regularizer=None, coefs=None):
    """E-step plus regularizer terms of Theorem 2 via one ``jax.value_and_grad``.

    ``regularizer(phi, theta, coefs) -> scalar`` (or ``None`` for PLSA).  Returns
    ``(loglik, reg, A_phi, A_theta)`` with ``A_phi = φ ⊙ ∂(L+R)/∂φ = n_wt + φ ∂R/∂φ`` and
    ``A_theta = n_td + θ ∂R/∂θ`` (eq. 15-16, before the positive part and normalisation).

    The regularizer sees Φ and Θ clamped at ``EPS`` and the products use the clamped values, so
    terms such as ``β Σ log φ_wt`` (smoothing, eq. 23) give their finite limit ``φ ∂R/∂φ = β``
    at φ = 0 instead of ``0 · ∞``.  The likelihood is differentiated at Φ and Θ themselves (the
    clamp only reaches R, through a straight-through :func:`_clamped`): the E-step then reads
    the arrays it was given instead of clamped copies, which XLA would have to materialise
    (one W x T and one T x D buffer fewer at the peak of a step).
    """
    if regularizer is None:

        def objective(p, t):
            ll = log_likelihood(p, t, data)
            return ll, (ll, jnp.zeros((), ll.dtype))

    else:

        def objective(p, t):
            ll = log_likelihood(p, t, data)
            r = jnp.asarray(regularizer(_clamped(p), _clamped(t), coefs), ll.dtype)
            return ll + r, (ll, r)

    (_, (ll, r)), (g_phi, g_theta) = jax.value_and_grad(objective, argnums=(0, 1), has_aux=True)(phi, theta)
    return ll, r, jnp.maximum(phi, EPS) * g_phi, jnp.maximum(theta, EPS) * g_theta


def normalize_columns(a: Float[Array, "N K"]) -> Float[Array, "N K"]:
    """Column-wise ``a₊ / Σ a₊``; a column with no positive entry becomes all zeros
    (an over-regularized topic or document, ARTM Notes 1-2) instead of NaN."""
    a = jnp.maximum(a, 0)
    s = a.sum(0, keepdims=True)
    return jnp.where(s > 0, a / jnp.where(s > 0, s, 1), 0)


def make_step(regularizer: Callable | None = None, *, update_phi: bool = True, jit: bool = True):
    """Build ``step(state, data, coefs) -> state``: one regularized EM iteration (ARTM eq. 14-16).

    ``regularizer(phi, theta, coefs) -> scalar`` is the combined R of eq. 13 with its
    coefficients in the pytree ``coefs`` (traced: changing them does not recompile, and a grid of
    them can be vmapped).  ``update_phi=False`` keeps Φ fixed (inference for new documents).
    """

    def step(state: EMState, data: DocWordCounts, coefs: Any = None) -> EMState:
        ll, r, a_phi, a_theta = regularized_counts(state.phi, state.theta, data, regularizer, coefs)
        phi = normalize_columns(a_phi) if update_phi else state.phi
        theta = normalize_columns(a_theta)
        return EMState(phi, theta, ll, r, state.iteration + 1)

    return jax.jit(step) if jit else step


def theta_counts(phi, theta, data, regularizer: Callable | None = None, coefs: Any = None):
    """``θ ⊙ ∂(L + R)/∂θ`` with Φ fixed (eq. 16 before the positive part and normalisation),
    without the Φ half of the E-step (``expected_counts(..., need_phi=False)``), so it costs
    about half a full E-step.  With a regularizer, Θ and Φ are clamped at ``EPS`` for its
    gradient and the product as in :func:`regularized_counts`."""
    _, _, g = expected_counts(phi, theta, data, need_phi=False)
    if regularizer is None:
        return theta * g
    theta_c = jnp.maximum(theta, EPS)
    phi_c = jnp.maximum(phi, EPS)
    g = g + jax.grad(lambda t: jnp.asarray(regularizer(phi_c, t, coefs), g.dtype))(theta_c)
    return theta_c * g


def make_offline_step(regularizer: Callable | None = None, *, doc_passes: int = 10, jit: bool = True):
    """BigARTM's offline pass (``ARTM.fit_offline`` with ``num_document_passes``), as
    ``step(state, data, coefs) -> state``.

    Θ is not carried over: each pass restarts it from uniform and runs ``doc_passes - 1``
    iterations of eq. 16 with Φ fixed (:func:`theta_counts`, half an E-step each), then one full
    regularized E-step (:func:`regularized_counts`) whose counts give the new Φ (eq. 15) and Θ.
    ``doc_passes = 1`` would learn nothing from a uniform Θ; use :func:`make_step` (Θ carried
    over, one E-step per pass) for that.  On KOS this reaches a lower hold-out perplexity in a
    few passes than carried-over EM does at all (experiments/results/bench_em.md).  The returned
    ``loglik`` is L at Φ and the Θ of the final E-step.
    """
    if doc_passes < 2:
        raise ValueError(f"doc_passes must be at least 2 (Θ restarts from uniform), got {doc_passes}")

    def step(state: EMState, data: DocWordCounts, coefs: Any = None) -> EMState:
        T = state.theta.shape[0]
        theta = jnp.full_like(state.theta, 1.0 / T)
        theta = jax.lax.fori_loop(
            0, doc_passes - 1,
            lambda i, th: normalize_columns(theta_counts(state.phi, th, data, regularizer, coefs)), theta)
        ll, r, a_phi, a_theta = regularized_counts(state.phi, theta, data, regularizer, coefs)
        return EMState(normalize_columns(a_phi), normalize_columns(a_theta), ll, r, state.iteration + 1)

    return jax.jit(step) if jit else step


def infer_theta(
    phi: Float[Array, "W T"],
    data: DocWordCounts,
    n_docs: int,
    *,
    n_iter: int = 30,
    regularizer: Callable | None = None,
    coefs: Any = None,
) -> Float[Array, "T D"]:
    """Θ of (new) documents with Φ fixed: ``n_iter`` EM iterations of eq. 16 from uniform Θ."""
    T = phi.shape[1]
    theta0 = jnp.full((T, n_docs), 1.0 / T, phi.dtype)
    return _infer_theta(phi, theta0, data, n_iter, regularizer, coefs)


def _infer_theta_impl(phi, theta0, data, n_iter, regularizer, coefs):
    if regularizer is None:

        def body(theta, _):
            _, _, g = expected_counts(phi, theta, data, need_phi=False)
            return normalize_columns(theta * g), None

    else:

        def body(theta, _):
            _, _, _, a_theta = regularized_counts(phi, theta, data, regularizer, coefs)
            return normalize_columns(a_theta), None

    theta, _ = jax.lax.scan(body, theta0, None, length=n_iter)
    return theta


_infer_theta = jax.jit(_infer_theta_impl, static_argnums=(3, 4))


def run(
    step: Callable,
    state,
    *,
    max_iter: int,
    tol: float = 0.0,
    objective: Callable = lambda s: s.loglik,
    minimize: bool = False,
    progress: bool = True,
    desc: str = "EM",
    callback: Callable | None = None,
    check_finite: Callable | None = None,
):
    """The shared EM loop of every EM-type model.

    Calls ``step(state)`` up to ``max_iter`` times and stops early when the relative change of
    ``objective(state)`` falls below ``tol`` (``tol=0`` runs all iterations).  Shows a tqdm bar
    when ``progress``; ``callback(i, state)`` may return a dict of scores, which is recorded.
    With ``minimize=False`` the objective is a likelihood to maximise (EM); with True, a
    criterion to minimise (BIC for GEM).  ``check_finite(state) -> bool`` guards against NaN:
    a False ends the fit with :class:`NumericalError` naming the iteration.

    Returns ``(state, history)``, history being a list of dicts with the objective and scores of
    each iteration.
    """
    from tqdm.auto import tqdm

    history: list[dict] = []
    prev = None
    bar = tqdm(total=max_iter, desc=desc, disable=not progress, leave=False)
    try:
        for i in range(max_iter):
            state = step(state)
            obj = float(objective(state))
            if check_finite is not None and not bool(check_finite(state)):
                raise NumericalError(f"{desc}: non-finite parameters after iteration {i + 1}")
            if not np.isfinite(obj):
                raise NumericalError(f"{desc}: objective is {obj} after iteration {i + 1}")
            rec = {"iteration": i + 1, "objective": obj}
            if callback is not None:
                rec.update(callback(i, state) or {})
            history.append(rec)
            bar.update(1)
            bar.set_postfix(objective=f"{obj:.6g}")
            if prev is not None and tol > 0:
                change = (prev - obj) if minimize else (obj - prev)
                if abs(change) <= tol * max(abs(obj), 1e-30):
                    break
            prev = obj
    finally:
        bar.close()
    return state, history


def run_scan(step: Callable, state, n_iter: int):
    """``n_iter`` steps compiled into one ``lax.scan``; returns ``(state, objective trace)``.

    ``step(state) -> state`` must be a pure JAX function (close over data and coefficients).
    Because the whole fit is one traced computation it can be ``jax.vmap``-ped over coefficients,
    seeds or initial states.
    """

    def body(s, _):
        s = step(s)
        return s, s.loglik

    return jax.lax.scan(body, state, None, length=n_iter)
