"""The memory-lean paths of LIDA's setup: blockwise count tables, tokens without the XLA sweep's
lane layout, histograms from the count tables: each gives what the direct computation gives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax.data.corpus import Corpus
from topicjax.lida import kernel, layout, sampler
from topicjax.lida import state as lida_state
from topicjax.lida.hyper import _by_tokens


@pytest.mark.parametrize("N,blk", [(1, 1), (5, 2), (1000, 7), (3001, 1024), (3001, 1 << 20)])
def test_count_tables_blockwise_equal_a_python_count(N, blk, monkeypatch):
    monkeypatch.setattr(lida_state, "COUNT_BLOCK", blk)
    jax.clear_caches()  # the block size is read at trace time
    rng = np.random.default_rng(N + blk)
    D, V, K = 9, 11, 4
    z, d, w = rng.integers(0, K, N), rng.integers(0, D, N), rng.integers(0, V, N)
    n_dk, n_wk, n_k = lida_state.count_tables(*(jnp.asarray(a, jnp.int32) for a in (z, d, w)), D, V, K)
    want_dk, want_wk = np.zeros((D, K), int), np.zeros((V, K), int)
    for i in range(N):
        want_dk[d[i], z[i]] += 1
        want_wk[w[i], z[i]] += 1
    np.testing.assert_array_equal(n_dk, want_dk)
    np.testing.assert_array_equal(n_wk, want_wk)
    np.testing.assert_array_equal(n_k, np.bincount(z, minlength=K))


def test_blocks_without_lanes_keep_the_documents():
    rng = np.random.default_rng(3)
    n_d = rng.integers(0, 30, 50)
    word = rng.integers(0, 9, int(n_d.sum()))
    full = layout.make_blocks(n_d, word, 64)
    lean = layout.make_blocks(n_d, word, 64, lanes_layout=False)
    np.testing.assert_array_equal(full.docs, lean.docs)
    assert lean.tok is None and lean.loc is None and lean.start is None and lean.run is None


def small_corpus():
    rng = np.random.default_rng(0)
    return Corpus.from_dense(rng.poisson(1.0, size=(30, 25)) + (np.eye(30, 25, dtype=int)))


def test_kernel_sweep_is_the_same_without_the_lane_layout():
    if not kernel.use_kernel(lida_state.Config("lda", 6, 30, 25, 25, 1)):
        pytest.skip("the compiled LIDA kernel does not run here")
    corpus = small_corpus()
    cfg = lida_state.Config("lda", 6, corpus.n_docs, corpus.n_words, corpus.n_words, corpus.n_tokens, sample=())
    hyper = dict(alpha=0.5, beta=0.1, eta=1.0, delta=1.0, gamma=1.0, xi=1.0)
    out = []
    for lanes_layout in (True, False):
        tokens = lida_state.make_tokens(corpus, block_tokens=64, extras=False, lanes_layout=lanes_layout)
        st = lida_state.init_state(jax.random.key(1), tokens, cfg, hyper, 6)
        for i in range(3):
            st = sampler.sweep(st, jax.random.key(10 + i), tokens, cfg)
        out.append(np.asarray(st.z))
    np.testing.assert_array_equal(out[0], out[1])


def test_xla_parallel_sweep_refuses_tokens_without_lanes():
    corpus = small_corpus()
    cfg = lida_state.Config("lda", 6, corpus.n_docs, corpus.n_words, corpus.n_words, corpus.n_tokens, sample=())
    hyper = dict(alpha=0.5, beta=0.1, eta=1.0, delta=1.0, gamma=1.0, xi=1.0)
    tokens = lida_state.make_tokens(corpus, block_tokens=64, extras=False, lanes_layout=False)
    st = lida_state.init_state(jax.random.key(1), tokens, cfg, hyper, 6)
    old = kernel.set_backend("xla")
    try:
        with pytest.raises(ValueError, match="lane layout"):
            sampler.sweep(st, jax.random.key(2), tokens, cfg)
    finally:
        kernel.set_backend(old)


def test_histograms_over_tokens_only_where_the_table_is_larger():
    tokens = lida_state.make_tokens(small_corpus(), extras=False)
    N = tokens.word.shape[0]
    assert _by_tokens(tokens, jnp.zeros((N + 1, 1)))
    assert not _by_tokens(tokens, jnp.zeros((N, 1)))
    assert not _by_tokens(None, jnp.zeros((N + 1, 1)))


@pytest.mark.parametrize("n,blk", [(1, 4), (10, 4), (4096, 1000)])
def test_uniform_topics_blockwise_are_uniform_and_seeded(n, blk, monkeypatch):
    monkeypatch.setattr(lida_state, "COUNT_BLOCK", blk)
    jax.clear_caches()
    z = np.asarray(lida_state.uniform_topics(jax.random.key(0), n, 7))
    assert z.dtype == np.int32 and z.shape == (n,) and z.min() >= 0 and z.max() < 7
    np.testing.assert_array_equal(z, lida_state.uniform_topics(jax.random.key(0), n, 7))
    if n >= 4096:  # chi-square with 6 degrees of freedom: 22.5 is its 0.999 quantile
        counts = np.bincount(z, minlength=7)
        assert ((counts - n / 7) ** 2 / (n / 7)).sum() < 22.5
        assert not np.array_equal(z[:blk], z[blk:2 * blk])  # each block has its own stream
