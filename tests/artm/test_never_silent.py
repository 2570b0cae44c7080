"""Never fail silently (issue 11): a fit that would remove every topic or document, or leave a
non-finite value, stops with an error naming the regularizer, its coefficient and the iteration
(the last good state kept); rate-controlled sparsing keeps a non-zero in every column; bad
regularizers, schedules and grids fail before any long computation; the compile cache is bounded."""

import jax.numpy as jnp
import numpy as np
import pytest

import topicjax as tj
from topicjax import regularizers as R
from topicjax.artm import paper_trajectory
from topicjax.core.errors import NumericalError


@pytest.fixture(scope="module")
def bars():
    return tj.datasets.make_bars(n_docs=200, seed=0)[0]


KW = dict(progress=False, scores=(), random_state=0)


def test_sparsing_everything_is_a_clear_error(bars):
    """The issue's example: removed every topic and document and reported perplexity 1.0."""
    with pytest.raises(NumericalError, match=r"iteration 1 produced a collapse.*regularizer 'sparse_theta' with "
                                             r"coefficient 20 removes every topic or every document") as e:
        tj.ARTM(10, regularizers=[(R.sparse_theta(), 20)], max_iter=10, **KW).fit(bars)
    st = e.value.state  # the last good state: the initial model
    assert e.value.iteration == 1 and e.value.reason == "collapse"
    assert np.allclose(np.asarray(st.phi).sum(0), 1) and np.all(np.asarray(st.theta).sum(0) > 0.99)


def test_partial_fit_collapse_is_a_clear_error_and_keeps_the_model(bars):
    """A fitted model updated by ``partial_fit`` on a tiny batch: with the default learning_offset
    the batch's counts enter with weight 1024^-0.7 = 0.008 against decorrelation 1e3, which removes
    every topic -- an error naming the coefficient and rho, the fitted model left as it was; with
    learning_offset 1 (weight 1) the same update keeps its topics."""
    small = bars.subset(range(5))
    model = tj.ARTM(4, regularizers=[(R.decorrelate(), 1e3)], max_iter=3, **KW).fit(bars)
    before = model.phi_.copy()
    with pytest.raises(NumericalError, match=r"removed every topic \(regularizers and coefficients: "
                                             r"\{'decorrelate': 1000\.0\}; .*rho = 0\.0078"):
        model.partial_fit(small)
    np.testing.assert_array_equal(model.phi_, before)
    model.set_params(learning_offset=1.0).partial_fit(small)
    assert np.all(model.phi_.sum(0) > 0.99)


def _nan_from_iteration(k):
    """A custom regularizer whose value turns NaN at iteration ``k`` (it counts its own passes)."""

    def fn(phi, theta, p):
        bad = jnp.where(p["it"] >= k - 1, jnp.nan, 0.0)
        return jnp.sum(jnp.log(phi)) * (1.0 + bad)

    def update(phi, theta, p, tau):
        return {"it": p["it"] + 1}

    return R.custom(fn, {"it": jnp.zeros(())}, name="breaks_at_5", update=update)


def test_nan_at_iteration_5_names_the_regularizer(bars):
    """The issue's second example: a regularizer that turns NaN at iteration 5 removed 9 of 10
    topics with no error."""
    with pytest.raises(NumericalError, match=r"iteration 5 produced non-finite values; regularizer 'breaks_at_5' "
                                             r"\(coefficient 0\.01\) produced non-finite values") as e:
        tj.ARTM(10, regularizers=[(_nan_from_iteration(5), 0.01)], max_iter=10, **KW).fit(bars)
    assert e.value.iteration == 5 and int(e.value.state.iteration) == 4
    assert np.all(np.isfinite(np.asarray(e.value.state.phi)))


def test_rate_controlled_sparsing_never_empties_a_document(bars):
    """sparse_theta(rate=0.08) under the paper's trajectory kept zeroing until documents vanished
    (its carried remainder had no floor): now every document keeps a topic, however long."""
    m = tj.ARTM(12, background_topics=0, max_iter=80,
                regularizers=paper_trajectory(sparse_start=2, smooth=False, phi_rate=0.1, theta_rate=0.08),
                **KW).fit(bars)
    assert m.removed_docs_ == [] and np.all((m.theta_ > 0).sum(0) >= 1)
    assert np.all((m.phi_ > 0).sum(0) >= 1) and m.removed_topics_ == []
    # ... while sparsing did its work: most documents are down to a topic or two
    assert np.median((m.theta_ > 0).sum(0)) <= 2


def test_notes_1_2_removal_is_reported_and_kept_available(bars):
    m = tj.ARTM(6, regularizers=[(R.sparse_phi(topics=[2]), 1e5)], max_iter=3, **KW).fit(bars)
    assert m.history_[0]["overregularized_topics"] == ["topic_2"] and m.removed_topics_ == ["topic_2"]
    k = tj.ARTM(6, regularizers=[(R.sparse_phi(topics=[2]), 1e5)], max_iter=3, overregularized="keep",
                **KW).fit(bars)
    assert k.removed_topics_ == [] and k.history_[-1]["overregularized_topics"] == ["topic_2"]


def test_bad_regularizers_fail_before_any_computation(bars):
    with pytest.raises(ValueError, match="must take exactly two arguments"):
        tj.ARTM(4, regularizers=[lambda phi: phi.sum()], **KW).fit(bars)
    with pytest.raises(ValueError, match="returned an array of shape"):
        tj.ARTM(4, regularizers=[lambda phi, theta: phi.sum(0)], **KW).fit(bars)
    with pytest.raises(ValueError, match=r"'decorrelate': coefficient nan at iteration 3 is not finite"):
        tj.ARTM(4, regularizers=[(R.decorrelate(), lambda it: float("nan") if it == 3 else 1.0)], max_iter=5,
                **KW).fit(bars)
    with pytest.raises(ValueError, match=r"'sparse_theta': coefficient -1.0 is negative"):
        tj.ARTM(4, regularizers=[(R.sparse_theta(), R.Step(2, -1.0, -1.0))], **KW).fit(bars)
    with pytest.raises(ValueError, match="seed_words: topic 'x'|unknown topic 'x'"):
        tj.ARTM(4, regularizers=[R.seed_words({"x": ["w1"]})], **KW).fit(bars)
    with pytest.raises(ValueError, match=r"links|document 999 does not exist"):
        tj.ARTM(4, regularizers=[R.document_links([(0, 999)])], **KW).fit(bars)
    with pytest.raises(ValueError, match=r"taus must have shape \(n_models, 1\)"):
        tj.ARTM(4, regularizers=[R.decorrelate()], **KW).fit_many(bars, taus=np.ones((3, 2)))
    with pytest.raises(ValueError, match="one length"):
        tj.ARTM(4, **KW).fit_many(bars, seeds=[0, 1, 2], n_topics=[3, 4])
    with pytest.raises(TypeError, match=r"custom\(fn, data\) needs fn\(phi, theta, data\)"):
        R.custom(lambda phi, theta: 0.0, None)


def test_compile_cache_is_bounded_and_coefficients_do_not_recompile(bars):
    """New coefficients reuse the compiled program; new regularizer functions add programs to
    JAX's bounded caches, and the estimator keeps no cache of its own that could grow."""
    from topicjax.core import driver

    before = driver._block._cache_size()
    for tau in (0.1, 0.2, 0.3):
        tj.ARTM(4, regularizers=[(R.decorrelate(), tau)], max_iter=3, **KW).fit(bars)
    assert driver._block._cache_size() - before <= 1
    for i in range(3):  # three distinct functions: three programs
        tj.ARTM(4, regularizers=[lambda phi, theta, i=i: i * jnp.sum(phi * phi)], max_iter=3, **KW).fit(bars)
    assert driver._block._cache_size() - before <= 4
