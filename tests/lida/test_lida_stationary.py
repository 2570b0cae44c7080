"""Distribution tests of the token sweeps on tiny corpora: independent chains against the
distribution after S sweeps computed exactly from the enumerated transition kernel
(``kernels.sweep_kernel``, written from eq. (35)-(38)), and the kernels' stationary distributions
against the enumerated posterior (23)-(24).

What these establish about the parallel sweep (``mode="parallel"``):

* with one document per block it is the exact collapsed Gibbs sampler: its stationary
  distribution is the posterior (total variation 0 to machine precision), and the chains match;
* with several multi-token documents in one block it is the AD-LDA approximation: the chains
  match the enumerated AD-LDA kernel (so the implementation is the one documented), whose
  stationary distribution on these 3-document corpora is 0.16-0.23 from the posterior, against
  0.37-0.51 for the old stale sweep.  On real corpora a document is a tiny part of the shared
  counts and the held-out difference to the exact sweep is measured in
  ``experiments/lida_parallel_vs_exact.py``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from scipy import stats

from topicjax.data.corpus import Corpus
from topicjax.lida import sampler as lida_sampler, state as lida_state
from topicjax.lida import kernel
from topicjax.lida.parallel import assign_parallel
from topicjax.lida.state import pow2

from .kernels import after_sweeps, posterior, states, stationary, sweep_kernel, total_variation

# three multi-token documents sharing words; tokens sorted by document, then word
DOC = np.array([0, 0, 0, 1, 1, 2, 2, 2])
WORD = np.array([0, 0, 1, 1, 2, 0, 2, 2])
CORPUS = Corpus.from_entries([0, 0, 1, 1, 2, 2], [0, 1, 1, 2, 0, 2], [2, 1, 1, 1, 1, 2], n_words=3)
HYPER = dict(alpha=0.5, beta=0.3, eta=1.0, delta=1.0, gamma=1.0, xi=1.0)


def _chi2_pvalue(samples, Z, p):
    """Chi-square of sampled assignments against probabilities ``p`` over the states ``Z`` (cells
    with expected count < 5 pooled)."""
    index = {tuple(z): i for i, z in enumerate(Z)}
    obs = np.bincount([index[tuple(s)] for s in samples], minlength=len(Z)).astype(float)
    exp = p * len(samples)
    big = exp >= 5
    o, e = np.append(obs[big], obs[~big].sum()), np.append(exp[big], exp[~big].sum())
    if e[-1] == 0:
        o, e = o[:-1], e[:-1]
    return stats.chisquare(o, e * o.sum() / e.sum()).pvalue


@pytest.fixture
def one_kernel_thread():
    """The compiled kernels on one thread for the chains tests.  Their thousands of chains are
    vmapped, and a vmapped kernel call runs chain after chain: tens of thousands of calls on 8
    tokens each, which a pool of two threads hands over between its threads every time -- on
    cores shared with other processes (the suite on two cores) most of these tests' time (30-40 s
    against 5-10 s).  The kernel's draws do not depend on the number of threads
    (test_kernel_threads_shared_and_bits_independent_of_threads, below), so the chains and what is
    checked of them are the same."""
    old = kernel.get_threads()  # applies TOPICJAX_THREADS first, if it was not yet
    kernel.set_threads(1)
    yield
    kernel.set_threads(old)


def _lda_chains(block_tokens, lanes, mode, mh_steps, n_sweeps, n_chains, seed, z0=None):
    """Final assignments of ``n_chains`` LDA chains (K = 2) after ``n_sweeps`` sweeps, started from
    uniform assignments or from the rows of ``z0``."""
    K = 2
    tokens = lida_state.make_tokens(CORPUS, block_tokens=block_tokens, lanes=lanes)
    np.testing.assert_array_equal(np.asarray(tokens.doc), DOC)
    np.testing.assert_array_equal(np.asarray(tokens.word), WORD)
    cfg = lida_state.Config(variant="lda", n_topics=K, n_docs=3, n_words=3, n_rows=3, n_tokens=8, mode=mode, batch=8,
                   mh_steps=mh_steps, sample=())
    keys = jax.random.split(jax.random.key(seed), n_chains)
    states0 = jax.vmap(lambda k: lida_state.init_state(k, tokens, cfg, HYPER, K))(keys)
    if z0 is not None:
        z0 = jnp.asarray(z0, jnp.int32)
        counts = jax.vmap(lambda z: lida_state.count_tables(z, tokens.doc, tokens.word, 3, 3, K))(z0)
        states0 = states0._replace(z=z0, n_dk=counts[0], n_wk=counts[1], n_k=counts[2])

    def run(state, key):
        state = jax.lax.fori_loop(0, n_sweeps, lambda i, s: lida_sampler.sweep(s, jax.random.fold_in(key, i), tokens, cfg),
                                  state)
        return state.z

    return np.asarray(jax.jit(jax.vmap(run))(states0, jax.random.split(jax.random.key(seed + 1), n_chains)))


@pytest.fixture(params=["dense", "sparse"])
def kernel_draw(request):
    """Both draws of the compiled kernel (:data:`topicjax.lida.kernel.DRAWS`) for the LDA chains
    (where the kernel runs the sweep; elsewhere the XLA sweep runs either way)."""
    old = kernel.set_draw(request.param)
    yield request.param
    kernel.set_draw(old)


@pytest.mark.parametrize("blocks,block_tokens,lanes", [
    ([[0], [1], [2]], 1, 1),  # one document per block: exact Gibbs
    ([[0, 1, 2]], 8, 2),  # all documents in one block, two lanes (a lane runs two documents)
])
@pytest.mark.usefixtures("one_kernel_thread", "kernel_draw")
def test_parallel_lda_chains_match_enumerated_kernel(blocks, block_tokens, lanes):
    """6000 chains x 6 sweeps from uniform assignments against p0 T^6 (T the enumerated kernel of
    the parallel sweep with these blocks), and the kernel's stationary distribution against the
    posterior: equal with one document per block, 0.2 apart with all three in one block.  With
    the compiled kernel, both of its draws (the dense one and LDA's sparse one, which visits the
    topics in another order: the same law, other bits)."""
    tb, pb = np.ones((3, 2), bool), np.ones((3, 2), bool)
    Z = states(DOC, WORD, tb, pb)
    args = (DOC, WORD, tb, pb, HYPER["alpha"], HYPER["beta"])
    T = sweep_kernel(Z, *args, blocks)
    p6 = after_sweeps(np.full(len(Z), 1.0 / len(Z)), T, 6)
    zs = _lda_chains(block_tokens, lanes, "parallel", 0, 6, 6000, seed=11)
    assert _chi2_pvalue(zs, Z, p6) > 1e-3
    post = posterior(Z, *args)
    tv = total_variation(stationary(T), post)
    if len(blocks) == 3:
        assert tv < 1e-9
    else:
        assert 0.15 < tv < 0.3, tv  # the AD-LDA bias on 3 documents (stale sweep: 0.42, below)
        stale = total_variation(stationary(sweep_kernel(Z, *args, blocks, stale=True)), post)
        assert stale > 0.4, stale
        # the test has power: the chains reject the posterior itself (distribution after 6 sweeps)
        post6 = after_sweeps(np.full(len(Z), 1.0 / len(Z)), sweep_kernel(Z, *args, [[0], [1], [2]]), 6)
        assert _chi2_pvalue(zs, Z, post6) < 1e-6


@pytest.mark.parametrize("mh_steps", [1, 2])
def test_parallel_mh_sweep_leaves_the_posterior_invariant(mh_steps):
    """``mh_steps`` Metropolis-Hastings steps per token (O(1) document and word proposals), one
    document per block: 20000 exact draws of the enumerated posterior, one sweep each, are still
    posterior draws.  One step uses the document proposal only, two alternate both; a proposal
    density off by the token's own count ([k = k0]) moves them away and fails here."""
    tb, pb = np.ones((3, 2), bool), np.ones((3, 2), bool)
    Z = states(DOC, WORD, tb, pb)
    post = posterior(Z, DOC, WORD, tb, pb, HYPER["alpha"], HYPER["beta"])
    z0 = Z[np.random.default_rng(5).choice(len(Z), size=20000, p=post)]
    zs = _lda_chains(1, 1, "parallel", mh_steps, 1, 20000, seed=21, z0=z0)
    assert np.mean(np.any(zs != z0, axis=1)) > 0.3  # the sweep moves
    assert _chi2_pvalue(zs, Z, post) > 1e-3


def _masks(variant):
    """Θ̄, Φ̄ (K = 3) of the masked tests: FTM and LIDA give every document 2 of the 3 topics, SSTM
    and LIDA switch words off in some topics."""
    tb = np.ones((3, 3), bool)
    pb = np.ones((3, 3), bool)
    if variant in ("ftm", "lida"):
        tb = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], bool)  # every document 2 of 3 topics
    if variant in ("sstm", "lida"):
        pb = np.array([[1, 1, 1], [1, 0, 1], [0, 1, 1]], bool)
    return tb, pb


@functools.lru_cache(maxsize=None)
def _masked_reference(variant, blocks):
    """The enumerated side of the masked tests, shared by both backends (SSTM's 864 states take
    seconds): the states Z, the distribution p0 T^5 after five sweeps from the uniform p0 over the
    allowed assignments, and (one document per block) the total variation between the kernel's
    stationary distribution and the posterior.  ``blocks``: a tuple of tuples (hashable)."""
    tb, pb = _masks(variant)
    Z = states(DOC, WORD, tb, pb)
    args = (DOC, WORD, tb, pb, 0.7, 0.4)
    T = sweep_kernel(Z, *args, [list(b) for b in blocks])
    p5 = after_sweeps(np.full(len(Z), 1.0 / len(Z)), T, 5)  # from uniform over the allowed assignments
    tv = total_variation(stationary(T), posterior(Z, *args)) if len(blocks) == 3 else None
    return Z, p5, tv


@pytest.mark.parametrize("backend", ["xla", "ffi"])
@pytest.mark.parametrize("variant", ["ftm", "sstm", "lida"])
@pytest.mark.parametrize("blocks,block_tokens,lanes", [([[0], [1], [2]], 1, 1), ([[0, 1, 2]], 8, 2)])
@pytest.mark.usefixtures("one_kernel_thread")
def test_parallel_masked_assignments_match_enumerated_kernel(variant, blocks, block_tokens, lanes, backend):
    """The token step of FTM, SSTM and LIDA with the masks Θ̄, Φ̄ held fixed: chains over the
    assignments allowed by the masks (θ̄_kd φ̄_vk = 1, eq. 35-37), each token drawn over its
    document's active-topic list, against the enumerated kernel; with one document per block the
    kernel's stationary distribution is p(z | w, Θ̄, Φ̄) of (23)-(24).  Both backends: the XLA
    sweep and the compiled CPU kernel (:mod:`topicjax.lida.kernel`)."""
    if backend == "ffi" and not kernel.available():
        pytest.skip(f"the compiled LIDA kernel is unavailable ({kernel.load_error()})")
    K = 3
    tb, pb = _masks(variant)
    alpha, beta = 0.7, 0.4
    Z, p5, tv = _masked_reference(variant, tuple(tuple(b) for b in blocks))
    if len(blocks) == 3:
        assert tv < 1e-9

    tokens = lida_state.make_tokens(CORPUS, block_tokens=block_tokens, lanes=lanes)
    cfg = lida_state.Config(variant=variant, n_topics=K, n_docs=3, n_words=3, n_rows=3, n_tokens=8, sample=())
    n_chains = 5000
    allowed = [np.flatnonzero(tb[d] & pb[v]) for d, v in zip(DOC, WORD)]
    u = np.random.default_rng(3).random((n_chains, 8))
    z0 = np.stack([a[np.minimum((u[:, i] * len(a)).astype(int), len(a) - 1)] for i, a in enumerate(allowed)], 1)
    hyper = dict(HYPER, alpha=alpha, beta=beta)
    tb_j, pb_j = jnp.asarray(tb), jnp.asarray(pb)
    n_active = pow2(tb.sum(1).max())

    def run(z, key):
        n_dk, n_wk, n_k = lida_state.count_tables(z, tokens.doc, tokens.word, 3, 3, K)
        st = lida_state.init_state(key, tokens, cfg, hyper, K)._replace(z=z, n_dk=n_dk, n_wk=n_wk, n_k=n_k,
                                                                 theta_bar=tb_j, phi_bar=pb_j)

        def one(i, st):
            k = jax.random.fold_in(key, i)
            if backend == "ffi":
                z, n_dk, n_wk, n_k = kernel.sweep_kernel(k, st, tokens, cfg, tb_j, pb_j)
            else:
                z, n_dk, n_wk, n_k = assign_parallel(k, st, tokens, cfg, tb_j, pb_j, n_active)
            return st._replace(z=z, n_dk=n_dk, n_wk=n_wk, n_k=n_k)

        return jax.lax.fori_loop(0, 5, one, st).z

    if backend == "ffi":
        kernel.use_kernel(cfg)  # registers the FFI target
    keys = jax.random.split(jax.random.key(7), n_chains)
    zs = np.asarray(jax.jit(jax.vmap(run))(jnp.asarray(z0, jnp.int32), keys))
    assert all(tb[DOC, zs[c]].all() and pb[WORD, zs[c]].all() for c in range(50))
    assert _chi2_pvalue(zs, Z, p5) > 1e-3


@pytest.mark.parametrize("K", [8, 40])
def test_kernel_and_xla_sweeps_agree(small, K):
    """The compiled kernel and the XLA sweep draw the same uniforms for the same tokens: from one
    state and key their sweeps agree on nearly every token (float32 sums in another order can move
    a draw across a boundary, after which that document's tokens follow other counts).  The XLA
    sweep inverts one running sum over the topics; the kernel finds the 16-topic chunk first, so
    K = 40 (two whole chunks and a partial one, with inactive topics inside them for LIDA) checks
    that the two-level search picks the same topic."""
    if not kernel.available():
        pytest.skip(f"the compiled LIDA kernel is unavailable ({kernel.load_error()})")
    corpus, _ = small
    for variant in ("lda", "lida"):
        tokens = lida_state.make_tokens(corpus, block_tokens=100)
        cfg = lida_state.Config(variant=variant, n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words,
                       n_rows=corpus.n_words, n_tokens=corpus.n_tokens, sample=())
        st = lida_state.init_state(jax.random.key(0), tokens, cfg, HYPER, K)
        kernel.use_kernel(cfg)
        key = jax.random.key(5)
        a = kernel.sweep_kernel(key, st, tokens, cfg, st.theta_bar, st.phi_bar, draw="dense")
        b = assign_parallel(key, st, tokens, cfg, st.theta_bar, st.phi_bar, K)
        assert np.mean(np.asarray(a[0]) == np.asarray(b[0])) > 0.95
        for x, y in zip(a[1:], b[1:]):  # counts follow the assignments in both
            assert x.shape == y.shape and int(x.sum()) == int(y.sum())


@pytest.mark.parametrize("variant", ["lida", "lda"])
def test_kernel_threads_shared_and_bits_independent_of_threads(small, variant):
    """The LIDA sweep runs on the one thread pool of the compiled module (one setting for it and
    the E-step), and its draws do not depend on the number of threads: 1, 2 and 3 threads give
    the same bits, for the dense draw (LIDA) and LDA's sparse one (whose word lists are kept in
    topic order by the merge of each block, split between the threads by word), over two sweeps;
    the threads claim a block's documents as they free up, so which thread sweeps which document
    varies from run to run."""
    if not kernel.available():
        pytest.skip(f"the compiled LIDA kernel is unavailable ({kernel.load_error()})")
    from topicjax.core import kernels as core_kernels

    corpus, _ = small
    tokens = lida_state.make_tokens(corpus, block_tokens=60)
    cfg = lida_state.Config(variant=variant, n_topics=8, n_docs=corpus.n_docs, n_words=corpus.n_words,
                   n_rows=corpus.n_words, n_tokens=corpus.n_tokens, sample=())
    st = lida_state.init_state(jax.random.key(0), tokens, cfg, HYPER, 8)
    kernel.use_kernel(cfg)

    def two(key, st):
        for i in range(2):
            z, n_dk, n_wk, n_k = kernel.sweep_kernel(jax.random.fold_in(key, i), st, tokens, cfg, st.theta_bar,
                                                     st.phi_bar)
            st = st._replace(z=z, n_dk=n_dk, n_wk=n_wk, n_k=n_k)
        return st.z, st.n_dk, st.n_wk, st.n_k

    sweep = jax.jit(two)
    old = kernel.get_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            kernel.set_threads(n)
            assert core_kernels.get_threads() == n  # one setting for every kernel
            outs.append([np.asarray(a) for a in sweep(jax.random.key(3), st)])
        core_kernels.set_threads(2)
        assert kernel.get_threads() == 2
    finally:
        kernel.set_threads(old)
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            np.testing.assert_array_equal(a, b)


def _kernel_problem(small, variant="lida"):
    corpus, _ = small
    tokens = lida_state.make_tokens(corpus, block_tokens=60)
    cfg = lida_state.Config(variant=variant, n_topics=8, n_docs=corpus.n_docs, n_words=corpus.n_words,
                   n_rows=corpus.n_words, n_tokens=corpus.n_tokens, sample=())
    st = lida_state.init_state(jax.random.key(0), tokens, cfg, HYPER, 8)
    kernel.use_kernel(cfg)
    return tokens, cfg, st


def test_kernel_names_the_first_bad_token(small):
    """The kernel checks the ids it would index with before it moves anything (split between the
    threads): a token whose topic is inactive in its document, or whose word id is outside the
    vocabulary, is an error naming that token, with 1 and 2 threads alike."""
    if not kernel.available():
        pytest.skip(f"the compiled LIDA kernel is unavailable ({kernel.load_error()})")
    tokens, cfg, st = _kernel_problem(small)
    sweep = jax.jit(lambda key, st, tokens: kernel.sweep_kernel(key, st, tokens, cfg, st.theta_bar, st.phi_bar))
    doc = np.asarray(tokens.doc)
    t_bad = int(np.flatnonzero(doc == doc[-1])[0])  # a token of the last document (the 2nd thread's)
    d, k = doc[t_bad], int(st.z[t_bad])
    inactive = st._replace(theta_bar=st.theta_bar.at[d, k].set(False))
    word = np.asarray(tokens.word).copy()
    word[t_bad + 1] = corpus_words = int(st.n_wk.shape[0])  # one past the vocabulary
    assert corpus_words == cfg.n_words
    old = kernel.get_threads()
    try:
        for n in (1, 2):
            kernel.set_threads(n)
            with pytest.raises(Exception, match=f"token {t_bad} holds a topic that is not active in its document"):
                jax.block_until_ready(sweep(jax.random.key(1), inactive, tokens))
            with pytest.raises(Exception, match=f"token {t_bad + 1} has a word id outside"):
                jax.block_until_ready(sweep(jax.random.key(1), st, tokens._replace(word=jnp.asarray(word))))
    finally:
        kernel.set_threads(old)


def test_donated_sweep_equals_the_sweep(small):
    """``sweep(..., donate=True)`` writes into the state's arrays and gives the same bits as the sweep
    that copies them (the compiled kernel where it is built, the XLA sweep otherwise); the donated
    state's arrays are gone afterwards.  LDA: the fits donate where no activation can overflow."""
    tokens, cfg, st = _kernel_problem(small, "lda")
    key = jax.random.key(4)
    want = lida_sampler.sweep(st, key, tokens, cfg)
    mine = jax.tree.map(jnp.copy, st)
    got = lida_sampler.sweep(mine, key, tokens, cfg, donate=True)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert mine.n_wk.is_deleted() and mine.z.is_deleted()
