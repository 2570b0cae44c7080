"""Hyperparameter kernels (sec. 4.5): Gamma and small-Poisson draws, and one slice-sampling / MH
update leaves its target invariant."""

from __future__ import annotations

import numpy as np
import jax
import jax.numpy as jnp
from scipy import stats

from topicjax.lida.hyper import count_histogram, gamma_draw, mh_log, slice_log, token_count_histogram
from topicjax.lida.masks import poisson_small


def test_gamma_poisson_and_mcmc_kernels_preserve_their_targets():
    keys = jax.random.split(jax.random.key(5), 4000)
    # each kernel under one jit: eager vmap would compile every primitive on its own
    x = np.asarray(jax.jit(jax.vmap(lambda k: gamma_draw(k, 2.5)))(keys))
    assert stats.kstest(x, stats.gamma(2.5).cdf).pvalue > 1e-3
    pois = np.asarray(jax.jit(poisson_small)(jax.random.key(1), jnp.full((20000,), 0.7)))
    assert abs(pois.mean() - 0.7) < 0.03 and abs(pois.var() - 0.7) < 0.05
    # one slice / MH update applied to exact N(1, 0.5²) draws must leave them N(1, 0.5²)
    logf = lambda v: -0.5 * ((v - 1.0) / 0.5) ** 2
    x0 = 1.0 + 0.5 * np.random.default_rng(0).standard_normal(4000).astype(np.float32)
    xs = np.asarray(jax.jit(jax.vmap(lambda k, v: slice_log(k, v, logf)))(keys, jnp.asarray(x0)))
    xm = np.asarray(jax.jit(jax.vmap(lambda k, v: mh_log(k, v, logf, 0.5, 3)))(keys, jnp.asarray(x0)))
    for y in (xs, xm):
        assert stats.kstest(y, stats.norm(1.0, 0.5).cdf).pvalue > 1e-3
        assert np.mean(y != x0) > 0.3  # the kernels move


def test_token_count_histogram_equals_table_histogram():
    """The histogram of cell counts taken over the tokens (each cell seen once per token it holds)
    equals the histogram over the whole table."""
    rng = np.random.default_rng(0)
    z = rng.integers(0, 7, 500)
    doc = np.sort(rng.integers(0, 20, 500))
    table = np.zeros((20, 7), np.int64)
    np.add.at(table, (doc, z), 1)
    want = np.bincount(table.ravel(), minlength=64)
    want[0] = 0
    got = token_count_histogram(jnp.asarray(table[doc, z]), 64)
    np.testing.assert_array_equal(np.asarray(got), want[:64])
    np.testing.assert_array_equal(np.asarray(count_histogram(jnp.asarray(table), 64)), want[:64])
