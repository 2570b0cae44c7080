"""One parameter validation (issue 16, part 2): every constructor parameter of every estimator has a
validator, every bad value in the table below is refused by ``fit`` and ``fit_many`` before any work,
with one message shape (``<name> must be ..., got <value>``); public functions that take such
parameters (``ptm.select_order``, ``scale.online.fit_online``, ``scale.distributed.fit``) too."""

from __future__ import annotations

import re

import numpy as np
import optax
import pytest

import topicjax as tj
from topicjax.core import validation as V
from topicjax.estimator import _COMMON
from topicjax.ptm import select_order
from topicjax.scale import online

import fitted_models as fm

ESTIMATORS = {
    "PLSA": lambda **kw: tj.PLSA(**{"n_components": 3, "max_iter": 3, "progress": False, **kw}),
    "ARTM": lambda **kw: tj.ARTM(**{"n_components": 3, "max_iter": 3, "progress": False, **kw}),
    "PTM": lambda **kw: tj.PTM(**{"n_components": 3, "max_iter": 2, "progress": False, **kw}),
    "TTMM": lambda **kw: tj.TTMM(**{"n_themes": 2, "n_components": 3, "max_iter": 3, "progress": False, **kw}),
    "LIDA": lambda **kw: tj.LIDA(**{"variant": "lda", "n_components": 3, "max_iter": 3, "progress": False, **kw}),
}

NAN = float("nan")

#: (family, parameter, bad value, what the message must say after "<parameter> must be ")
BAD = [
    # the cases, in every family
    *[(f, "max_iter", -1, r"an integer >= 1, got -1") for f in ESTIMATORS],
    *[(f, "tol", NAN, r"a finite number, got nan") for f in ("PLSA", "ARTM", "PTM", "TTMM")],
    *[(f, "random_state", "7", r"an int, None or a jax.random key, got '7'") for f in ESTIMATORS],
    *[(f, "n_components", 2.5, r"an integer >= 1, got 2.5") for f in ESTIMATORS],
    *[(f, "progress", "yes", r"True or False, got 'yes'") for f in ESTIMATORS],
    ("PLSA", "tol", -1e-3, r"a number >= 0.0, got -0.001"),
    ("PLSA", "chunk", 0, r"None or an integer >= 1, got 0"),
    ("PLSA", "transform_iter", 0, r"an integer >= 1, got 0"),
    *[(f, "learning_offset", 0.5, r"a number >= 1.0, got 0.5") for f in ("PLSA", "ARTM")],
    *[(f, "learning_decay", 1.5, r"a number >= 0.0 and <= 1.0, got 1.5") for f in ("PLSA", "ARTM")],
    ("ARTM", "learning_decay", NAN, r"a finite number, got nan"),
    ("ARTM", "regularizers", 3, r"None, a Regularizer, a callable R\(phi, theta\), a pair \(R, tau\) or a list of "
                                r"those; a regularizer must be a callable .*got 3"),
    ("ARTM", "regularizers", [(lambda phi: 0.0, 1.0)], r"None, a Regularizer.*regularizers\[0\]: regularizer "
                                                       r"'<lambda>' must take exactly two arguments"),
    ("ARTM", "regularizers", [(tj.regularizers.decorrelate(), "x")], r"None, a Regularizer.*"),
    ("ARTM", "background_topics", -1, r"an integer >= 0 or a list of strings or integers, got -1"),
    ("ARTM", "background_topics", [1.5], r"an integer >= 0 or a list of strings or integers, got \[1.5\]"),
    ("ARTM", "topic_names", "abc", r"None or a list of strings, all different, got 'abc'"),
    ("ARTM", "topic_names", ["a", "a", "b"], r"None or a list of strings, all different, got \['a', 'a', 'b'\]"),
    ("ARTM", "scores", ["nope"], r"names of topicjax.evaluation.scores or callables .*unknown score 'nope'"),
    ("ARTM", "scores", [3], r"names of topicjax.evaluation.scores or callables .*got 3"),
    ("ARTM", "score_every", 0, r"an integer >= 1, got 0"),
    ("ARTM", "modality_weights", {"text": -1.0}, r"None or a dict of names to finite numbers >= 0.0, got"),
    ("ARTM", "modality_weights", {"text": NAN}, r"None or a dict of names to finite numbers >= 0.0, got"),
    ("ARTM", "modality_weights", [1.0], r"None or a dict of names to finite numbers >= 0.0, got \[1.0\]"),
    ("ARTM", "label_weight", 0, r"None or a finite number > 0.0, got 0"),
    ("ARTM", "label_weight", NAN, r"None or a finite number > 0.0, got nan"),
    ("ARTM", "overregularized", "drop", r"one of 'remove', 'keep', got 'drop'"),
    ("ARTM", "doc_passes", 0, r"None or an integer >= 1, got 0"),
    ("ARTM", "transform_iter", 1.0, r"an integer >= 1, got 1.0"),
    ("ARTM", "chunk", -5, r"None or an integer >= 1, got -5"),
    ("ARTM", "tol", float("inf"), r"a finite number, got inf"),
    ("PTM", "bic", "2015", r"one of '2014', '2014-exact', '2020', '2020-printed', got '2015'"),
    ("PTM", "bic", 2014, r"one of '2014', '2014-exact', '2020', '2020-printed', got 2014"),
    ("PTM", "n_init_docs", 0, r"an integer >= 1, got 0"),
    ("PTM", "max_u_cycles", -1, r"an integer >= 0, got -1"),
    ("PTM", "max_v_rounds", 1.5, r"an integer >= 0, got 1.5"),
    ("PTM", "u_candidates", 0, r"an integer >= 1, got 0"),
    ("PTM", "v_candidates", (1,), r"a pair of integers >= 1, got \(1,\)"),
    ("PTM", "v_candidates", (0, 3), r"a pair of integers >= 1, got \(0, 3\)"),
    ("PTM", "transform_iter", 0, r"an integer >= 1, got 0"),
    ("PTM", "block_tokens", 0, r"an integer >= 1, got 0"),
    ("PTM", "tol", -1.0, r"a number >= 0.0, got -1.0"),
    ("TTMM", "n_themes", 0, r"an integer >= 1, got 0"),
    ("TTMM", "solver", "adam", r"one of 'em', 'sgd', got 'adam'"),
    ("TTMM", "optimizer", "adam", r"None or an optax GradientTransformation \(with init, update\), got 'adam'"),
    ("TTMM", "batch_size", 0, r"an integer >= 1, got 0"),
    ("TTMM", "chunk", 2.5, r"None or an integer >= 1, got 2.5"),
    ("LIDA", "variant", "hdp", r"one of 'lida', 'ftm', 'sstm', 'lda', got 'hdp'"),
    ("LIDA", "sampler", "fast", r"one of 'parallel', 'exact', 'stale', got 'fast'"),
    ("LIDA", "burn_in", -1, r"None or an integer >= 0, got -1"),
    ("LIDA", "tokens_per_block", 0, r"None or an integer >= 1, got 0"),
    ("LIDA", "mh_steps", 1.5, r"None or an integer >= 0, got 1.5"),
    ("LIDA", "init_topics", 0, r"None or an integer >= 1, got 0"),
    ("LIDA", "alpha", 0.0, r"a number > 0.0, got 0.0"),
    ("LIDA", "beta", NAN, r"a finite number, got nan"),
    ("LIDA", "eta", -1, r"a number > 0.0, got -1"),
    ("LIDA", "gamma", "1", r"a number, got '1'"),
    ("LIDA", "delta", float("inf"), r"a finite number, got inf"),
    ("LIDA", "xi", None, r"a number, got None"),
    ("LIDA", "sigma", 1.0, r"a number in \[0, 1\), got 1.0"),
    ("LIDA", "zeta", -0.1, r"a number >= 0.0, got -0.1"),
    ("LIDA", "sample_hyper", 1, r"True or False, got 1"),
    ("LIDA", "fixed_hyper", ("tau",), r"a list of names among 'alpha', .* \(unknown hyperparameter 'tau'\)"),
    ("LIDA", "fixed_hyper", "alpha", r"a list of names among 'alpha', .*got 'alpha'"),
    ("LIDA", "eta_prior", (1.0,), r"a pair \(shape, rate\) of finite numbers > 0, got \(1.0,\)"),
    ("LIDA", "gamma_prior", (1.0, 0.0), r"a pair \(shape, rate\) of finite numbers > 0, got \(1.0, 0.0\)"),
    ("LIDA", "vocabulary", "open", r"one of 'finite', 'infinite', got 'open'"),
    ("LIDA", "n_phantom", -1, r"None or an integer >= 0, got -1"),
    ("LIDA", "hyper_start", 2.0, r"None or an integer >= 0, got 2.0"),
    ("LIDA", "grow", "double", r"one of 'auto', 'error', got 'double'"),
    ("LIDA", "transform_iter", 0, r"an integer >= 1, got 0"),
    ("LIDA", "eval_every", -1, r"an integer >= 0, got -1"),
    ("LIDA", "init", "kmeans", r"one of 'random', 'ibp', got 'kmeans'"),
]


@pytest.fixture(scope="module")
def corpus():
    return fm.corpus()  # shared with the estimator-wide tests (tests/fitted_models.py)


@pytest.mark.parametrize("family", list(ESTIMATORS))
def test_every_parameter_has_a_validator(family):
    est = ESTIMATORS[family]()
    missing = sorted(set(est.get_params(deep=False)) - set(_COMMON) - set(type(est)._constraints))
    assert not missing, f"{family}: parameters without a validator: {missing}"


@pytest.mark.parametrize("family", list(ESTIMATORS))
def test_the_table_covers_every_parameter(family):
    params = set(ESTIMATORS[family]().get_params(deep=False))
    covered = {p for f, p, _, _ in BAD if f == family}
    covered |= {"random_state", "tol"} & params  # rows in tests/test_estimator_contract.py
    assert not params - covered, f"{family}: no bad value in the table for {sorted(params - covered)}"


def _id(value) -> str:
    """A test id without memory addresses (a lambda's repr has one): pytest-xdist's workers must
    collect the same ids."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


@pytest.mark.parametrize("family, param, value, message", BAD,
                         ids=[f"{f}-{p}={_id(v)}" for f, p, v, _ in BAD])
def test_bad_values_are_refused_by_fit_and_fit_many(corpus, family, param, value, message):
    full = rf"^{re.escape(param)} must be {message}"
    with pytest.raises(ValueError, match=full):
        ESTIMATORS[family](**{param: value}).fit(corpus)
    with pytest.raises(ValueError, match=full):
        ESTIMATORS[family](**{param: value}).fit_many(corpus, seeds=[0, 1])


@pytest.mark.parametrize("family", list(ESTIMATORS))
def test_defaults_and_other_valid_values_pass(family):
    ESTIMATORS[family]()._validate_params()
    good = {
        "ARTM": dict(background_topics=["topic_0", 2], topic_names=("a", "b", "c"), scores=(), doc_passes=2,
                     modality_weights={"text": 1.0}, label_weight=0.5, chunk=64,
                     regularizers=tj.regularizers.smooth_phi(), random_state=np.uint32(5), tol=0),
        "PLSA": dict(chunk=None, transform_iter=np.int64(3), tol=1e-9),
        "PTM": dict(bic="2020", max_u_cycles=0, max_v_rounds=0, v_candidates=[2, 2], block_tokens=16),
        "TTMM": dict(solver="sgd", optimizer=optax.sgd(0.1), chunk=None, random_state=None),
        "LIDA": dict(variant="lida", sampler="exact", burn_in=0, mh_steps=0, init_topics=2, sigma=0.5, zeta=0.0,
                     delta=-0.2, xi=np.float32(2.0), fixed_hyper=["alpha", "xi"], eta_prior=[2, 0.5],
                     vocabulary="infinite", n_phantom=0, hyper_start=0, eval_every=0, init="ibp", sample_hyper=False),
    }[family]
    ESTIMATORS[family](**good)._validate_params()


def test_numbers_bools_and_strings_are_not_mixed_up():
    with pytest.raises(ValueError, match=r"^max_iter must be an integer >= 1, got True"):
        V.check_int(True, "max_iter", 1)
    with pytest.raises(ValueError, match=r"^tol must be a number, got '0.1'"):
        V.check_number("0.1", "tol", 0.0)
    with pytest.raises(ValueError, match=r"^progress must be True or False, got 1"):
        V.check_bool(1, "progress")
    with pytest.raises(ValueError, match=r"^solver must be one of 'em', 'sgd', got 'EM'"):
        V.one_of("em", "sgd")("EM", "solver")
    assert V.check_bool(np.bool_(True), "progress") is True and V.int_pair()(np.array([1, 2]), "x") == (1, 2)


# ----------------------------------------------------------------------------- public functions
SELECT_ORDER_BAD = [
    (dict(m_max=5.0), r"^m_max must be an integer >= 1, got 5.0"),
    (dict(step=0), r"^step must be an integer >= 1, got 0"),
    (dict(m_min=NAN), r"^m_min must be an integer >= 1, got nan"),
    (dict(random_state=-1), r"^random_state must be an int in \[0, 2\*\*32\), None or a jax.random key, got -1"),
    (dict(progress="no"), r"^progress must be True or False, got 'no'"),
    (dict(keep_models=None), r"^keep_models must be True or False, got None"),
    (dict(callback=3), r"^callback must be None or a callable callback\(order, model, seconds\), got 3"),
    (dict(max_iter=-1), r"^max_iter must be an integer >= 1, got -1"),  # the PTM(max_iter=-1)
    (dict(tol=NAN), r"^tol must be a finite number, got nan"),
    (dict(bic="2021"), r"^bic must be one of"),
    (dict(n_components=3), r"select_order chooses n_components itself"),
    (dict(n_topics=3), r"select_order: PTM has no parameter\(s\) \['n_topics'\]"),
    (dict(checkpoint_every=0), r"^checkpoint_every must be an integer >= 1, got 0"),
]


@pytest.mark.parametrize("kwargs, message", SELECT_ORDER_BAD, ids=[next(iter(k)) for k, _ in SELECT_ORDER_BAD])
def test_select_order_validates_its_parameters(corpus, kwargs, message):
    args = {"m_max": 4, "m_min": 2, "step": 1, "progress": False, "max_iter": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        select_order(corpus, **args)


def test_select_order_random_state_none_records_its_seed(corpus):
    # from the shared number of topics down: the PTM programs of tests/fitted_models.py's fits
    res = select_order(corpus, fm.T, fm.T - 1, random_state=None, max_iter=3, progress=False)
    assert isinstance(res.seed, int) and all(m.seed_ == res.seed for m in res.models.values())
    again = select_order(corpus, fm.T, fm.T - 1, random_state=res.seed, max_iter=3, progress=False)
    assert again.bics == res.bics


FIT_ONLINE_BAD = [
    (dict(n_components=0), r"^n_components must be an integer >= 1, got 0"),
    (dict(passes=-1), r"^passes must be an integer >= 1, got -1"),
    (dict(update_every=1.5), r"^update_every must be an integer >= 1, got 1.5"),
    (dict(learning_decay=NAN), r"^learning_decay must be a finite number, got nan"),
    (dict(learning_offset=-1.0), r"^learning_offset must be a number >= 1.0, got -1.0"),
    (dict(learning_offset=0.5), r"^learning_offset must be a number >= 1.0, got 0.5"),
    (dict(learning_decay=1.5), r"^learning_decay must be a number >= 0.0 and <= 1.0, got 1.5"),
    (dict(random_state="x"), r"^random_state must be an int, None or a jax.random key, got 'x'"),
    (dict(progress=0), r"^progress must be True or False, got 0"),
    (dict(state="x"), r"^state must be None or an OnlineState of a previous fit, got str"),
    (dict(regularizers=[3]), r"^regularizers must be None, a Regularizer.*regularizers\[0\]"),
]


@pytest.mark.parametrize("kwargs, message", FIT_ONLINE_BAD, ids=[next(iter(k)) for k, _ in FIT_ONLINE_BAD])
def test_fit_online_validates_its_parameters(corpus, tmp_path, kwargs, message):
    store = online.write_store([corpus], tmp_path / "store", batch_size=8)
    args = {"n_components": 3, "progress": False, **kwargs}
    with pytest.raises(ValueError, match=message):
        online.fit_online(store, **args)


def test_distributed_fit_validates_like_artm(corpus):
    from topicjax.scale import distributed

    with pytest.raises(ValueError, match=r"^max_iter must be an integer >= 1, got -1"):
        distributed.fit(corpus, 3, max_iter=-1, progress=False)
    with pytest.raises(ValueError, match=r"^tol must be a finite number, got nan"):
        distributed.fit(corpus, 3, tol=NAN, progress=False)
