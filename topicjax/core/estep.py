"""The E-step of the EM family: one sweep over the non-zeros gives L and both gradients.

The central identity (ARTM Theorem 2, eq. 14-16): for the log-likelihood (ARTM eq. 4)

    L(Φ, Θ) = Σ_d Σ_w n_dw log Σ_t φ_wt θ_td

the E-step counts are gradients, ``n_wt = φ_wt ∂L/∂φ_wt`` and ``n_td = θ_td ∂L/∂θ_td`` (eq. 7-8).
:func:`log_likelihood` is a ``jax.custom_vjp`` function whose forward pass already accumulates both
gradients in one sweep over the non-zeros (:func:`expected_counts`), so one
``jax.value_and_grad(L + R)`` yields the likelihood, the counts and the regularizer terms at the
price of a single E-step (:mod:`topicjax.core.mstep`).

A layout object may bring its own E-step: when ``data`` has a method
``expected_counts(phi, theta, need_phi, need_theta)`` (the sharded layout of
:mod:`topicjax.scale.distributed`), :func:`log_likelihood` calls it instead of the local kernels.

Reproducibility: on CPU the same inputs give the same bits run after run.  On GPU the
scatter-adds use atomic additions whose order varies, so repeated runs agree to float32
round-off, not bitwise; set ``XLA_FLAGS=--xla_gpu_deterministic_ops=true`` before JAX starts for
bitwise repeatable GPU runs (slower).  CPU and GPU results differ in the last bits.

>>> import jax, topicjax as tj
>>> from topicjax.core import estep, layout
>>> corpus, _, _ = tj.datasets.make_bars(n_docs=50, seed=0)
>>> data = layout.prepare(corpus)
>>> phi = jax.numpy.full((corpus.n_words, 4), 1 / corpus.n_words)
>>> theta = jax.numpy.full((4, corpus.n_docs), 0.25)
>>> ll, g_phi, g_theta = estep.expected_counts(phi, theta, data)
>>> bool(abs(float((theta * g_theta).sum()) - corpus.n_tokens) < 1e-2)   # Σ n_td = n
True
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from topicjax.core import kernels
from topicjax.core.layout import DocWordCounts
from topicjax.core.numerics import EPS, kahan_add

__all__ = ["EPS", "expected_counts", "log_likelihood", "log_likelihood_theta", "sliced_counts", "sliced_counts_models",
           "flat_counts", "block_pieces",
           "CPU_BLOCK_ELEMENTS", "ACCEL_BLOCK_ELEMENTS"]

#: Elements (slots x topics) of one E-step block on CPU (1.6 MB of gathered float32 rows).
#: Smaller blocks pay the per-iteration overhead of the XLA loop (~20 operations per block),
#: larger ones fall out of cache; see the block-size sweep of experiments/bench_em.py.
CPU_BLOCK_ELEMENTS = 409_600
#: Elements of one E-step block on accelerators (256 MB of float32): only a batch of models
#: (:func:`expected_counts` under ``jax.vmap``) reaches it; one model's block is a whole chunk.
ACCEL_BLOCK_ELEMENTS = 1 << 26


def _log_and_ratio(n, q):
    """``(n log p, n / p)`` with ``p = max(q, EPS)``, whose derivatives are finite at the clamp.

    The values are those of the plain expressions.  Their derivatives are not: where ``q <=
    EPS`` (a document whose θ is all zeros, after sparsing) the derivative of ``n / p`` is
    ``-n / p² · dp`` with ``1 / EPS² = 1e60`` -- ``inf`` in float32 -- times ``dp = 0``: NaN.
    Derivatives of the counts (second order, :mod:`topicjax.tune`) would then turn every
    hypergradient into NaN.  Here the clamped entries' ``n / EPS`` is a constant (its derivative
    an exact zero), and the other branch divides by ``q`` only where ``q > EPS``.
    """
    live = q > EPS
    p = jnp.where(live, q, jnp.asarray(EPS, q.dtype))
    return n * jnp.log(p), jnp.where(live, n / jnp.where(live, q, 1), n / jnp.asarray(EPS, q.dtype))


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
    processed as dense batched products (:func:`sliced_counts`): ``p = Φ[w] θ_d`` is one
    batched matrix-vector product per piece, ``∂L/∂θ_d = Σ_w (n_dw / p_dw) φ_w`` another, and
    ``∂L/∂Φ`` is reduced per piece of a word-sorted mirror of the layout when it has one (the
    XLA E-step, see :func:`sliced_counts`).  The block size is chosen per backend and number of
    topics (:func:`block_pieces`).  Hand-built data without ``piece_doc`` uses the unsliced
    gather/scatter kernel.  Results agree to float round-off; bits may differ between kernels,
    block sizes and backends.

    On CPU the sliced E-step runs the fused, multi-threaded C++ kernel of
    :mod:`topicjax.core.kernels` (one pass over each document's non-zeros; ``TOPICJAX_ESTEP``
    selects it or this module's pure-JAX kernels, which accelerators always use); derivatives of
    the counts themselves (second order) take their tangents from the pure-JAX kernel.

    Under ``jax.vmap`` over Φ and/or Θ (a batch of models on one corpus, e.g.
    ``ARTM.fit_grid``) the sliced kernel is not vmapped element by element: a batching rule
    (:func:`jax.custom_batching.custom_vmap`) lays the models side by side, Φ as (W, G, T) and Θ
    as (D, G, T), and runs :func:`sliced_counts_models`, whose gathers read the G models' rows
    of a word or document as one contiguous block.  On an H100 this makes the E-step of 32 KOS
    models at T = 100 3.2x the throughput of one model at a time, where a plain vmap gives 1.1x
    (experiments/results/bench_grid_gpu.md).
    """
    own = getattr(data, "expected_counts", None)
    if own is not None:  # a layout with its own E-step (documents sharded over devices)
        return own(phi, theta, need_phi=need_phi, need_theta=need_theta)
    phi, theta = jnp.asarray(phi), jnp.asarray(theta)
    if data.piece_doc is not None:
        # The sliced kernel never reads `doc` (pieces carry their document): leave it out, so a
        # compiled step does not keep it alive.
        outs = _counts_fn(need_phi, need_theta)(phi, theta, data._replace(doc=None))
        it = iter(outs)
        ll = next(it)
        return ll, (next(it) if need_phi else None), (next(it) if need_theta else None)
    return flat_counts(phi, theta, data, need_phi, need_theta)


_COUNTS_FNS: dict = {}


def _counts_fn(need_phi: bool, need_theta: bool):
    """The sliced E-step as a ``custom_vmap`` function returning ``(ll, [g_phi], [g_theta])``."""
    key = (need_phi, need_theta)
    if key in _COUNTS_FNS:
        return _COUNTS_FNS[key]

    def pack(ll, g_phi, g_theta):
        return (ll,) + ((g_phi,) if need_phi else ()) + ((g_theta,) if need_theta else ())

    # kernels.estep_counts* run the fused C++ kernel on CPU (see topicjax.core.kernels) or the
    # pure-JAX kernels given as `xla`.
    @jax.custom_batching.custom_vmap
    def counts(phi, theta, data):
        return pack(*kernels.estep_counts(phi, theta, data, need_phi, need_theta, xla=sliced_counts))

    @counts.def_vmap
    def counts_batched(axis_size, in_batched, phi, theta, data):
        phi_b, theta_b, data_b = in_batched
        n_out = 1 + need_phi + need_theta
        if data_b.word or data_b.piece_doc:
            # Models on different corpora layouts: no shared rows to gather, plain vmap.
            axes = (0 if phi_b else None, 0 if theta_b else None, jax.tree.map(lambda b: 0 if b else None, data_b))
            out = jax.vmap(lambda p, t, d: pack(*kernels.estep_counts(p, t, d, need_phi, need_theta, xla=sliced_counts)),
                           in_axes=axes)(phi, theta, data)
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
        ll, g_phi, g_theta = kernels.estep_counts_models(phi_w, theta_w, count, data, need_phi, need_theta,
                                                         xla=sliced_counts_models)
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
        xla = lambda p, t, d: pack(*sliced_counts(p, t, d, need_phi, need_theta))  # noqa: E731
        return counts_ad(*primals), jax.jvp(xla, primals, tangents)[1]

    _COUNTS_FNS[key] = counts_ad
    return counts_ad


def block_pieces(n_pieces: int, width: int, n_topics: int, itemsize: int, backend: str | None = None) -> int:
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


def _use_mirror(data, per_slot):
    """Whether the XLA E-step reduces ∂L/∂Φ over the word-sorted mirror: when ``data`` has one,
    unless ``per_slot`` (or, when that is ``None``, ``TOPICJAX_ESTEP=xla_scatter``) asks for the
    scatter of every slot."""
    if per_slot is None:
        per_slot = kernels.get_backend() == "xla_scatter"
    return getattr(data, "mirror", None) is not None and not per_slot


def _word_blocks(data, n_topics: int, itemsize: int):
    """The mirror's slots and words as ``(n_blocks, k, L)`` and ``(n_blocks, k)`` blocks: ``k`` a
    divisor of its chunk's pieces (:func:`block_pieces`), so that a block never spans two
    chunks and its words are sorted (:class:`~topicjax.core.layout.WordMirror`)."""
    slot, word = data.mirror
    Cw, Kw = word.shape
    L = slot.shape[1] // Kw
    k = block_pieces(Kw, L, n_topics, itemsize)
    return slot.reshape(Cw * (Kw // k), k, L), word.reshape(Cw * (Kw // k), k)


def _word_pass(phi, theta, count, piece_doc, data, need_ll, theta_rows=True):
    """``(ll, ∂L/∂Φ)`` reduced per word piece of the mirror (ARTM eq. 4, 7): ``∂L/∂φ_w = Σ_d
    (n_dw / p_dw) θ_d`` over the word piece's slots, then one sorted scatter of a row per piece.

    ``phi`` (W, T) or (W, G, T); ``theta`` the rows of Θ, Θᵀ (D, T) or (D, G, T), or, with
    ``theta_rows=False`` (one model), Θ itself (T, D), read a column per slot; ``count`` the
    layout's counts flat, (S,) or (S, Gc); ``piece_doc`` the layout's pieces' documents flat.
    ``ll`` is the log-likelihood when ``need_ll`` (else 0).  A mirror slot past the layout's end
    (padding) reads count 0 and adds nothing; a padding piece's word is outside Φ and its row is
    dropped (``mode="drop"``), so padding never touches a real word.
    """
    dtype = phi.dtype
    slots, words = _word_blocks(data, phi[0].size, jnp.dtype(dtype).itemsize)
    L = slots.shape[-1]
    models = phi.ndim == 3
    hi = jax.lax.Precision.HIGHEST

    def body(carry, blk):
        ll, comp, g_phi = carry
        src, w = blk  # (k, L), (k,)
        n = jnp.take(count, src, axis=0, mode="fill", fill_value=0)  # (k, L) or (k, L, Gc)
        d = jnp.take(piece_doc, src // L, mode="clip")
        ph = jnp.take(phi, w, axis=0, mode="clip")  # (k, T) or (k, G, T)
        if not theta_rows:
            cols = theta[:, d]  # (T, k, L)
            nlogp, r = _log_and_ratio(n, jnp.einsum("tkl,kt->kl", cols, ph, precision=hi))
            g_w = jnp.einsum("kl,tkl->kt", r, cols, precision=hi)
            part = jnp.sum(nlogp)
        elif models:
            rows = theta[d]  # (k, L, G, T)
            nlogp, r = _log_and_ratio(n, jnp.einsum("klgt,kgt->klg", rows, ph, precision=hi))
            g_w = jnp.einsum("klg,klgt->kgt", r, rows, precision=hi)
            part = jnp.sum(nlogp, axis=(0, 1))
        else:
            rows = theta[d]  # (k, L, T)
            nlogp, r = _log_and_ratio(n, jnp.einsum("klt,kt->kl", rows, ph, precision=hi))
            g_w = jnp.einsum("kl,klt->kt", r, rows, precision=hi)
            part = jnp.sum(nlogp)
        if need_ll:
            ll, comp = kahan_add(ll, comp, part)
        # the words of a block never decrease (layout.WordMirror; tests/core/test_estep_sorted.py)
        g_phi = g_phi.at[w].add(g_w, mode="drop", indices_are_sorted=True)
        return (ll, comp, g_phi), None

    z = jnp.zeros(phi.shape[1:-1], dtype)
    (ll, _, g_phi), _ = jax.lax.scan(body, (z, z, jnp.zeros(phi.shape, dtype)), (slots, words))
    return ll, g_phi


def sliced_counts(phi, theta, data, need_phi, need_theta, theta_rows=None, per_slot=None):
    """The E-step over the sliced layout (see :class:`DocWordCounts`), in blocks of pieces.

    Per block of ``k`` pieces of ``L`` slots (ARTM eq. 4, 7-8):

    * ``rows = Φ[w]`` (k, L, T) and the topic vector ``θ_d`` of each piece (k, T) are gathered
      once;
    * ``p = einsum(rows, θ)`` (k, L): a batched matrix-vector product, ``r = n / p``;
    * ``∂L/∂θ_d += einsum(r, rows)``: another one, added into the gradient of Θ per piece (k
      columns, sorted), instead of a scatter of every non-zero;
    * ``∂L/∂Φ``: with the layout's word-sorted mirror (``data.mirror``, see
      :class:`~topicjax.core.layout.WordMirror`), a second pass over the mirror's word pieces
      (:func:`_word_pass`): per piece of one word ``w``, ``p`` again from ``φ_w`` and the
      gathered ``θ_d`` rows, ``∂L/∂φ_w += einsum(r, θ_d rows)``, then a scatter of one row per
      piece whose indices are sorted -- no atomic add per non-zero on a GPU, and padding never
      adds into a real word.  Without a mirror, or with ``per_slot=True`` (default: when
      ``TOPICJAX_ESTEP=xla_scatter``), ``∂L/∂Φ_w += r θ_d`` is a scatter-add of the (k L, T)
      block, slot by slot, its indices unsorted.  The passes compute ``p`` once each; when only
      ∂L/∂Φ is asked, the word pass alone runs and sums the log-likelihood.

    Compared with gathering θ_d for every non-zero and scattering both gradients by non-zero
    (the previous kernel, :func:`flat_counts`), this halves the (non-zero x T) memory traffic:
    on KOS on CPU it is 1.4x, 2.0x and 2.4x faster at T = 50, 100, 200 than that kernel with its
    old 16k chunks (the kernel sweep of experiments/results/bench_em.md).

    ``theta_rows`` chooses how θ_d is read and its gradient written: ``False`` (the CPU default)
    gathers columns of Θ (T, D) and adds into a (T, D) gradient directly, which saves two
    transposed (D, T) copies of Θ (on 20 Newsgroups at T = 100 this keeps the peak memory of a
    step under 2x the counts + Φ + Θ) and is as fast at T <= 100 on CPU (up to ~20% slower at
    T = 200); ``True`` (the default elsewhere) works on rows of Θᵀ, whose contiguous reads suit
    accelerators.  The word pass reads θ_d the same way.
    """
    W, T = phi.shape
    D = theta.shape[1]
    dtype = phi.dtype
    if theta_rows is None:
        theta_rows = jax.default_backend() != "cpu"
    C, B = data.word.shape
    K = data.piece_doc.shape[1]
    L = B // K
    k = block_pieces(K, L, T, jnp.dtype(dtype).itemsize)
    n_blocks = C * (K // k)
    blocks = (
        data.piece_doc.reshape(n_blocks, k),
        data.word.reshape(n_blocks, k, L),
        data.count.reshape(n_blocks, k, L).astype(dtype),
    )
    theta_t = theta.T if theta_rows else None
    hi = jax.lax.Precision.HIGHEST  # no reduced-precision (TF32/bf16) products on accelerators
    by_word = need_phi and _use_mirror(data, per_slot)
    g_phi_word = None
    if by_word:
        # θ_d read as the document pass reads it: rows of the same Θᵀ, or columns of Θ (on CPU,
        # where a transposed copy would add D x T to the step's peak memory)
        ll_word, g_phi_word = _word_pass(phi, theta_t if theta_rows else theta, data.count.reshape(-1).astype(dtype),
                                         data.piece_doc.reshape(-1), data, not need_theta, theta_rows)
        if not need_theta:  # the word pass alone, which summed L
            return ll_word, g_phi_word, None
    scatter_phi = need_phi and not by_word

    def body(carry, blk):
        ll, comp, g_phi, g_theta = carry
        d, w, n = blk
        rows = phi[w]  # (k, L, T)
        th = theta_t[d] if theta_rows else theta[:, d].T  # (k, T)
        nlogp, r = _log_and_ratio(n, jnp.einsum("klt,kt->kl", rows, th, precision=hi))
        ll, comp = kahan_add(ll, comp, jnp.sum(nlogp))
        if need_theta:
            if theta_rows:
                g_d = jnp.einsum("kl,klt->kt", r, rows, precision=hi)
                g_theta = g_theta.at[d].add(g_d, indices_are_sorted=True)
            else:
                g_d = jnp.einsum("kl,klt->tk", r, rows, precision=hi)
                g_theta = g_theta.at[:, d].add(g_d, indices_are_sorted=True)
        if scatter_phi:
            g_phi = g_phi.at[w.reshape(-1)].add((r[:, :, None] * th[:, None, :]).reshape(k * L, T))
        return (ll, comp, g_phi, g_theta), None

    z = jnp.zeros((), dtype)
    g_phi0 = jnp.zeros((W, T), dtype) if scatter_phi else z
    g_theta0 = (jnp.zeros((D, T) if theta_rows else (T, D), dtype)) if need_theta else z
    (ll, _, g_phi, g_theta), _ = jax.lax.scan(body, (z, z, g_phi0, g_theta0), blocks)
    if by_word:
        g_phi = g_phi_word
    if not need_theta:
        g_theta = None
    elif theta_rows:
        g_theta = g_theta.T
    return ll, (g_phi if need_phi else None), g_theta


def sliced_counts_models(phi, theta, count, data, need_phi, need_theta, per_slot=None):
    """:func:`sliced_counts` for G models side by side on one corpus layout.

    ``phi`` (W, G, T), ``theta`` (D, G, T) (rows of every model's Θᵀ), ``count`` (C, B, G) or
    (C, B, 1) (the same counts for all models).  Returns ``ll`` (G,), ``∂L/∂Φ`` (W, G, T) and
    ``∂L/∂Θ`` as (D, G, T).  Each gathered row ``Φ[w]`` is the (G, T) block of all models, so the
    index work of a non-zero is shared by the G models and reads are contiguous; the products
    and the per-model normalisations ``p = Σ_t φ θ`` are batched over ``g``.  ∂L/∂Φ is reduced
    over the word-sorted mirror as in :func:`sliced_counts` (``per_slot`` likewise).
    """
    W, G, T = phi.shape
    D = theta.shape[0]
    dtype = phi.dtype
    C, B = data.word.shape
    K = data.piece_doc.shape[1]
    L = B // K
    k = block_pieces(K, L, G * T, jnp.dtype(dtype).itemsize)
    n_blocks = C * (K // k)
    Gc = count.shape[-1]
    blocks = (
        data.piece_doc.reshape(n_blocks, k),
        data.word.reshape(n_blocks, k, L),
        count.reshape(n_blocks, k, L, Gc).astype(dtype),
    )
    hi = jax.lax.Precision.HIGHEST
    by_word = need_phi and _use_mirror(data, per_slot)
    g_phi_word = None
    if by_word:
        ll_word, g_phi_word = _word_pass(phi, theta, count.reshape(-1, Gc).astype(dtype), data.piece_doc.reshape(-1),
                                         data, not need_theta)
        if not need_theta:
            return ll_word, g_phi_word, None
    scatter_phi = need_phi and not by_word

    def body(carry, blk):
        ll, comp, g_phi, g_theta = carry
        d, w, n = blk
        rows = phi[w]  # (k, L, G, T)
        th = theta[d]  # (k, G, T)
        nlogp, r = _log_and_ratio(n, jnp.einsum("klgt,kgt->klg", rows, th, precision=hi))  # (k, L, G)
        ll, comp = kahan_add(ll, comp, jnp.sum(nlogp, axis=(0, 1)))
        if need_theta:
            g_theta = g_theta.at[d].add(jnp.einsum("klg,klgt->kgt", r, rows, precision=hi), indices_are_sorted=True)
        if scatter_phi:
            g_phi = g_phi.at[w.reshape(-1)].add((r[..., None] * th[:, None]).reshape(k * L, G, T))
        return (ll, comp, g_phi, g_theta), None

    z = jnp.zeros((G,), dtype)
    g_phi0 = jnp.zeros((W, G, T), dtype) if scatter_phi else jnp.zeros((), dtype)
    g_theta0 = jnp.zeros((D, G, T), dtype) if need_theta else jnp.zeros((), dtype)
    (ll, _, g_phi, g_theta), _ = jax.lax.scan(body, (z, z, g_phi0, g_theta0), blocks)
    if by_word:
        g_phi = g_phi_word
    return ll, (g_phi if need_phi else None), (g_theta if need_theta else None)


def flat_counts(phi, theta, data, need_phi, need_theta):
    """The unsliced E-step: per non-zero, gather ``Φ[w]`` and ``Θᵀ[d]``, scatter both gradients.

    Used for hand-built :class:`DocWordCounts` without ``piece_doc`` (any order of entries).
    Chunks are re-blocked like the sliced kernel's (a divisor of the stored chunk).
    """
    W, T = phi.shape
    D = theta.shape[1]
    dtype = phi.dtype
    C, B = data.word.shape
    b = block_pieces(B, 1, T, jnp.dtype(dtype).itemsize)
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
        nlogp, r = _log_and_ratio(n, jnp.sum(rows * cols, axis=-1))
        ll, comp = kahan_add(ll, comp, jnp.sum(nlogp))
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


@jax.custom_vjp
def log_likelihood_theta(phi: Float[Array, "W T"], theta: Float[Array, "T D"], data: DocWordCounts):
    """:func:`log_likelihood` for Φ held constant: its gradient in Θ costs about half an E-step
    (no scatter into Φ's gradient); the cotangent of Φ is zero, so use it only where Φ is fixed
    (inference of Θ for new documents, the inner Θ passes of the offline and online algorithms)."""
    return expected_counts(phi, theta, data, need_phi=False, need_theta=False)[0]


def _llt_fwd(phi, theta, data):
    ll, _, g_theta = expected_counts(phi, theta, data, need_phi=False)
    return ll, (phi, g_theta, data)


def _llt_bwd(res, ct):
    phi, g_theta, data = res
    return jnp.zeros_like(phi), ct * g_theta, jax.tree.map(lambda a: None, data)


log_likelihood_theta.defvjp(_llt_fwd, _llt_bwd)

