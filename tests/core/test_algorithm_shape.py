"""One algorithm shape across the families (issue 43 item 2).

Every family's algorithm module exposes the same names: a state type ``State``, ``init``, ``step``
and ``ALGORITHM``, the :class:`topicjax.core.driver.Algorithm` the driver runs (LIDA's chain, whose
shapes change between sweeps: a :class:`topicjax.core.driver.HostAlgorithm` run by ``run_host``).
And the names are the real thing: ``init`` then ``ALGORITHM`` run by the driver for two iterations
gives the model the estimator's ``fit`` gives, on a tiny corpus (LIDA: its chain through a growth of
K_max, and its sampler's ``init`` and ``step`` under ``run_host`` against an exact LDA fit).
"""

import importlib

import jax
import numpy as np
import pytest

import topicjax as tj
from topicjax.core import driver, layout
from topicjax.core.random import as_key

FULL = ["topicjax.artm.algorithm", "topicjax.artm.online", "topicjax.ptm.gem", "topicjax.ttmm.em",
        "topicjax.ttmm.sgd"]
HOST = ["topicjax.lida.chain"]
#: an algorithm module's building block without an ALGORITHM of its own (LIDA's sweep, which the chain's step runs)
PARTS = ["topicjax.lida.sampler"]


@pytest.mark.parametrize("name", FULL + HOST + PARTS)
def test_every_algorithm_module_has_the_same_names(name):
    mod = importlib.import_module(name)
    assert isinstance(mod.State, type) and hasattr(mod.State, "_fields"), f"{name}.State: a NamedTuple state type"
    assert callable(mod.init) and callable(mod.step), name
    assert {"State", "init", "step"} <= set(mod.__all__), name
    if name in FULL:
        assert isinstance(mod.ALGORITHM, driver.Algorithm) and "ALGORITHM" in mod.__all__, name
    elif name in HOST:
        assert isinstance(mod.ALGORITHM, driver.HostAlgorithm) and "ALGORITHM" in mod.__all__, name
    else:
        assert not hasattr(mod, "ALGORITHM"), f"{name}: a building block, not an algorithm the driver runs"


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    dense = rng.poisson(1.0, size=(12, 10))
    dense[:, 0] += 1  # no empty document
    return tj.Corpus.from_dense(dense)


def test_artm_algorithm_run_by_the_driver_is_plsa_fit(corpus):
    from topicjax.artm import algorithm
    from topicjax.regularizers import as_regularizer

    T, seed = 3, 5
    model = tj.PLSA(n_components=T, max_iter=2, tol=0.0, random_state=seed, progress=False).fit(corpus)
    reg = as_regularizer(None)
    state = algorithm.init(as_key(seed), corpus.n_words, corpus.n_docs, T, reg=reg)
    state, hist = driver.run(algorithm.ALGORITHM, algorithm.EMStatic(algorithm.EMConfig(remove=True)), state,
                             (layout.prepare(corpus), reg, None), max_iter=2, progress=False)
    assert len(hist) == 2 and isinstance(state, algorithm.State)
    np.testing.assert_allclose(np.asarray(state.phi), model.phi_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(state.theta), model.theta_, rtol=1e-5, atol=1e-7)


def test_ptm_algorithm_run_by_the_driver_is_ptm_fit(corpus):
    from topicjax.ptm import gem
    from topicjax.ptm.layout import ptm_data

    M, seed = 2, 1
    model = tj.PTM(n_components=M, max_iter=2, tol=0.0, random_state=seed, n_init_docs=2, progress=False)
    model.fit(corpus)
    data = ptm_data(corpus)
    state = gem.init(as_key(seed), data, M, n_init_docs=2)
    state, hist = driver.run(gem.ALGORITHM, (model._config(), int(data.beta0.shape[0])), state, (data,), max_iter=2,
                             progress=False)
    assert len(hist) == 2 and isinstance(state, gem.State)
    np.testing.assert_array_equal(np.asarray(state.u)[:M].astype(bool), model.u_)
    np.testing.assert_allclose(np.asarray(state.alpha)[:, :M].T, model.theta_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.where(model.u_, np.asarray(state.beta)[:M], 0.0), model.beta_, rtol=1e-5,
                               atol=1e-7)


def test_ttmm_em_algorithm_run_by_the_driver_is_ttmm_fit(corpus):
    from topicjax.ttmm import em
    from topicjax.ttmm.sweeps import theme_layout

    J, K, seed = 2, 3, 4
    model = tj.TTMM(n_themes=J, n_components=K, max_iter=2, tol=0.0, random_state=seed, progress=False).fit(corpus)
    state = em.init(as_key(seed), J, K, corpus.n_words, corpus.n_docs)
    state, hist = driver.run(em.ALGORITHM, None, state, (theme_layout(corpus, J, model.chunk),), max_iter=2,
                             progress=False)
    assert len(hist) == 2 and isinstance(state, em.State)
    for got, want in zip(state.params, (model.pi_, model.tau_, model.beta_)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-7)


def test_lida_sampler_run_by_the_host_driver_is_lda_fit(corpus):
    from topicjax.lida import sampler
    from topicjax.lida.state import HYPER, make_tokens

    K, seed = 3, 2
    # LDA (no topic births: K_max never grows), hyperparameters fixed for both sweeps
    model = tj.LIDA(variant="lda", n_components=K, max_iter=2, random_state=seed, sampler="exact",
                    hyper_start=2, eval_every=0, progress=False).fit(corpus)
    tokens = make_tokens(corpus, block_tokens=model._block_tokens(corpus.n_tokens), extras=False,
                         lanes_layout=False)
    cfg = model._config(corpus, K, corpus.n_words)
    k_init, _, key = jax.random.split(as_key(seed), 3)
    state = sampler.init(k_init, tokens, cfg, {h: getattr(model, h) for h in HYPER}, K)

    def one(s, it):
        return sampler.step(s, jax.random.fold_in(key, it - 1), tokens, cfg), {"objective": 0.0}

    state, hist = driver.run_host(one, state, max_iter=2, progress=False)
    assert len(hist) == 2 and isinstance(state, sampler.State)
    np.testing.assert_array_equal(np.asarray(state.z), np.asarray(model.state_.z))
    np.testing.assert_array_equal(np.asarray(state.n_wk), np.asarray(model.state_.n_wk))


def test_lida_chain_run_by_the_host_driver_is_lida_fit(corpus):
    """LIDA's ALGORITHM from ``chain.init``, with K_max grown during the run (2 slots, births on),
    the burn-in, the hyperparameter updates and an evaluation all inside the two sweeps."""
    from topicjax.lida import chain
    from topicjax.lida.model import _chain_keys
    from topicjax.lida.state import HYPER, make_tokens

    K, seed = 2, 3
    model = tj.LIDA(K, variant="ftm", max_iter=2, burn_in=0, hyper_start=1, eval_every=1, init_topics=1,
                    random_state=seed, sampler="exact", progress=False).fit(corpus)
    tokens = make_tokens(corpus, block_tokens=model._block_tokens(corpus.n_tokens), extras=False,
                         lanes_layout=False)
    cfg = model._config(corpus, K, corpus.n_words)
    _, k_init, k_hyp, key = _chain_keys(as_key(seed))
    c0 = chain.init(k_init, tokens, cfg, {h: getattr(model, h) for h in HYPER}, 1)
    memory = {"n_rows": corpus.n_words, "mode": "exact", "loglik": True, "lanes_layout": False, "extras": False}
    static = chain.Static("auto", 0, 1, 1, 2, corpus.n_words, tuple(sorted(memory.items())))
    final, hist = driver.run_host(chain.ALGORITHM, c0, args=chain.Args(tokens, key, k_hyp, corpus), static=static,
                                  max_iter=2, progress=False)
    assert isinstance(final, chain.State) and final.cfg.n_topics > K, "the chain grew K_max"
    assert final.cfg.n_topics == model.config_.n_topics
    np.testing.assert_array_equal(np.asarray(final.state.z), np.asarray(model.state_.z))
    assert final.trace == model.hyper_trace_
    assert [h["objective"] for h in hist] == [h["objective"] for h in model.history_]
    assert [h["perplexity"] for h in hist] == [h["perplexity"] for h in model.history_]
