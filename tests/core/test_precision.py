"""Fits compile their matrix products at full float32 precision (XLA's default on NVIDIA GPUs is
TF32: one TTMM EM iteration on an H200 was 8e-4 away from the CPU's, 1e-6 with full precision;
experiments/results/gpu_2026-11-26_nvidia-h200.md).  On CPU the products are the same either way,
so these tests check the setting seen while tracing, inside every family's entry points, and that
the user's own setting is left as it was."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import topicjax as tj
from topicjax.core import numerics


def seen_precision():
    seen = []

    def reg(phi, theta):  # a plain regularizer: runs while the fit's step is traced
        seen.append(jax.config.jax_default_matmul_precision)
        return 0.0 * jnp.sum(phi @ theta)

    return reg, seen


def test_fits_trace_with_full_precision_and_leave_the_setting_alone(monkeypatch):
    corpus, _, _ = tj.datasets.make_bars(n_docs=40, seed=0)
    before = jax.config.jax_default_matmul_precision
    reg, seen = seen_precision()
    tj.ARTM(4, regularizers=[reg], max_iter=2, progress=False, scores=()).fit(corpus)
    tj.ARTM(4, regularizers=[(reg, 1.0)], max_iter=2, progress=False, scores=()).fit_many(corpus, taus=np.ones((2, 1)))
    assert seen and set(seen) == {numerics.MATMUL_PRECISION}
    assert jax.config.jax_default_matmul_precision == before


def test_ttmm_and_ptm_entry_points_use_full_precision(monkeypatch):
    from topicjax.ptm import gem
    from topicjax.ttmm import sweeps

    seen = []
    real_log = jnp.log
    before = jax.config.jax_default_matmul_precision

    def spy(*a, **k):
        seen.append(jax.config.jax_default_matmul_precision)
        return real_log(*a, **k)

    corpus, _, _ = tj.datasets.make_bars(n_docs=30, seed=1)
    model = tj.TTMM(3, n_themes=2, max_iter=2, progress=False).fit(corpus)
    monkeypatch.setattr(sweeps, "safe_log", lambda x: spy(jnp.maximum(x, sweeps.EPS)))
    jax.clear_caches()
    data = sweeps.theme_layout(corpus)
    params = tj.ttmm.TTMMParams(*(jnp.asarray(a) for a in (model.pi_, model.tau_, model.beta_)))
    sweeps.theme_posterior(params, data, corpus.n_docs)
    assert seen and set(seen) == {numerics.MATMUL_PRECISION}
    seen.clear()
    monkeypatch.setattr(gem, "m_step_alpha_beta", lambda state, beta0: (spy(state.alpha), state.beta))
    try:
        data = tj.ptm.layout.ptm_data(corpus)
        gem.gem_step(gem.init_state(jax.random.key(0), data, 4), data)
    except Exception:
        pass  # the spy's alpha is not a valid M-step; only the traced setting matters here
    assert seen and set(seen) == {numerics.MATMUL_PRECISION}
    assert jax.config.jax_default_matmul_precision == before
