"""Issue 43 item 3: one fitted state per family.

Every way a family fits a model -- ``fit``, one model of ``fit_many``'s batch, and for PLSA/ARTM
``partial_fit``, ``scale.online.fit_online``, ``scale.offline.fit_store`` and
``scale.distributed.fit`` -- sets the same fitted attributes (the public names ending in ``_``)
with the same shapes and dtypes, since one ``_set_fitted`` per family writes them.  The only
differences are the documented ones: an online fit keeps no Θ of its documents (``theta_`` and
``doc_alive_`` None) and keeps the state it continues from (``online_state_``, None after a batch
fit); PTM's restarts keep no device state (``last_state_`` None).
"""

import tempfile
import warnings

import numpy as np
import pytest

from topicjax.scale import distributed, offline, online
from topicjax.scale import store as store_mod

import fitted_models as fm


@pytest.fixture(scope="module")
def corpus():
    return fm.corpus()


def signature(model) -> dict:
    """``{name: description}`` of the fitted attributes: arrays by dtype and shape, None as None,
    anything else by its type (a list's length depends on the fit: removed topics, records)."""
    out = {}
    for name, value in vars(model).items():
        if name.startswith("_") or not name.endswith("_"):
            continue
        if value is None:
            out[name] = None
        elif hasattr(value, "shape") and hasattr(value, "dtype"):
            out[name] = ("array", np.dtype(value.dtype).str, tuple(np.shape(value)))
        else:
            out[name] = type(value).__name__
    return out


def assert_same(reference: dict, other: dict, allowed: dict, where: str):
    """Same names; the same description except where ``allowed`` gives the other's (documented)."""
    assert set(other) == set(reference), (f"{where}: names only in fit {sorted(set(reference) - set(other))}, "
                                          f"only here {sorted(set(other) - set(reference))}")
    for name, want in reference.items():
        got = other[name]
        if name in allowed:
            assert allowed[name](got), (where, name, got)
        else:
            assert got == want, (where, name, want, got)


ONLINE = {"theta_": lambda d: d is None, "doc_alive_": lambda d: d is None,
          "online_state_": lambda d: d == "OnlineState"}


@pytest.mark.parametrize("name", ["PLSA", "ARTM"])
def test_artm_fitted_attributes_are_one_set_whatever_the_fit(corpus, name):
    """The shared models' settings (tests/fitted_models.py: ARTM with its regularizers) in every fit path."""
    settings = {**fm.DEFAULT, **fm.SETTINGS.get(name, dict)()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # empty topics of a short fit are not the point here
        fit = signature(fm.fitted(name))
        assert fit["online_state_"] is None and fit["theta_"] == ("array", "<f4", (fm.T, corpus.n_docs))
        many = fm.make(name).fit_many(corpus, seeds=[3, 4])
        assert_same(fit, signature(many[1]), {}, "fit_many")
        assert many[1].seed_ == 4
        assert_same(fit, signature(fm.make(name).partial_fit(corpus)), ONLINE, "partial_fit")
        folder = tempfile.mkdtemp()
        st = store_mod.write_store([corpus], folder, batch_size=20)
        fitted_online = online.fit_online(st, fm.T, progress=False)
        assert_same(fit, signature(fitted_online), ONLINE, "fit_online")
        assert fitted_online.seed_ == 0 and fitted_online.n_batch_iter_ == st.n_batches
        assert_same(fit, signature(offline.fit_store(st, fm.T, max_iter=2, progress=False)), {}, "fit_store")
        assert_same(fit, signature(distributed.fit(corpus, n_components=fm.T, **settings)), {}, "distributed.fit")


@pytest.mark.parametrize("name", ["TTMM", "PTM", "LIDA"])
def test_fit_many_models_have_the_attributes_of_a_fit(corpus, name):
    fit = signature(fm.fitted(name))
    many = fm.make(name).fit_many(corpus, seeds=[5, 6])
    allowed = {"last_state_": lambda d: d is None} if name == "PTM" else {}
    assert_same(fit, signature(many[0]), allowed, f"{name}.fit_many")
    assert [m.seed_ for m in many] == [5, 6]
