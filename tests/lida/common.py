"""Shared settings and checks of the LIDA tests."""

from __future__ import annotations

import numpy as np

from topicjax.lida import LIDA

HYPER0 = dict(alpha=0.3, beta=0.2, eta=3.0, delta=1.0, gamma=8.0, xi=1.0)
COMMON = dict(n_components=16, tokens_per_block=64, progress=False, random_state=0)
VARIANT_KW = {"lida": dict(sigma=0.1, zeta=0.25, init_topics=4), "ftm": dict(init_topics=4), "sstm": {}, "lda": {}}


def est(variant, **kw):
    """Estimators of the small-corpus tests share their settings, hence their compiled sweeps."""
    return LIDA(variant=variant, **{**COMMON, **VARIANT_KW[variant], **kw})


def check_invariants(state, tokens, cfg):
    """Counts equal the assignments; masks cover the counts (sec. 4.1-4.2); dead topics keep no words."""
    z, d, w = np.asarray(state.z), np.asarray(tokens.doc), np.asarray(tokens.word)
    K, D, V = cfg.n_topics, cfg.n_docs, cfg.n_rows
    assert z.min() >= 0 and z.max() < K
    n_dk = np.zeros((D, K), np.int64)
    n_wk = np.zeros((V, K), np.int64)
    np.add.at(n_dk, (d, z), 1)
    np.add.at(n_wk, (w, z), 1)
    np.testing.assert_array_equal(np.asarray(state.n_dk), n_dk)
    np.testing.assert_array_equal(np.asarray(state.n_wk), n_wk)
    np.testing.assert_array_equal(np.asarray(state.n_k), np.bincount(z, minlength=K))
    tb, pb = np.asarray(state.theta_bar), np.asarray(state.phi_bar)
    assert np.all(tb[n_dk > 0]), "a topic holding tokens of a document must be active in it (sec. 4.1)"
    assert np.all(pb[n_wk > 0]), "a word holding tokens of a topic must be active in it (sec. 4.2)"
    if not cfg.focused:
        assert tb.all()
    if not cfg.sparse:
        assert pb[: cfg.n_words].all()
    else:
        live = tb.any(0)
        assert not pb[:, ~live].any(), "dead topics keep no words"
