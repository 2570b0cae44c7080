"""``random_state`` for every estimator and fit function: an int seed, ``None`` (fresh entropy)
or a JAX PRNG key, turned into a key by :func:`as_key` with one error message everywhere.

>>> import jax
>>> from topicjax.core.random import as_key
>>> bool((jax.random.key_data(as_key(3)) == jax.random.key_data(jax.random.key(3))).all())
True
>>> bool((jax.random.key_data(as_key(2**32 - 1)) == jax.random.key_data(jax.random.key(2**32 - 1))).all())
True
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["as_key", "as_keys", "check_random_state", "fresh_seed"]


def fresh_seed() -> int:
    """A seed drawn from the operating system's entropy (what ``random_state=None`` uses)."""
    return int(np.random.SeedSequence().generate_state(1, np.uint32)[0])


def _is_key(x) -> bool:
    if not isinstance(x, (jax.Array, np.ndarray)):
        return False
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return x.shape == ()
    # a raw uint32 key of jax.random.PRNGKey
    return x.dtype == np.uint32 and x.shape == (2,)


def check_random_state(random_state, name: str = "random_state"):
    """The value itself when it is ``None`` or a key, a non-negative int as a Python int (a numpy
    integer too: a seed kept in ``seed_`` and saved with the model); a ``ValueError`` otherwise."""
    if random_state is None or _is_key(random_state):
        return random_state
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(random_state, (int, np.integer)):
        raise ValueError(f"{name} must be an int, None or a jax.random key, got {random_state!r}")
    if random_state < 0 or random_state >= 2**32:
        # jax.random.key keeps the low 32 bits of a larger seed: refuse instead of aliasing seeds
        raise ValueError(f"{name} must be an int in [0, 2**32), None or a jax.random key, got {random_state!r}")
    return int(random_state)


def as_key(random_state, name: str = "random_state"):
    """A typed PRNG key: ``jax.random.key(seed)`` for an int, a fresh one for ``None``."""
    random_state = check_random_state(random_state, name)
    if random_state is None:
        return _seed_key(fresh_seed())
    if isinstance(random_state, (jax.Array, np.ndarray)):
        if jnp.issubdtype(random_state.dtype, jax.dtypes.prng_key):
            return random_state
        return jax.random.wrap_key_data(jax.device_put(np.asarray(random_state, np.uint32)))
    return _seed_key(int(random_state))


def as_keys(seeds, name: str = "seeds"):
    """Keys of int seeds (or keys) stacked on a leading axis: ``jnp.stack([as_key(s) for s in
    seeds])`` assembled on the host, without compiling a stacking program per batch size."""
    checked = [check_random_state(s, name) for s in seeds]
    if jax.config.jax_default_prng_impl == "threefry2x32" and all(isinstance(s, int) for s in checked):
        # int seeds: the threefry words [0, seed] of each, one transfer for the batch
        data = np.array([[0, s] for s in checked], np.uint32)
        return jax.random.wrap_key_data(jax.device_put(data), impl="threefry2x32")
    keys = [as_key(s, name) for s in checked]
    data = np.stack([np.asarray(jax.random.key_data(k)) for k in keys])
    return jax.random.wrap_key_data(jax.device_put(data), impl=jax.random.key_impl(keys[0]))


def _seed_key(seed: int):
    """``jax.random.key(seed)`` for a seed in [0, 2**32): the threefry key ``[0, seed]`` written on
    the host (``jax.random.key`` compiles two programs to compute the same two words)."""
    if jax.config.jax_default_prng_impl != "threefry2x32":
        return jax.random.key(seed)
    return jax.random.wrap_key_data(jax.device_put(np.array([0, seed], np.uint32)), impl="threefry2x32")
