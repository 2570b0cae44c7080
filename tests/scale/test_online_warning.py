"""fit_online warns when its step size ρ = (τ0 + t)^-κ would hardly move (issue 45 item 1): with
BigARTM's τ0 = 1024 on a store of few batches, Φ averages in the counts of its first batches,
taken at the random start, and the fit is far worse than with τ0 = 1."""

import warnings

import pytest

import topicjax as tj
from topicjax.scale import online
from topicjax.scale.online import SlowStartWarning


@pytest.fixture(scope="module")
def bars(tmp_path_factory):
    corpus, phi, _ = tj.datasets.make_bars(n_docs=2000, alpha=0.1, seed=0)
    folder = tmp_path_factory.mktemp("store")
    return online.write_store([corpus], folder, batch_size=200, shuffle=True, seed=0), phi   # 10 batches


def _quiet(store, **kw):
    """A fit that must not warn (the warning an error here, whatever the suite's filters)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowStartWarning)
        return online.fit_online(store, 10, random_state=0, progress=False, **kw)


def test_default_offset_on_ten_batches_warns_and_fits_badly(bars):
    store, phi = bars
    with pytest.warns(SlowStartWarning, match=r"50 updates of Φ, far fewer than learning_offset=1024 .*"
                                              r"learning_offset=1\b") as record:
        slow = online.fit_online(store, 10, passes=5, random_state=0, progress=False)
    assert record[0].filename == __file__                  # points at the caller's line
    good = _quiet(store, passes=5, learning_offset=1.0, learning_decay=0.5)
    slow_d = tj.metrics.topic_recovery(slow.phi_, phi)["distance"]
    good_d = tj.metrics.topic_recovery(good.phi_, phi)["distance"]
    # what the warning is about: the same 50 updates, blurred bars against recovered ones (0.34, 0.05)
    assert good_d < 0.1 and slow_d > 0.3, (good_d, slow_d)


def test_the_rule_counts_updates_passes_and_a_resumed_state(bars):
    store, _ = bars
    # 10 batches x 3 passes, an update every 2 batches: 15 updates; warned below τ0 / 10
    with pytest.warns(SlowStartWarning, match="15 updates"):
        online.fit_online(store, 10, passes=3, update_every=2, learning_offset=151.0, random_state=0,
                          progress=False)
    first = _quiet(store, passes=3, update_every=2, learning_offset=150.0)
    # a resumed fit's counter goes on from the updates before it: 15 + 5 against τ0 = 200
    _quiet(store, update_every=2, learning_offset=200.0, state=first.online_state_)
    with pytest.warns(SlowStartWarning, match="5 updates"):
        online.fit_online(store, 10, update_every=2, learning_offset=201.0, state=first.online_state_,
                          random_state=0, progress=False)
    _quiet(store, learning_offset=1024.0, learning_decay=0.0)    # ρ = 1 whatever τ0: nothing to warn about
