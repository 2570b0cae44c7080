"""The parallel token sweep of the LIDA family as Pallas kernels: each document's token loop runs
inside one kernel program with the document's counts on chip (``TOPICJAX_LIDA=pallas``; the default
on a GPU).

:func:`assign_pallas` computes what :func:`topicjax.lida.parallel.assign_parallel`
(``mh_steps = 0``) and the compiled CPU kernel (:mod:`topicjax.lida.kernel`) compute, on the same
state and with the same uniforms, for every variant (LDA, FTM, SSTM, LIDA; finite or infinite
vocabulary): within a document every token is resampled by eq. (35)-(38) from counts updated
token by token; the documents of one block are sampled at once and see the word counts of the
block's start plus their own changes (the AD-LDA approximation of the other parallel sweeps).
The draws equal the XLA sweep's except where float32 sums taken in another order round across a
draw's boundary.  On CPU the kernels run in Pallas interpret mode (slow: for tests); on a GPU
they lower through Triton.

The state must be one of the sampler's (ids and topics in range, every token's topic active for
it): unlike the CPU kernel, these kernels do not check ids.

How (what is exact, what is shared, the two ``pallas_call`` s per block):
``docs/guides/internals.md``, "LIDA: the parallel sweep as Pallas kernels".
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

from .draw import token_uniform
from .parallel import denominator
from .state import Config, State, Tokens

__all__ = ["assign_pallas", "topic_lanes"]


def topic_lanes(n_topics: int) -> int:
    """Topic slots of a kernel program: ``n_topics`` rounded up to a power of two, at least 16
    (Triton's vectors have power-of-two lengths)."""
    if n_topics < 1:
        raise ValueError(f"n_topics must be a positive integer, got {n_topics!r}")
    return max(16, 1 << (int(n_topics) - 1).bit_length())


def _warps(kp: int) -> int:
    # one warp holds 32 lanes of Kp / 32 slots each; more warps only for long topic vectors
    return 1 if kp <= 256 else (2 if kp <= 1024 else 4)


def _sample_kernel(docs_ref, word_ref, start_ref, z_ref, nwk_ref, nkden_ref, par_ref, seed_ref, *refs,
                   n_topics: int, n_docs: int, focused: bool, sparse: bool):
    """One document: its tokens resampled in order (``docs/guides/internals.md``, Pallas sweep, step 1)."""
    # Pallas and its Triton backend load at the first Pallas sweep, not with the sampler (Triton's
    # dialect: 60 ms of CPU in every process's first LIDA otherwise)
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    refs = list(refs)
    theta_ref = refs.pop(0) if focused else None
    phi_ref = refs.pop(0) if sparse else None
    _, _, _, znew_ref, ndk_ref, nk_ref = refs  # the aliased inputs, then the outputs
    d = docs_ref[pl.program_id(0)]

    @pl.when(d < n_docs)  # a block's list of documents is padded with D
    def _():
        kp = ndk_ref.shape[1]
        iota = lax.broadcasted_iota(jnp.int32, (kp,), 0)
        allowed = (theta_ref[d, :] != 0) if focused else (iota < n_topics)
        alpha, beta = par_ref[0], par_ref[1]
        seed = seed_ref[0]
        nkden = nkden_ref[:]
        zeros = jnp.zeros((kp,), jnp.int32)

        def token(t, carry):
            cnt, dk, dw, prev = carry
            v = word_ref[t]
            k0 = z_ref[t]
            dw = jnp.where(v != prev, zeros, dw)  # a new run of one word: no own changes to its n_vk yet
            own = (iota == k0).astype(jnp.int32)
            nw = nwk_ref[v, :]
            # eq. (35)-(38) with the token removed: the XLA sweep's expression, term for term
            p = ((alpha + (cnt - own).astype(jnp.float32)) * (beta + (nw + dw - own).astype(jnp.float32))
                 / (nkden + (dk - own).astype(jnp.float32)))
            ok = allowed
            if sparse:
                ok = ok & (phi_ref[v, :] != 0)
            p = jnp.where(ok, p, 0.0)
            cs = jnp.cumsum(p)
            total = jnp.sum(jnp.where(iota == kp - 1, cs, 0.0))  # the last partial sum, exactly
            u = token_uniform(t, seed, 0) * total
            k1 = jnp.sum((cs <= u).astype(jnp.int32))
            last = jnp.max(jnp.where(p > 0.0, iota, 0))  # u rounding up to the total
            k1 = jnp.minimum(k1, last)
            znew_ref[t] = k1
            moved = (iota == k1).astype(jnp.int32) - own
            return cnt + moved, dk + moved, dw + moved, v

        t0, t1 = start_ref[d], start_ref[d + 1]
        cnt, dk, _, _ = lax.fori_loop(t0, t1, token, (ndk_ref[d, :], zeros, zeros, jnp.int32(-1)))
        ndk_ref[d, :] = cnt
        plgpu.atomic_add(nk_ref, (pl.ds(0, kp),), dk)


def _merge_kernel(docs_ref, word_ref, start_ref, z_ref, znew_ref, _nwk_in, nwk_ref, *, n_docs: int):
    """One document: its changed tokens moved in n_vk (``docs/guides/internals.md``, Pallas sweep, step 2)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    d = docs_ref[pl.program_id(0)]

    @pl.when(d < n_docs)
    def _():
        def token(t, carry):
            k0, k1 = z_ref[t], znew_ref[t]

            @pl.when(k0 != k1)
            def _():
                v = word_ref[t]
                plgpu.atomic_add(nwk_ref, (v, k0), jnp.int32(-1))
                plgpu.atomic_add(nwk_ref, (v, k1), jnp.int32(1))

            return carry

        lax.fori_loop(start_ref[d], start_ref[d + 1], token, jnp.int32(0))


def assign_pallas(key, state: State, tokens: Tokens, cfg: Config, theta_bar, phi_bar, *,
                  interpret: bool | None = None):
    """One parallel sweep of the topic assignments with the masks fixed, in Pallas kernels; returns
    ``(z, n_dk, n_wk, n_k)`` as :func:`~topicjax.lida.parallel.assign_parallel` with ``mh_steps =
    0`` (same uniforms: the seed is ``jax.random.bits(key, (), uint32)``).

    Args:
        key: the sweep's key (the key of the assignments, as for ``assign_parallel``).
        state, tokens, cfg: the sampler's state, token stream (only ``word``, ``n_d`` and
            ``blocks.docs`` are read: no lane layout, no extras) and settings (``cfg.mode`` and
            ``cfg.mh_steps`` are not read: the draw is the dense categorical).
        theta_bar, phi_bar: the topic (D, K) and word (V, K) activations of this sweep.
        interpret: run the kernels in Pallas interpret mode; ``None``: on CPU only.

    Returns:
        The new assignments (N,) and counts n_dk (D, K), n_wk (V, K), n_k (K,), int32.

    Raises:
        ValueError: ``n_docs`` or ``n_rows`` times the topic slots (:func:`topic_lanes`) reaches
            2**31, beyond the kernels' 32-bit offsets.
    """
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    K, D, V = cfg.n_topics, cfg.n_docs, cfg.n_rows
    N = tokens.word.shape[0]
    if interpret is None:
        interpret = jax.default_backend() == "cpu"
    kp = topic_lanes(K)
    if max(D, V) * kp >= 2**31:  # the kernels address the count tables with int32 offsets
        raise ValueError(f"the Pallas LIDA sweep addresses (rows x {kp} topic slots) with 32-bit offsets: "
                         f"n_docs = {D} and n_rows = {V} must be below {2**31 // kp}; use TOPICJAX_LIDA=xla")
    pad = kp - K
    widen = (lambda a, value=0: jnp.pad(a, ((0, 0), (0, pad)), constant_values=value)) if pad else (lambda a, value=0: a)
    seed = jax.random.bits(key, (), jnp.uint32).reshape(1)
    par = jnp.stack([jnp.asarray(state.alpha, jnp.float32), jnp.asarray(state.beta, jnp.float32)])
    den = jnp.pad(denominator(state, cfg, phi_bar), (0, pad), constant_values=1.0)
    start = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(tokens.n_d, dtype=jnp.int32)])
    masks = []
    if cfg.focused:
        masks.append(widen(theta_bar.astype(jnp.int8)))
    if cfg.sparse:
        masks.append(widen(phi_bar.astype(jnp.int8)))
    docs = tokens.blocks.docs
    nb, C = docs.shape
    word = tokens.word
    z0 = state.z
    params = plgpu.CompilerParams(num_warps=_warps(kp), num_stages=1)
    n_in = 8 + len(masks)
    sample = pl.pallas_call(
        partial(_sample_kernel, n_topics=K, n_docs=D, focused=cfg.focused, sparse=cfg.sparse),
        out_shape=(jax.ShapeDtypeStruct((N,), jnp.int32), jax.ShapeDtypeStruct((D, kp), jnp.int32),
                   jax.ShapeDtypeStruct((kp,), jnp.int32)),
        grid=(C,), input_output_aliases={n_in: 0, n_in + 1: 1, n_in + 2: 2}, interpret=interpret,
        compiler_params=params, name="lida_pallas_sample")
    merge = pl.pallas_call(
        partial(_merge_kernel, n_docs=D), out_shape=jax.ShapeDtypeStruct((V, kp), jnp.int32),
        grid=(C,), input_output_aliases={5: 0}, interpret=interpret, compiler_params=params,
        name="lida_pallas_merge")

    def block(b, carry):
        z_new, n_dk, n_wk, n_k = carry
        members = docs[b]
        nkden = den + n_k.astype(jnp.float32)  # the block-start n_k the draws read
        # every token belongs to exactly one block, so z0 still holds its topic before the sweep
        z_new, n_dk, n_k = sample(members, word, start, z0, n_wk, nkden, par, seed, *masks, z_new, n_dk, n_k)
        n_wk = merge(members, word, start, z0, z_new, n_wk)
        return z_new, n_dk, n_wk, n_k

    carry = (z0, widen(state.n_dk), widen(state.n_wk), jnp.pad(state.n_k, (0, pad)))
    z, n_dk, n_wk, n_k = lax.fori_loop(0, nb, block, carry)
    return z, n_dk[:, :K], n_wk[:, :K], n_k[:K]
