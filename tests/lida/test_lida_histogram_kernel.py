"""The count histograms of the hyperparameter step by the compiled kernel
(:func:`topicjax.lida.kernel.count_histogram`), which a chain's post-sweep program uses where the
kernel runs its sweeps: against ``numpy.bincount`` written out, and the post-sweep program with them
against the one with XLA's histograms (the same hyperparameters, objective and sums)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from topicjax import LIDA
from topicjax.core import kernels
from topicjax.lida import chain, kernel
from topicjax.lida.state import HYPER

pytestmark = pytest.mark.skipif(not kernel.available(), reason="the compiled kernels are unavailable")


@pytest.mark.parametrize("n, length", [(0, 5), (7, 1), (1000, 40), (50_000, 3000), (300_000, 9), (300_000, 700)])
def test_count_histogram_is_bincount(n, length):
    """Values below 0 and from ``length`` on are dropped; short inputs are counted on one thread,
    long ones split between the pool's threads; bins below and above the kernel's 256 small bins
    (kept in four interleaved copies); runs of one repeated value (a table's zeros)."""
    assert kernels.register()  # a chain's first sweep does this
    rng = np.random.default_rng(n + length)
    values = rng.integers(-3, length + 40, size=n).astype(np.int32)
    values[: n // 3] = 0  # a run of one bin
    if n:
        values[-1] = np.iinfo(np.int32).min  # a negative that is large as an unsigned number
    got = np.asarray(jax.jit(lambda v: kernel.count_histogram(v, length))(values))
    kept = values[(values >= 0) & (values < length)]
    want = np.zeros(length, np.int64)
    np.add.at(want, kept, 1)  # one increment per value (unbuffered), not numpy's bincount
    assert got.dtype == np.int32 and got.shape == (length,)
    np.testing.assert_array_equal(got, want)
    # a (rows, columns) table is counted as its cells
    table = values[: (n // 4) * 4].reshape(-1, 4)
    np.testing.assert_array_equal(np.asarray(kernel.count_histogram(table, length)),
                                  np.bincount(table[(table >= 0) & (table < length)], minlength=length))


def test_post_sweep_program_with_kernel_histograms_is_the_xla_one(small):
    """A chain's post-sweep program (hyperparameters α, β by slice sampling from the count
    histograms, the objective, the posterior sums and the training likelihood) gives the same
    numbers with the kernel's histograms as with XLA's: hyperparameters and sums to the bit, the
    record's float32 terms to 1e-6 (two programs may round a sum in another order)."""
    corpus, _ = small
    model = LIDA(4, variant="lda", max_iter=6, hyper_start=0, burn_in=2, random_state=1, progress=False)
    model.fit(corpus)
    state, cfg = model.state_, chain._post_cfg(model.config_)
    tokens = model.tokens_
    assert cfg.max_doc_len and cfg.max_word_count and "alpha" in cfg.sample
    avg = chain.zero_sums(model.config_)
    flags = np.array([3, 1, 1, 1], np.int32)
    key = jax.random.key(5)
    outs = []
    for by_kernel in (False, True):
        fresh = jax.tree.map(lambda x: x.copy(), avg)  # the sums are donated
        hv, sums, rec = chain._post_jit(state, fresh, key, flags, tokens, cfg, True, by_kernel)
        outs.append((jax.device_get(hv), jax.device_get(sums), np.asarray(rec)))
    (hv0, sums0, rec0), (hv1, sums1, rec1) = outs
    assert set(hv0) == {"alpha", "beta"} == set(hv1) and set(hv0) <= set(HYPER)
    for h in hv0:
        assert hv0[h] == hv1[h], h
        assert hv0[h] != getattr(state, h)  # the slice samplers moved them
    for a, b in zip(jax.tree.leaves(sums0), jax.tree.leaves(sums1)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(rec1, rec0, rtol=1e-6, atol=1e-6)


def test_a_fit_counts_its_histograms_by_the_kernel_where_the_kernel_sweeps(small, monkeypatch):
    """The post-sweep program of a chain whose sweeps the kernel runs (LDA, ``sampler="parallel"``)
    takes its histograms from the kernel; with the XLA sweep (``kernel.set_backend("xla")``) or
    the exact sampler, from XLA's scatter."""
    corpus, _ = small
    seen = []
    real = chain._post_jit

    def spy(*args):
        seen.append(args[-1])  # by_kernel
        return real(*args)

    monkeypatch.setattr(chain, "_post_jit", spy)
    LIDA(4, variant="lda", max_iter=2, random_state=1, progress=False).fit(corpus)
    assert seen == [True, True]
    seen.clear()
    LIDA(4, variant="lda", max_iter=2, sampler="exact", random_state=1, progress=False).fit(corpus)
    assert seen == [False, False]
    seen.clear()
    old = kernel.set_backend("xla")
    try:
        LIDA(4, variant="lda", max_iter=2, random_state=1, progress=False).fit(corpus)
    finally:
        kernel.set_backend(old)
    assert seen == [False, False]
