"""A compiled plug-in never goes stale (issue 40, item 2).

A regularizer (or tuner objective) that reads a Python value outside its arguments -- a module
global, a closure cell, a default argument, an attribute of a captured object, a numpy array
mutated in place, a helper function reading a global -- is compiled into the fit.  From the
user's side: change the value and fit again, and the second fit must equal a fit with a
regularizer where the new value is written into the code (an independent function), and differ
from the first; an unchanged value must reuse the compiled program (no compilation at all).
"""

from __future__ import annotations

import contextlib
import copy
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import topicjax as tj
from topicjax import regularizers as R
from topicjax.core.compiled import jit
from topicjax.regularizers import _fresh

CORPUS, _, _ = tj.datasets.make_bars(n_docs=24, seed=0)
OLD, NEW = 0.5, 5.0  # the coefficient before and after the change (Θ smoothing, eq. 23)

# ---------------------------------------------------------------------------- counting compilations
_COMPILES = [0]


def _listener(event, duration, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


jax.monitoring.register_event_duration_secs_listener(_listener)


@contextlib.contextmanager
def compilations():
    """``n``: a one-element list holding the number of XLA compilations inside the block."""
    start = _COMPILES[0]
    n = [0]
    try:
        yield n
    finally:
        n[0] = _COMPILES[0] - start


def fit(reg, **kw):
    return tj.ARTM(n_components=3, regularizers=[(reg, 1.0)], max_iter=3, random_state=0, progress=False,
                   scores=(), **kw).fit(CORPUS)


def smoothing(c, theta):
    return c * jnp.sum(jnp.log(theta))


# the references: the new (and old) value written into the code, independent functions
def hard_new(phi, theta):
    return 5.0 * jnp.sum(jnp.log(theta))


def hard_old(phi, theta):
    return 0.5 * jnp.sum(jnp.log(theta))


@pytest.fixture(scope="module")
def reference():
    return {OLD: fit(hard_old), NEW: fit(hard_new)}


def check_refit(reg, change, reference):
    """Fit, ``change()`` what ``reg`` reads (from OLD to NEW), fit again: the first fit equals the
    reference with OLD, the second the reference with NEW, and they differ."""
    first = fit(reg)
    change()
    second = fit(reg)
    np.testing.assert_allclose(first.phi_, reference[OLD].phi_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(second.phi_, reference[NEW].phi_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(second.theta_, reference[NEW].theta_, rtol=1e-5, atol=1e-7)
    assert np.abs(second.theta_ - first.theta_).max() > 1e-3
    return first, second


# ---------------------------------------------------------------------------- what a regularizer reads
COEF = OLD


def reads_global(phi, theta):
    return smoothing(COEF, theta)


def test_module_global(reference):
    global COEF
    COEF = OLD
    try:
        check_refit(reads_global, lambda: globals().__setitem__("COEF", NEW), reference)
    finally:
        COEF = OLD


def test_closure_cell(reference):
    c = OLD

    def reads_cell(phi, theta):
        return smoothing(c, theta)

    def change():
        nonlocal c
        c = NEW

    check_refit(reads_cell, change, reference)


def test_default_argument(reference):
    def reads_default(phi, theta, c=OLD):
        return smoothing(c, theta)

    def change():
        reads_default.__defaults__ = (NEW,)

    check_refit(reads_default, change, reference)


ARRAY = np.full(3, OLD)


def reads_array(phi, theta):
    return jnp.sum(jnp.asarray(ARRAY, theta.dtype)[:, None] * jnp.log(theta))


def test_numpy_array_mutated_in_place(reference):
    ARRAY[:] = OLD
    try:
        check_refit(reads_array, lambda: ARRAY.__setitem__(slice(None), NEW), reference)
    finally:
        ARRAY[:] = OLD


HELPER_COEF = OLD


def helper(theta):
    return smoothing(HELPER_COEF, theta)


def reads_through_helper(phi, theta):
    return helper(theta)


def test_helper_function_reading_a_global(reference):
    global HELPER_COEF
    HELPER_COEF = OLD
    try:
        check_refit(reads_through_helper, lambda: globals().__setitem__("HELPER_COEF", NEW), reference)
    finally:
        HELPER_COEF = OLD


CONFIG = types.SimpleNamespace(coef=OLD)


def reads_attribute(phi, theta):
    return smoothing(CONFIG.coef, theta)


def test_attribute_of_a_captured_object(reference):
    CONFIG.coef = OLD
    try:
        check_refit(reads_attribute, lambda: setattr(CONFIG, "coef", NEW), reference)
    finally:
        CONFIG.coef = OLD


# ---------------------------------------------------------------------------- reuse
REUSED = types.SimpleNamespace(coef=OLD, unrelated=[1, 2])


def reads_reused(phi, theta):
    return smoothing(REUSED.coef, theta)


def test_unchanged_value_reuses_the_compiled_program(reference):
    """A refit with the same value compiles nothing, nor does a change of an attribute the
    regularizer does not read; a change compiles; going back to a value seen before finds its
    program again (nothing compiled); and every fit uses its value."""
    REUSED.coef = OLD
    try:
        fit(reads_reused)  # compiles
        with compilations() as same:
            again = fit(reads_reused)
        REUSED.unrelated.append(3)
        with compilations() as unrelated:
            fit(reads_reused)
        REUSED.coef = NEW
        with compilations() as changed:
            new = fit(reads_reused)
        REUSED.coef = OLD
        with compilations() as back:
            old = fit(reads_reused)
    finally:
        REUSED.coef = OLD
        del REUSED.unrelated[2:]
    assert same[0] == 0 and unrelated[0] == 0 and back[0] == 0
    assert changed[0] > 0
    np.testing.assert_allclose(again.phi_, reference[OLD].phi_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(new.phi_, reference[NEW].phi_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(old.phi_, reference[OLD].phi_, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------------------- another entry point
TRANSFORM_COEF = OLD


def reads_for_transform(phi, theta):
    return smoothing(TRANSFORM_COEF, theta)


def test_transform_uses_the_value_at_the_time_of_the_call(reference):
    """``transform`` applies Θ-regularizers to new documents: after a change it equals the
    transform of the same Φ with the new value written into the code."""
    global TRANSFORM_COEF
    TRANSFORM_COEF = OLD
    try:
        model = fit(reads_for_transform)
        before = model.transform(CORPUS)
        TRANSFORM_COEF = NEW
        after = model.transform(CORPUS)
    finally:
        TRANSFORM_COEF = OLD
    hard = copy.deepcopy(model).set_params(regularizers=[(hard_new, 1.0)])
    np.testing.assert_allclose(after, hard.transform(CORPUS), rtol=1e-5, atol=1e-7)
    assert np.abs(after - before).max() > 1e-3


# ---------------------------------------------------------------------------- the other plug-ins
SCALE = 1.0


def custom_fn(phi, theta, data):
    return SCALE * jnp.sum(data * phi)


def traced_tau(iteration):
    return SCALE * jnp.ones(())


@jax.jit
def jitted_helper(x):
    return SCALE * x


def reads_jitted_helper(phi, theta):
    return jnp.sum(jitted_helper(phi))


@jit
def penalty(reg, phi, theta):
    return reg.penalty(phi, theta)


@pytest.mark.parametrize("build", [
    lambda: R.custom(custom_fn, jnp.ones((4, 2))),                        # custom(fn, data)
    lambda: R.as_regularizer([(lambda phi, theta: jnp.sum(phi), traced_tau)]),  # a traced schedule
    lambda: R.as_regularizer(reads_jitted_helper),                      # a helper under jax.jit
], ids=["custom", "traced_schedule", "jax_jit_helper"])
def test_every_compiled_user_function_is_fresh(build):
    """The fn of custom(), a traced schedule tau(iteration) and a helper under jax.jit read a
    global too: a compiled evaluation of the (re-coerced) regularizer uses its current value,
    the same object built with the value written in (SCALE = 1 here: the plain sum)."""
    global SCALE
    phi, theta = jnp.full((4, 2), 0.25), jnp.full((2, 3), 0.5)
    reg = build()
    SCALE = 1.0
    try:
        one = float(penalty(R.as_regularizer(reg), phi, theta))
        SCALE = 3.0
        three = float(penalty(R.as_regularizer(reg), phi, theta))
    finally:
        SCALE = 1.0
    assert one == pytest.approx(float(jnp.sum(phi)))  # Σ φ = 2 (and data = 1, τ = 1)
    assert three == pytest.approx(3.0 * one)


class Weighted:
    """A callable object and a bound method reading an attribute of ``self`` (through a helper)."""

    def __init__(self, coef):
        self.coef, self.log = coef, []

    def __call__(self, phi, theta):
        return self.coef * jnp.sum(phi)

    def method(self, phi, theta):
        return self.weight() * jnp.sum(phi)

    def weight(self):
        return self.coef


@pytest.mark.parametrize("which", ["call", "method"])
def test_attribute_of_self_is_seen_and_other_attributes_are_not(which):
    obj = Weighted(1.0)
    plugin = (lambda: obj) if which == "call" else (lambda: obj.method)  # a new bound method each time
    phi, theta = jnp.full((4, 2), 0.25), jnp.full((2, 3), 0.5)
    first = R.as_regularizer(plugin())
    assert float(penalty(first, phi, theta)) == pytest.approx(float(jnp.sum(phi)))  # compiled with coef 1
    obj.log.append("not read by the regularizer")
    assert jax.tree.structure(R.as_regularizer(plugin())) == jax.tree.structure(first)  # the same program
    obj.coef = 3.0
    assert float(penalty(R.as_regularizer(plugin()), phi, theta)) == pytest.approx(3.0 * float(jnp.sum(phi)))


# ---------------------------------------------------------------------------- what cannot be seen
class Opaque:
    __slots__ = ()

    def factor(self):
        return 2.0


OPAQUE = Opaque()


def reads_opaque(phi, theta):
    return OPAQUE.factor() * jnp.sum(phi)


def test_unfingerprintable_value_warns_once_and_is_compared_by_identity():
    with pytest.warns(UserWarning, match=r"regularizer 'reads_opaque' reads 'OPAQUE' \(Opaque\)"):
        a = R.as_regularizer(reads_opaque)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = R.as_regularizer(reads_opaque)  # once: no second warning
    assert a.terms[0].fn == b.terms[0].fn and hash(a.terms[0].fn) == hash(b.terms[0].fn)


def test_fingerprint_by_value_and_by_identity():
    """Scalars, containers and arrays by value (a copy fingerprints equal, a change not);
    modules by identity; a cycle terminates."""
    box = {"a": [1.0, (2, "x")], "arr": np.arange(6.0).reshape(2, 3), "j": jnp.arange(3)}
    box["self"] = box

    def f(phi, theta):
        return box

    d0 = _fresh.fingerprint(f)[0]
    assert _fresh.fingerprint(f)[0] == d0
    box["arr"] = box["arr"].copy()
    assert _fresh.fingerprint(f)[0] == d0  # another array with the same content
    box["arr"][1, 2] = -1.0
    d1 = _fresh.fingerprint(f)[0]
    assert d1 != d0
    box["j"] = jnp.arange(3).at[0].set(7)
    assert _fresh.fingerprint(f)[0] != d1
    box["a"][1] = (2, "y")
    assert len({d0, d1, _fresh.fingerprint(f)[0]}) == 3


# ---------------------------------------------------------------------------- a tuner objective
OBJECTIVE_COEF = 1.0
SMOOTH = R.smooth_phi()


def reads_global_objective(phi, theta):
    return OBJECTIVE_COEF * jnp.sum(phi * phi)


def hard_objective(phi, theta):
    return 3.0 * jnp.sum(phi * phi)


def tuned(objective):
    from topicjax.tune import tune

    model = tj.ARTM(3, regularizers=[(SMOOTH, 0.01)], max_iter=3, random_state=0, progress=False, scores=())
    result = tune(model, CORPUS, objective, {"smooth_phi": (1e-3, 1.0)}, n_steps=1, refit=False, progress=False)
    step = result.history[0]
    return step["objective"], step["grad/smooth_phi"]


def test_tuner_objective_uses_the_value_at_the_time_of_the_call():
    """The tuner compiles its objective too: after a change, the objective and its hypergradient
    equal those of the objective with the new value written in; unchanged, nothing compiles."""
    global OBJECTIVE_COEF
    OBJECTIVE_COEF = 1.0
    try:
        first = tuned(reads_global_objective)
        OBJECTIVE_COEF = 3.0
        second = tuned(reads_global_objective)
        with compilations() as again:
            third = tuned(reads_global_objective)
    finally:
        OBJECTIVE_COEF = 1.0
    reference = tuned(hard_objective)
    assert second == pytest.approx(reference, rel=1e-6)
    assert second == pytest.approx((3.0 * first[0], 3.0 * first[1]), rel=1e-4)
    assert third == second and again[0] == 0


# ---------------------------------------------------------------------------- a device score
SCORE_COEF = 1.0


def mass_device(phi, theta, specific):
    return {"mass": SCORE_COEF * jnp.sum(phi)}


class Mass:
    """A user's score computed inside the compiled loop (``device``): SCORE_COEF times Σ Φ = T."""

    name = "mass"
    device = staticmethod(mass_device)

    def __call__(self, ctx):
        return {"mass": float("nan")}


def test_device_score_uses_the_value_at_the_time_of_the_call():
    global SCORE_COEF

    def masses():
        model = tj.ARTM(n_components=3, max_iter=3, random_state=0, progress=False, scores=[Mass()]).fit(CORPUS)
        return [h["mass"] for h in model.scores_]

    SCORE_COEF = 1.0
    try:
        first = masses()
        SCORE_COEF = 2.0
        second = masses()
    finally:
        SCORE_COEF = 1.0
    assert first == pytest.approx([3.0] * 3) and second == pytest.approx([6.0] * 3)  # Σ_w φ_wt = 1 per topic
