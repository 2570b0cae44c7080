"""The Pallas sweep of the LIDA family (topicjax.lida.pallas_sweep), in Pallas interpret mode on CPU.

Its draws are checked one for one against a hand-written loop over the printed conditional (35)-(38)
with the block-start word-topic counts (the AD-LDA blocks of the parallel sweep) and the same
uniforms, and against the XLA parallel sweep; its counts against the assignments; the backend
switch against ``TOPICJAX_LIDA``; and its lowering for CUDA (Triton) without a GPU."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax.core import environment
from topicjax.data.corpus import Corpus
from topicjax.lida import kernel, pallas_sweep, parallel, sampler
from topicjax.lida import state as lida_state
from topicjax.lida.draw import token_uniform

HYPER = dict(alpha=0.4, beta=0.15, eta=2.0, delta=1.0, gamma=4.0, xi=1.0)


def tiny_corpus():
    """12 documents of 15 words, about 150 tokens: several documents per block of 16 tokens, words
    repeated within documents (runs of one word) and shared between the documents of a block."""
    rng = np.random.default_rng(0)
    return Corpus.from_dense(rng.poisson(0.6, size=(12, 15)) + np.eye(12, 15, dtype=int))


@lru_cache(maxsize=None)
def setup(variant, vocabulary="finite", n_topics=6):
    """Corpus, settings, tokens and a state whose masks switch some topics (FTM, LIDA) and words
    (SSTM, LIDA) off: every slot holding tokens is active, others at random (as the mask step leaves
    them, without compiling it), phantom rows (infinite vocabulary) inactive but for one entry."""
    corpus = tiny_corpus()
    n_rows = corpus.n_words + (4 if vocabulary == "infinite" else 0)
    cfg = lida_state.Config(variant, n_topics, corpus.n_docs, corpus.n_words, n_rows, corpus.n_tokens,
                            vocabulary=vocabulary, sample=())
    tokens = lida_state.make_tokens(corpus, block_tokens=16)
    state = lida_state.init_state(jax.random.key(1), tokens, cfg, HYPER, n_topics)
    rng = np.random.default_rng(5)
    if cfg.focused:
        tb = (np.asarray(state.n_dk) > 0) | (rng.random((cfg.n_docs, n_topics)) < 0.3)
        state = state._replace(theta_bar=jnp.asarray(tb))
    if cfg.sparse:
        pb = (np.asarray(state.n_wk) > 0) | (rng.random((n_rows, n_topics)) < 0.3)
        pb[corpus.n_words:] = False
        if n_rows > corpus.n_words:  # an active phantom word: in the denominator D_k, never drawn
            pb[corpus.n_words, 0] = True
        state = state._replace(phi_bar=jnp.asarray(pb))
    return corpus, cfg, tokens, state


@lru_cache(maxsize=None)
def pallas_fn(variant, vocabulary="finite", n_topics=6):
    """The Pallas sweep of :func:`setup`'s corpus and settings, compiled once."""
    _, cfg, tokens, _ = setup(variant, vocabulary, n_topics)
    return jax.jit(lambda key, st: pallas_sweep.assign_pallas(key, st, tokens, cfg, st.theta_bar, st.phi_bar,
                                                              interpret=True))


def reference_sweep(state, tokens, cfg, seed):
    """The parallel sweep written out from the equations, in float64: blocks of documents in
    order; within a document every token is removed, drawn from
    p_k ∝ θ̄_kd φ̄_vk (α + n_kd) (β + n_vk) / (D_k + n_k), D_k = Σ_v φ̄_vk β (SSTM, LIDA) or W β,
    with n_kd the document's current counts and n_vk, n_k the block-start counts plus the
    document's own changes, by the first k whose cumulative sum exceeds u (Σ p), and added back;
    the documents' changes to n_vk and n_k are applied after the block."""
    z = np.asarray(state.z).copy()
    n_dk = np.asarray(state.n_dk).astype(np.int64)
    n_wk = np.asarray(state.n_wk).astype(np.int64)
    n_k = np.asarray(state.n_k).astype(np.int64)
    theta = np.asarray(state.theta_bar, bool)
    phi = np.asarray(state.phi_bar, bool)
    alpha, beta = float(state.alpha), float(state.beta)
    den = phi.sum(0) * beta if cfg.sparse else np.full(cfg.n_topics, cfg.n_words * beta)
    word = np.asarray(tokens.word)
    start = np.concatenate([[0], np.cumsum(np.asarray(tokens.n_d))])
    u = np.asarray(token_uniform(jnp.arange(z.size), seed, 0), np.float64)
    z_new = z.copy()
    for docs in np.asarray(tokens.blocks.docs):
        wk0, k0 = n_wk.copy(), n_k.copy()
        for d in docs[docs < cfg.n_docs]:
            own_k = np.zeros(cfg.n_topics, np.int64)
            own_w = {}
            for t in range(start[d], start[d + 1]):
                v, k = word[t], z[t]
                ow = own_w.setdefault(v, np.zeros(cfg.n_topics, np.int64))
                n_dk[d, k] -= 1
                own_k[k] -= 1
                ow[k] -= 1
                on = theta[d] & phi[v]  # a dead topic's denominator is 0: masked, not multiplied
                p = np.where(on, (alpha + n_dk[d]) * (beta + wk0[v] + ow) / np.where(on, den + k0 + own_k, 1.0), 0.0)
                cs = np.cumsum(p)
                k_new = int(np.searchsorted(cs, u[t] * cs[-1], side="right"))
                n_dk[d, k_new] += 1
                own_k[k_new] += 1
                ow[k_new] += 1
                z_new[t] = k_new
                n_wk[v, k] -= 1
                n_wk[v, k_new] += 1
                n_k[k] -= 1
                n_k[k_new] += 1
    return z_new, n_dk, n_wk, n_k


@pytest.mark.parametrize("variant,vocabulary,xla", [("lda", "finite", True), ("ftm", "finite", False),
                                                    ("sstm", "finite", False), ("lida", "infinite", True)])
def test_draws_equal_the_written_out_sweep_and_the_xla_sweep(variant, vocabulary, xla):
    """Same uniforms, same draws: the Pallas sweep (interpret mode) against the hand-written loop,
    token for token, and (LDA, and LIDA with both masks and phantom rows: each XLA sweep is a
    compilation) against the XLA parallel sweep; most tokens move, so the draws are not the old
    topics by accident."""
    corpus, cfg, tokens, state = setup(variant, vocabulary)
    key = jax.random.key(7)
    seed = jax.random.bits(key, (), jnp.uint32)
    out = [np.asarray(a) for a in pallas_fn(variant, vocabulary)(key, state)]
    ref = reference_sweep(state, tokens, cfg, seed)
    assert np.mean(ref[0] != np.asarray(state.z)) > 0.3
    for name, a, b in zip(("z", "n_dk", "n_wk", "n_k"), out, ref):
        np.testing.assert_array_equal(a, b, err_msg=name)
    if not xla:
        return
    n_active = lida_state.pow2(int(np.asarray(state.theta_bar).sum(1).max()))
    xla = parallel.assign_parallel(key, state, tokens, cfg, state.theta_bar, state.phi_bar, n_active)
    for name, a, b in zip(("z", "n_dk", "n_wk", "n_k"), out, xla):
        np.testing.assert_array_equal(a, np.asarray(b), err_msg=name)


def test_counts_stay_the_counts_of_the_assignments():
    """After two sweeps (the second from the first's output): n_dk sums to the document lengths,
    n_wk to the word counts, n_k to the tokens, and all three are the counts of z; every token's
    topic is active in its document and for its word."""
    corpus, cfg, tokens, state = setup("lida", "infinite")
    for i in range(2):
        z, n_dk, n_wk, n_k = pallas_fn("lida", "infinite")(jax.random.key(20 + i), state)
        state = state._replace(z=z, n_dk=n_dk, n_wk=n_wk, n_k=n_k)
    z, d, w = np.asarray(state.z), np.asarray(tokens.doc), np.asarray(tokens.word)
    n_dk, n_wk, n_k = np.asarray(state.n_dk), np.asarray(state.n_wk), np.asarray(state.n_k)
    np.testing.assert_array_equal(n_dk.sum(1), corpus.doc_lengths)
    np.testing.assert_array_equal(n_wk[: corpus.n_words].sum(1), corpus.word_counts)
    assert n_k.sum() == corpus.n_tokens
    want_dk, want_wk = np.zeros_like(n_dk), np.zeros_like(n_wk)
    np.add.at(want_dk, (d, z), 1)
    np.add.at(want_wk, (w, z), 1)
    np.testing.assert_array_equal(n_dk, want_dk)
    np.testing.assert_array_equal(n_wk, want_wk)
    np.testing.assert_array_equal(n_k, np.bincount(z, minlength=cfg.n_topics))
    assert np.asarray(state.theta_bar)[d, z].all() and np.asarray(state.phi_bar)[w, z].all()


def test_the_pallas_backend_runs_the_sweep():
    """``set_backend("pallas")``: a whole sweep gives the state of the XLA sweep from the same key
    (LDA: the masks' step compiles to nothing; every variant takes the same path to the kernels)."""
    _, cfg, tokens, state = setup("lda")
    out = {}
    for backend in ("pallas", "xla"):
        old = kernel.set_backend(backend)
        try:
            assert kernel.sweep_backend(cfg) == backend
            out[backend] = sampler.sweep(state, jax.random.key(3), tokens, cfg)
        finally:
            kernel.set_backend(old)
    for name in ("z", "n_dk", "n_wk", "n_k", "theta_bar", "phi_bar"):
        np.testing.assert_array_equal(np.asarray(getattr(out["pallas"], name)),
                                      np.asarray(getattr(out["xla"], name)), err_msg=name)


def test_backend_choice(monkeypatch):
    """``auto`` picks the Pallas sweep on a GPU for the dense parallel sweep only, never on CPU;
    ``pallas`` refuses the MH draw; TOPICJAX_LIDA accepts ``pallas`` and names it when refusing."""
    cfg = lida_state.Config("lda", 6, 30, 25, 25, 100)
    old = kernel.set_backend("auto")
    try:
        assert kernel.sweep_backend(cfg) in ("ffi", "xla")  # CPU: unchanged
        monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
        assert kernel.sweep_backend(cfg) == "pallas" and kernel.use_kernel(cfg)
        assert kernel.sweep_backend(replace(cfg, mh_steps=2)) == "xla"
        assert kernel.sweep_backend(replace(cfg, mode="exact")) == "xla"
        assert kernel.sweep_backend(replace(cfg, mode="stale")) == "xla"
        kernel.set_backend("pallas")
        with pytest.raises(ValueError, match="mh_steps"):
            kernel.sweep_backend(replace(cfg, mh_steps=2))
        monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
        with pytest.raises(ValueError, match="tpu"):
            kernel.sweep_backend(cfg)
    finally:
        kernel.set_backend(old)
    monkeypatch.setenv("TOPICJAX_LIDA", "Pallas")
    assert environment.backend_setting("TOPICJAX_LIDA") == "pallas"
    monkeypatch.setenv("TOPICJAX_LIDA", "triton")
    with pytest.raises(ValueError, match="TOPICJAX_LIDA must be one of .*'pallas', got 'triton'"):
        environment.backend_setting("TOPICJAX_LIDA")
    with pytest.raises(ValueError, match="backend must be one of"):
        kernel.set_backend("triton")


def test_count_tables_beyond_32_bit_offsets_are_refused():
    _, cfg, tokens, state = setup("lda")
    big = replace(cfg, n_docs=2**27)  # 2**27 documents x 16 topic slots = 2**31 entries
    with pytest.raises(ValueError, match="n_docs = 134217728"):
        pallas_sweep.assign_pallas(jax.random.key(0), state, tokens, big, state.theta_bar, state.phi_bar)


def test_kernels_lower_for_cuda_through_triton():
    """Without a GPU: the sweep lowers for CUDA, the two kernels as Triton calls (export refuses
    custom calls without compatibility guarantees unless told)."""
    _, cfg, tokens, state = setup("lida", "infinite")
    f = jax.jit(lambda k, s: pallas_sweep.assign_pallas(k, s, tokens, cfg, s.theta_bar, s.phi_bar,
                                                        interpret=False))
    triton = "__gpu$xla.gpu.triton"
    exported = jax.export.export(f, platforms=["cuda"],
                                 disabled_checks=[jax.export.DisabledSafetyCheck.custom_call(triton)])(
        jax.random.key(0), state)
    text = exported.mlir_module()
    assert text.count(triton) == 2
    assert 'name = "lida_pallas_sample"' in text and 'name = "lida_pallas_merge"' in text


def test_auto_falls_back_to_xla_with_a_warning_where_the_kernels_do_not_run(monkeypatch):
    """On a GPU whose toolchain cannot build the kernels, ``auto`` warns once, naming the error, and
    runs the XLA sweep; where the probe's tiny chain runs, ``auto`` keeps the Pallas sweep."""
    cfg = lida_state.Config("lda", 6, 30, 25, 25, 100)
    old = kernel.set_backend("auto")
    try:
        monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
        monkeypatch.setattr(kernel, "_PALLAS", {})
        assert kernel.pallas_error() is None  # the probe itself runs (here in interpret mode)

        def broken(*args, **kwargs):
            raise RuntimeError("Triton could not compile the kernel (test)")

        monkeypatch.setattr(kernel, "_PALLAS", {})
        monkeypatch.setattr(pallas_sweep, "assign_pallas", broken)
        with pytest.warns(RuntimeWarning, match="Pallas LIDA sweep does not run on this device .*Triton could not"):
            assert kernel.sweep_backend(cfg) == "xla" and not kernel.use_kernel(cfg)
        import warnings as _w
        with _w.catch_warnings():
            _w.simplefilter("error")  # once: the second choice does not warn again
            assert kernel.sweep_backend(cfg) == "xla"
        kernel.set_backend("pallas")  # asked for by name: no fallback
        assert kernel.sweep_backend(cfg) == "pallas"
    finally:
        kernel.set_backend(old)
