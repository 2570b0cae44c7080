"""LDA's sparse draw in the compiled LIDA kernel (:data:`topicjax.lida.kernel.DRAWS`): its tables,
its refusals and the memory the fit's check counts for its word lists.  Its law (the same
conditional as the dense draw) is checked against the enumerated sweep kernel in
``test_lida_stationary.py`` (``test_parallel_lda_chains_match_enumerated_kernel``, both draws)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from topicjax import LIDA
from topicjax.data.corpus import Corpus
from topicjax.lida import kernel, model as lida_model, state as lida_state
from topicjax.lida.validators import memory_needed, memory_parts

HYPER = dict(alpha=0.5, beta=0.3, eta=1.0, delta=1.0, gamma=1.0, xi=1.0)


def test_sparse_draw_keeps_the_counts_of_its_assignments(small):
    """LDA's sparse draw over K = 40 topics and blocks of 60 tokens (word lists kept by the merges
    between blocks, topics leaving and joining words' lists): after three sweeps the tables equal
    the counts of the assignments, written out; the draw refuses variants with masks and unknown
    names; tables that disagree with the tokens (a word's row emptied) are an error, not a write
    outside its list."""
    if not kernel.available():
        pytest.skip(f"the compiled LIDA kernel is unavailable ({kernel.load_error()})")
    corpus, _ = small
    K = 40
    tokens = lida_state.make_tokens(corpus, block_tokens=60)
    cfg = lida_state.Config(variant="lda", n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words,
                            n_rows=corpus.n_words, n_tokens=corpus.n_tokens, sample=())
    st0 = lida_state.init_state(jax.random.key(0), tokens, cfg, HYPER, K)
    kernel.use_kernel(cfg)
    sweep = jax.jit(lambda key, st: kernel.sweep_kernel(key, st, tokens, cfg, st.theta_bar, st.phi_bar, draw="sparse"))
    st = st0
    for i in range(3):
        z, n_dk, n_wk, n_k = sweep(jax.random.key(i), st)
        st = st._replace(z=z, n_dk=n_dk, n_wk=n_wk, n_k=n_k)
    z, doc, word = np.asarray(st.z), np.asarray(tokens.doc), np.asarray(tokens.word)
    assert np.mean(z != np.asarray(st0.z)) > 0.5
    want_dk, want_wk = np.zeros((corpus.n_docs, K), int), np.zeros((corpus.n_words, K), int)
    for d, v, k in zip(doc, word, z):
        want_dk[d, k] += 1
        want_wk[v, k] += 1
    np.testing.assert_array_equal(np.asarray(st.n_dk), want_dk)
    np.testing.assert_array_equal(np.asarray(st.n_wk), want_wk)
    np.testing.assert_array_equal(np.asarray(st.n_k), want_wk.sum(0))

    lida_cfg = dataclasses.replace(cfg, variant="lida")
    with pytest.raises(ValueError, match="sparse draw is for LDA only"):
        kernel.sweep_kernel(jax.random.key(0), st, tokens, lida_cfg, st.theta_bar, st.phi_bar, draw="sparse")
    with pytest.raises(ValueError, match=r"draw must be one of \['auto', 'dense', 'sparse'\], got 'fast'"):
        kernel.set_draw("fast")
    busiest = int(np.argmax(want_wk.sum(1)))
    bad = st._replace(n_wk=st.n_wk.at[busiest].set(0))
    with pytest.raises(Exception, match="n_wk disagrees with the tokens"):
        jax.block_until_ready(sweep(jax.random.key(7), bad))


def _has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= set(flags)


@pytest.mark.skipif(not _has_avx512(), reason="without AVX-512 the kernel runs the portable list arithmetic only")
def test_vector_and_portable_list_arithmetic_give_the_same_bits():
    """The sparse draw's AVX-512 list arithmetic (a run's list in registers up to 64 topics, in
    memory beyond) and its portable one (entry by entry, the same adds in the same order) make the
    same chain, bit for bit: K = 80 topics and words whose lists hold up to 80, 17-64 and at most
    16 topics, runs of many tokens (a document's repeats of a word), blocks of 200 tokens; over
    three sweeps the assignments and tables agree and equal the counts of the assignments."""
    if not kernel.available():
        pytest.skip(f"the compiled LIDA kernel is unavailable ({kernel.load_error()})")
    rng = np.random.default_rng(0)
    counts = rng.poisson(40 * 0.6 ** np.arange(20), size=(30, 20))
    corpus = Corpus.from_dense(counts)
    K = 80
    tokens = lida_state.make_tokens(corpus, block_tokens=200)
    cfg = lida_state.Config(variant="lda", n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words,
                            n_rows=corpus.n_words, n_tokens=corpus.n_tokens, sample=())
    st0 = lida_state.init_state(jax.random.key(0), tokens, cfg, HYPER, K)
    held = (np.asarray(st0.n_wk) > 0).sum(1)
    assert held.max() > 64 and np.any((held > 16) & (held <= 64)) and np.any(held <= 16)
    kernel.use_kernel(cfg)

    def chain(portable):
        sweep = jax.jit(lambda key, st: kernel.sweep_kernel(key, st, tokens, cfg, st.theta_bar, st.phi_bar,
                                                            draw="sparse", _portable=portable))
        st, out = st0, []
        for i in range(3):
            z, n_dk, n_wk, n_k = sweep(jax.random.key(i), st)
            st = st._replace(z=z, n_dk=n_dk, n_wk=n_wk, n_k=n_k)
            out.append(tuple(np.asarray(a) for a in (z, n_dk, n_wk, n_k)))
        return out

    vector, portable = chain(False), chain(True)
    for a, b in zip(vector, portable):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    z = vector[-1][0]
    assert np.mean(z != np.asarray(st0.z)) > 0.5
    want_wk = np.zeros((corpus.n_words, K), int)
    np.add.at(want_wk, (np.asarray(tokens.word), z), 1)
    np.testing.assert_array_equal(vector[-1][2], want_wk)


@pytest.mark.parametrize("K,rate,expect", [(4, 12.0, "dense"), (80, 0.4, "sparse")])
def test_auto_draws_dense_sweeps_where_word_lists_are_long(K, rate, expect):
    """LDA's default draw ("auto") runs a sweep by the dense draw where a token's word holds more
    than K/3 topics on average (token-weighted, from n_wk at the sweep's start; written out here),
    else by the sparse draw: the same bits as the draw it picks, sweep by sweep."""
    if not kernel.available():
        pytest.skip(f"the compiled LIDA kernel is unavailable ({kernel.load_error()})")
    rng = np.random.default_rng(1)
    corpus = Corpus.from_dense(rng.poisson(rate, size=(40, 30)))
    tokens = lida_state.make_tokens(corpus, block_tokens=100)
    cfg = lida_state.Config(variant="lda", n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words,
                            n_rows=corpus.n_words, n_tokens=corpus.n_tokens, sample=())
    st = lida_state.init_state(jax.random.key(0), tokens, cfg, HYPER, K)
    n_wk = np.asarray(st.n_wk)
    held = ((n_wk > 0).sum(1) * n_wk.sum(1)).sum() / corpus.n_tokens  # topics of a token's word, on average
    assert (held > K / 3) == (expect == "dense")
    kernel.use_kernel(cfg)
    outs = {draw: [np.asarray(a) for a in jax.jit(
        lambda key, st, draw=draw: kernel.sweep_kernel(key, st, tokens, cfg, st.theta_bar, st.phi_bar, draw=draw))(
        jax.random.key(5), st)] for draw in ("auto", "dense", "sparse")}
    other = "sparse" if expect == "dense" else "dense"
    assert any(np.any(a != b) for a, b in zip(outs[expect], outs[other]))  # the two draws differ here
    for a, b in zip(outs["auto"], outs[expect]):
        np.testing.assert_array_equal(a, b)


def test_the_fit_counts_the_word_lists(small, monkeypatch):
    """An LDA fit on the compiled kernel's sparse draw asks its memory check for the word lists;
    they are one int32 per (word, topic) pair holding tokens, at most min(K, tokens of the word)
    a word: at least what this corpus's words can fill, written out, and at most rows x K."""
    if not kernel.available():
        pytest.skip(f"the compiled LIDA kernel is unavailable ({kernel.load_error()})")
    corpus, _ = small
    K = 6
    asked = []
    real_check = lida_model.check_memory
    monkeypatch.setattr(lida_model, "check_memory", lambda c, k, **kw: asked.append(kw) or real_check(c, k, **kw))
    model = LIDA(K, variant="lda", max_iter=2, progress=False, random_state=0).fit(corpus)
    assert asked[0]["word_lists"] is True
    assert not kernel.word_lists(LIDA(K, variant="ftm")._config(corpus, K, corpus.n_words))
    old = kernel.set_draw("dense")
    try:
        assert not kernel.word_lists(model._config(corpus, K, corpus.n_words))
    finally:
        kernel.set_draw(old)
    sizes = (corpus.n_tokens, corpus.n_docs, corpus.n_words, K)
    lists = memory_parts(*sizes, lanes_layout=False, word_lists=True)["held"]["word lists"]
    per_word = np.zeros(corpus.n_words, int)
    for doc in corpus.to_lists():
        for w, c in doc:
            per_word[w] += c
    assert 4 * np.minimum(per_word, K).sum() <= lists <= 4 * corpus.n_words * K + 12 * corpus.n_words
    assert (memory_needed(*sizes, lanes_layout=False, word_lists=True)
            == memory_needed(*sizes, lanes_layout=False) + lists)
