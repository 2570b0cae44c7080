"""One shape for every estimator (issue 29, item 3): ``Estimator(n_components, *, ...)`` with a
clear error for the older positional orders, one ``fit_many`` signature, one validation hook, no
silent fallback of ``fit_many``'s batch modes, one name per concept; and the host-level loop of
the one driver (item 4, :func:`topicjax.core.driver.run_host`) that LIDA's chains run on."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import topicjax as tj
from topicjax.core import checkpoint as ck
from topicjax.core import driver
from topicjax.estimator import FitManyFallbackWarning, TopicModelBase

import fitted_models as fm

CLASSES = {"PLSA": tj.PLSA, "ARTM": tj.ARTM, "PTM": tj.PTM, "TTMM": tj.TTMM, "LIDA": tj.LIDA}


@pytest.fixture(scope="module")
def corpus():
    return fm.corpus()  # the fits below compile the programs of the estimator-wide tests (tests/fitted_models.py)


# ----------------------------------------------------------------------------- constructors
@pytest.mark.parametrize("name", CLASSES)
def test_n_components_is_the_only_positional_parameter(name):
    params = list(inspect.signature(CLASSES[name].__init__).parameters.values())[1:]
    assert params[0].name == "n_components" and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:]), [p.name for p in params[1:]]
    assert CLASSES[name](7).n_components == 7


def test_ttmm_and_lida_take_their_old_first_argument_by_keyword():
    assert tj.LIDA(10).get_params()["n_components"] == 10 and tj.LIDA(10).variant == "lida"
    model = tj.TTMM(30, n_themes=4)
    assert (model.n_components, model.n_themes) == (30, 4)
    assert tj.LIDA(12, variant="ftm").variant == "ftm"


@pytest.mark.parametrize("make, message", [
    (lambda: tj.TTMM(20, 100), r"^TTMM\(20, 100\): n_components \(the number of topics\) is the only positional "
                               r"argument and n_themes is keyword-only; write TTMM\(100, n_themes=20\)$"),
    (lambda: tj.LIDA("ftm", 30), r"LIDA\('ftm', 30\): .* variant is keyword-only; write LIDA\(30, variant='ftm'\)$"),
    (lambda: tj.LIDA("lda"), r"LIDA\('lda'\): .* variant is keyword-only; write LIDA\(variant='lda'\)$"),
    (lambda: tj.ARTM(10, [lambda phi, theta: 0.0]), r"^ARTM takes one positional argument, n_components .*, and 2 "
                                                    r"were given; pass the others by keyword"),
    (lambda: tj.PTM(8, "2020"), r"^PTM takes one positional argument"),
    (lambda: tj.PLSA(8, 100), r"^PLSA takes one positional argument"),
])
def test_older_positional_orders_are_a_type_error_naming_the_keyword(make, message):
    with pytest.raises(TypeError, match=message):
        make()


@pytest.mark.parametrize("name", CLASSES)
def test_clone_pickle_and_load_construct_by_keyword(name, tmp_path):
    import copy
    import pickle

    from sklearn.base import clone

    model = CLASSES[name](5, max_iter=3)
    for other in (clone(model), pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        assert other.get_params() == model.get_params()


# ----------------------------------------------------------------------------- fit_many
COMMON_FIT_MANY = ["self", "X", "y", "seeds", "n_topics", "params", "mode", "vmap_size", "workers"]
EXTRAS = {"PLSA": ["taus"], "ARTM": ["taus"], "PTM": ["n_restarts"], "TTMM": [], "LIDA": []}


@pytest.mark.parametrize("name", CLASSES)
def test_one_fit_many_signature(name):
    base = inspect.signature(TopicModelBase.fit_many).parameters
    params = inspect.signature(CLASSES[name].fit_many).parameters
    assert list(params) == COMMON_FIT_MANY + EXTRAS[name]
    for p in COMMON_FIT_MANY:
        assert (params[p].kind, params[p].default) == (base[p].kind, base[p].default), p
    assert all(params[p].kind is inspect.Parameter.KEYWORD_ONLY and params[p].default is None for p in EXTRAS[name])


FALLBACKS = {  # a family's fit_many that has no compiled batch for these settings (tests/fitted_models.py's)
    "LIDA": (lambda: fm.make("LIDA", max_iter=2, eval_every=0), dict(seeds=[0, 1]),
             "LIDA's chains change their shapes between sweeps"),
    "TTMM-SGD": (lambda: fm.make("TTMM", solver="sgd", batch_size=8, max_iter=2),
                 dict(seeds=[0, 1]), "TTMM's SGD epochs draw their minibatches on the host"),
    "TTMM-n_topics": (lambda: fm.make("TTMM", max_iter=2), dict(n_topics=[fm.T - 1, fm.T]),
                      "TTMM's compiled batch varies seeds only"),
    "PTM-params": (lambda: fm.make("PTM", max_iter=2), dict(params={"bic": ["2014", "2020"]}),
                   "PTM's compiled batch runs restarts"),
    "ARTM-params": (lambda: fm.make("ARTM", max_iter=2), dict(params={"max_iter": [1, 2]}),
                    "ARTM's compiled batch varies taus, seeds and n_topics only"),
}


@pytest.mark.parametrize("case", FALLBACKS)
@pytest.mark.parametrize("mode", ["vmap", "devices"])
def test_a_batch_mode_that_falls_back_warns(corpus, case, mode):
    make, settings, why = FALLBACKS[case]
    with pytest.warns(FitManyFallbackWarning, match=rf"^fit_many: {why}.*, so mode='{mode}' runs the 2 fits one "
                                                    r"after the other on the host"):
        models = make().fit_many(corpus, mode=mode, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FitManyFallbackWarning)  # asked for: no warning
        alone = make().fit_many(corpus, mode="sequential", **settings)
    for a, b in zip(models, alone):
        np.testing.assert_array_equal(np.asarray(a.phi_), np.asarray(b.phi_))


def test_a_compiled_batch_does_not_warn(corpus):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FitManyFallbackWarning)
        models = fm.make("TTMM", max_iter=2).fit_many(corpus, seeds=[0, 1], mode="vmap")
    assert len(models) == 2


def test_fit_many_refuses_a_bad_vmap_size_and_positional_taus(corpus):
    with pytest.raises(ValueError, match=r"^vmap_size must be an integer >= 1, got 0"):
        tj.LIDA(4, variant="lda", max_iter=1, progress=False).fit_many(corpus, seeds=[0], vmap_size=0)
    with pytest.raises(TypeError, match=r"y is the documents' labels.*fit_many\(X, taus=\.\.\.\)"):
        tj.ARTM(3, max_iter=1, progress=False).fit_many(corpus, np.ones((2, 1)))


# ----------------------------------------------------------------------------- one hook, one name per concept
@pytest.mark.parametrize("name", CLASSES)
def test_one_validation_hook(name):
    cls = CLASSES[name]
    hooks = {n for klass in cls.__mro__ for n in vars(klass)
             if n.startswith("_check_") and n not in ("_check_fitted", "_check_class", "_check_loaded")}
    assert not hooks, f"{name} has validation hooks besides _validate_params: {sorted(hooks)}"


@pytest.mark.parametrize("make, message", [
    (lambda: tj.TTMM(3, optimizer=__import__("optax").adam(0.1)), r"optimizer is only used by solver='sgd'"),
    (lambda: tj.LIDA(4, delta=-0.5, sigma=0.2), r"delta must be > -sigma"),
    (lambda: tj.LIDA(4, init_topics=5), r"init_topics must be in \[1, n_components=4\]"),
])
def test_constraints_between_parameters_are_in_the_hook(make, message):
    with pytest.raises(ValueError, match=message):
        make()._validate_params()


def test_one_name_per_concept():
    lida = inspect.signature(tj.LIDA.__init__).parameters
    assert "sampler" in lida and "tokens_per_block" in lida and "mode" not in lida and "batch_size" not in lida
    assert "batch_size" in inspect.signature(tj.TTMM.__init__).parameters  # documents per minibatch only
    for cls in (tj.ARTM, tj.PLSA):
        p = inspect.signature(cls.__init__).parameters
        assert "learning_offset" in p and "learning_decay" in p
    assert "vmap_size" in inspect.signature(driver.run_many).parameters
    assert "theta_" in tj.PTM._saved_arrays and not isinstance(inspect.getattr_static(tj.PTM, "theta_", None),
                                                                 property)


def test_ptm_theta_is_its_topic_proportions(corpus):
    m = fm.fitted("PTM")
    assert m.theta_.shape == (fm.T, corpus.n_docs) and not hasattr(m, "alpha_")
    np.testing.assert_allclose(m.theta_.sum(0), 1.0, atol=1e-5)
    assert np.all(m.theta_[~m.v_] == 0)


# ----------------------------------------------------------------------------- the driver's host loop
def _growing_step(state, iteration):
    """A host step whose state grows by one entry per iteration (shapes change every time)."""
    new = np.concatenate([state, [float(iteration)]])
    return new, {"objective": float(new.sum()), "size": int(new.size)}


def test_run_host_records_every_iteration():
    state, history = driver.run_host(_growing_step, np.zeros(1), max_iter=4, progress=False)
    np.testing.assert_array_equal(state, [0.0, 1.0, 2.0, 3.0, 4.0])
    assert [h["iteration"] for h in history] == [1, 2, 3, 4]
    assert [h["objective"] for h in history] == [1.0, 3.0, 6.0, 10.0]
    assert [list(h) for h in history] == [["iteration", "objective", "size", "seconds"]] * 4


def test_run_host_stops_at_a_non_finite_value_and_keeps_the_last_good_state():
    def step(state, iteration):
        return state + 1, {"objective": 1.0, "rate": float("nan") if iteration == 3 else 0.5}

    with pytest.raises(tj.NumericalError, match=r"^fit: iteration 3 produced non-finite values \(rate = nan\)") as e:
        driver.run_host(step, 0, max_iter=5, progress=False)
    assert e.value.iteration == 3 and e.value.reason == "nonfinite" and e.value.state == 2
    with pytest.raises(tj.NumericalError, match=r"\(alpha = inf\)"):
        driver.run_host(lambda s, i: (s, {"objective": 0.0}), 0, max_iter=2, progress=False,
                        health=lambda s: {"alpha": float("inf")})


def test_run_host_resumes_a_checkpoint_whose_shapes_changed(tmp_path):
    def to_host(state):
        return {"values": np.asarray(state)}

    def from_host(host, template):
        return np.asarray(host["values"])

    reference, ref_hist = driver.run_host(_growing_step, np.zeros(1), max_iter=7, progress=False)
    run = ck.RunCheckpoint(tmp_path / "fit.npz", every=3)
    calls = []

    def stop_after_6(state, iteration):
        if iteration == 7:
            raise KeyboardInterrupt  # killed during the 7th iteration, after the checkpoint of the 6th
        calls.append(iteration)
        return _growing_step(state, iteration)

    with pytest.raises(KeyboardInterrupt):
        driver.run_host(stop_after_6, np.zeros(1), max_iter=7, progress=False, checkpoint=run, to_host=to_host,
                        from_host=from_host)
    resumed = []

    def counting(state, iteration):
        resumed.append(iteration)
        return _growing_step(state, iteration)

    state, history = driver.run_host(counting, np.zeros(1), max_iter=7, progress=False, checkpoint=run,
                                     to_host=to_host, from_host=from_host)
    assert calls == [1, 2, 3, 4, 5, 6] and resumed == [7]
    np.testing.assert_array_equal(state, reference)
    assert [{k: v for k, v in h.items() if k != "seconds"} for h in history] == \
        [{k: v for k, v in h.items() if k != "seconds"} for h in ref_hist]
    again, _ = driver.run_host(counting, np.zeros(1), max_iter=7, progress=False, checkpoint=run, to_host=to_host,
                               from_host=from_host)  # finished: returns at once
    assert resumed == [7] and np.array_equal(again, reference)


def test_host_and_compiled_checkpoints_are_not_mixed(tmp_path):
    run = ck.RunCheckpoint(tmp_path / "fit.npz", every=1)
    run.save_host({"x": np.zeros(2)}, 1, [{"iteration": 1, "objective": 0.0}], finished=False)
    with pytest.raises(ValueError, match="holds a host-level run, not a compiled one"):
        run.restore((), ())
    run.save((), (), False, 1, [], finished=False)
    with pytest.raises(ValueError, match="holds a compiled run, not a host-level one"):
        run.restore_host()


def test_lida_runs_on_the_host_driver(corpus, monkeypatch):
    seen = []
    real = driver.run_host

    def spy(step, state, **kw):
        seen.append(kw["desc"])
        return real(step, state, **kw)

    monkeypatch.setattr(driver, "run_host", spy)
    model = fm.make("LIDA", max_iter=3, eval_every=0).fit(corpus)
    assert seen == ["LIDA[lda]"] and [h["iteration"] for h in model.history_] == [1, 2, 3]
