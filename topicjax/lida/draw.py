"""Random draws shared by the token samplers: inverse-CDF categorical draws and counter-based
uniforms (a 32-bit integer hash of the token id, cheaper than one threefry call per draw and
independent of the order in which tokens are visited)."""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["inverse_cdf", "mix32", "uniform_from_bits", "token_uniform"]


def inverse_cdf(p, u):
    """Index drawn from unnormalised probabilities ``p`` (..., K) with uniforms ``u`` (...)."""
    cs = jnp.cumsum(p, axis=-1)
    t = u * cs[..., -1]
    k = jnp.sum(cs <= t[..., None], axis=-1)
    K = p.shape[-1]
    last = K - 1 - jnp.argmax(jnp.flip(p > 0, axis=-1), axis=-1)  # guards t rounding up to the total
    return jnp.minimum(k, last).astype(jnp.int32)


def mix32(x):
    """A 32-bit integer finaliser (lowbias32): a counter-based hash for cheap uniforms."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def uniform_from_bits(bits):
    """Uniform in [0, 1) from the top 24 bits of a uint32."""
    return (bits >> 8).astype(jnp.float32) * jnp.float32(1.0 / 16777216.0)


def token_uniform(token, seed, draw: int):
    """The ``draw``-th uniform of token ``token`` in the sweep seeded by ``seed`` (uint32)."""
    h = mix32(token.astype(jnp.uint32) * jnp.uint32(0x9E3779B9) ^ seed)
    return uniform_from_bits(mix32(h ^ (jnp.uint32(draw + 1) * jnp.uint32(0x85EBCA6B))))
