"""One estimator contract for every family (issue 11): the same parameters validated with the
same messages, the same fitted attributes and shapes, one history schema, save/load, fit_many
equal to separate fits, ``random_state`` as an int, ``None`` or a key.

The families are those of the registry (``topicjax/_families.py``): a family added there is
checked here with no change to this file (its fits then use ``tests/fitted_models.py``'s DEFAULT).
"""

import jax
import numpy as np
import pytest

import topicjax as tj

import fitted_models as fm

#: every estimator class of the registry (``topicjax/_families.py``), fitted with the settings
#: shared by the estimator-wide tests (tests/fitted_models.py: a class not listed there fits with
#: its DEFAULT alone)
def maker(name: str):
    """A function making a small estimator of class ``name``, keywords overriding."""
    return lambda **kw: fm.make(name, **kw)


FAMILIES = {name: maker(name) for name in fm.classes()}
NAMES = list(FAMILIES)


@pytest.fixture(scope="module")
def corpus():
    return fm.corpus()


@pytest.fixture(scope="module")
def fitted(corpus):
    return {name: fm.fitted(name) for name in FAMILIES}


BAD = [
    ("n_components", 0, r"n_components must be an integer >= 1, got 0"),
    ("n_components", 2.5, r"n_components must be an integer >= 1, got 2.5"),
    ("max_iter", 0, r"max_iter must be an integer >= 1, got 0"),
    ("max_iter", -1, r"max_iter must be an integer >= 1, got -1"),
    ("tol", float("nan"), r"tol must be a finite number, got nan"),
    ("tol", -1.0, r"tol must be a number >= 0.0, got -1.0"),
    ("random_state", -1, r"random_state must be an int in \[0, 2\*\*32\), None or a jax.random key, got -1"),
    ("random_state", 2**40, r"random_state must be an int in \[0, 2\*\*32\)"),
    ("random_state", "7", r"random_state must be an int, None or a jax.random key, got '7'"),
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("param, value, message", BAD, ids=[f"{p}={v}" for p, v, _ in BAD])
def test_parameters_are_validated_the_same_way(corpus, name, param, value, message):
    est = FAMILIES[name]()
    if param not in est.get_params():
        pytest.skip(f"{name} has no {param}")
    with pytest.raises(ValueError, match=message):
        est.set_params(**{param: value}).fit(corpus)


@pytest.mark.parametrize("name", NAMES)
def test_fitted_attributes(corpus, fitted, name):
    m = fitted[name]
    T, W, D = fm.T, corpus.n_words, corpus.n_docs
    assert m.phi_.shape == (W, T) and m.components_.shape == (T, W) and m.theta_.shape == (T, D)
    np.testing.assert_allclose(m.components_, np.asarray(m.phi_).T)
    np.testing.assert_allclose(m.components_.sum(1), 1, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(m.theta_).sum(0), 1, rtol=1e-4)
    assert np.all(np.asarray(m.phi_) >= 0) and np.all(np.asarray(m.theta_) >= 0)
    out = m.transform(corpus)
    assert out.shape == (D, T)
    np.testing.assert_allclose(out.sum(1), 1, rtol=1e-4)
    assert m.vocab_ == list(corpus.vocab) and np.array_equal(m.get_topics(), m.components_)
    # one history schema: a record per iteration with iteration, objective and seconds
    assert m.n_iter_ == len(m.history_) >= 1
    assert [h["iteration"] for h in m.history_] == list(range(1, m.n_iter_ + 1))
    for h in m.history_:
        assert isinstance(h["objective"], float) and isinstance(h["seconds"], float) and h["seconds"] >= 0


@pytest.mark.parametrize("name", NAMES)
def test_fit_transform_is_the_training_theta(corpus, fitted, name):
    out = FAMILIES[name](random_state=0).fit_transform(corpus)
    np.testing.assert_allclose(out, np.asarray(fitted[name].theta_).T, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_random_state_int_none_or_key(corpus, fitted, name):
    again = FAMILIES[name](random_state=0).fit(corpus)
    np.testing.assert_array_equal(again.phi_, fitted[name].phi_)  # same seed, same model (CPU)
    keyed = FAMILIES[name](random_state=jax.random.key(0)).fit(corpus)
    np.testing.assert_array_equal(keyed.phi_, fitted[name].phi_)  # the key of seed 0 is seed 0
    fresh = FAMILIES[name](random_state=None).fit(corpus)
    assert isinstance(fresh.seed_, int)
    np.testing.assert_array_equal(FAMILIES[name](random_state=fresh.seed_).fit(corpus).phi_, fresh.phi_)


@pytest.mark.parametrize("name", NAMES)
def test_save_load_round_trip(corpus, fitted, name, tmp_path):
    m = fitted[name]
    m.save(tmp_path / name)
    back = type(m).load(tmp_path / name)
    np.testing.assert_array_equal(back.phi_, m.phi_)
    np.testing.assert_array_equal(back.components_, m.components_)
    assert back.history_ == m.history_ and back.n_iter_ == m.n_iter_
    np.testing.assert_allclose(back.transform(corpus), m.transform(corpus), rtol=1e-6, atol=1e-7)
    assert type(tj.persistence.load(tmp_path / name)) is type(m)


@pytest.mark.parametrize("name", NAMES)
def test_fit_many_equals_separate_fits(corpus, fitted, name):
    models = FAMILIES[name]().fit_many(corpus, seeds=[0, 3])
    assert [m.random_state for m in models] == [0, 3]
    np.testing.assert_allclose(models[0].phi_, fitted[name].phi_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(models[1].phi_, FAMILIES[name](random_state=3).fit(corpus).phi_, rtol=1e-5, atol=1e-6)
    assert models[0].n_iter_ == fitted[name].n_iter_


def test_one_error_type_for_numerical_failures():
    assert tj.NumericalError is tj.core.errors.NumericalError
    assert issubclass(tj.NumericalError, FloatingPointError)
