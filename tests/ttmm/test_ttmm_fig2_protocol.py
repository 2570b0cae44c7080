"""The protocol pieces of ``experiments/ttmm_classification.py`` (Keller & Bengio's Fig. 2 after
Blei et al.'s LDA experiment), each against a hand computation or a brute-force reference: the
SVM is SVMLight's (hinge loss, free bias, C = 1 / mean x.x), the splits are stratified and keep
every class in training, the paired verdict is the printed rule.  No TTMM is fitted here (the
``--quick`` smoke run is in ``test_ttmm.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp


@pytest.fixture(scope="module")
def exp(load_experiment):
    return load_experiment("ttmm_classification")


def test_svmlight_default_c_is_the_inverse_mean_squared_norm(exp):
    X = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 0.0]])  # x.x = 25, 1, 0: mean 26/3
    assert exp.svmlight_default_c(X) == pytest.approx(3.0 / 26.0, rel=1e-12)
    assert exp.svmlight_default_c(sp.csr_matrix(X)) == pytest.approx(3.0 / 26.0, rel=1e-12)
    with pytest.raises(ValueError, match="zero feature vector"):
        exp.svmlight_default_c(np.zeros((2, 3)))


def _hinge_primal(w, b, x, s, C):
    """1/2 w^2 + C sum_i max(0, 1 - s_i (w x_i + b)), the sum over the last axis."""
    hinge = np.sum(np.maximum(0.0, 1.0 - s * (w * x + b)), axis=-1, keepdims=True)
    return (0.5 * w**2 + C * hinge)[..., 0]


def test_svm_minimises_the_hinge_primal_with_an_unregularised_bias(exp):
    # 1-d, not separable, far from the origin: a regularised bias (LinearSVC) or a squared hinge
    # would land elsewhere.  Reference: for each w on a fine grid the optimal free b lies at a
    # breakpoint b = s_i - w x_i of the piecewise-linear hinge sum, so the grid minimum is exact up
    # to the w spacing.
    x = 10.0 + np.array([0.0, 0.4, 0.8, 1.1, 1.3, 1.6, 2.0, 2.4])
    y = np.array([0, 0, 0, 1, 0, 1, 1, 1])
    s = 2.0 * y - 1.0
    C = 1.0
    ws = np.linspace(-5.0, 5.0, 4001)[:, None, None]
    bs = s[None, :, None] - ws * x[None, :, None]  # (w, breakpoint, 1)
    obj = _hinge_primal(ws, bs, x[None, None, :], s[None, None, :], C)  # (w, breakpoint, 1) -> (w, breakpoint)
    i, j = np.unravel_index(np.argmin(obj), obj.shape)
    w_ref, b_ref, p_ref = ws[i, 0, 0], bs[i, j, 0], obj[i, j]

    w, b = exp.fit_linear_svm(x[:, None], y, C)
    assert w.shape == (1,)
    p_ours = float(_hinge_primal(np.array([w[0]]), b, x, s, C)[()])
    assert p_ours == pytest.approx(p_ref, rel=2e-3)
    assert w[0] == pytest.approx(w_ref, abs=0.02)
    assert b == pytest.approx(b_ref, abs=0.02 * 12)
    # the same problem on a sparse matrix gives the same solution
    w_sp, b_sp = exp.fit_linear_svm(sp.csr_matrix(x[:, None]), y, C)
    np.testing.assert_allclose(w_sp, w, rtol=1e-10)
    assert b_sp == pytest.approx(b, rel=1e-10)
    with pytest.raises(ValueError, match="both classes"):
        exp.fit_linear_svm(x[:, None], np.zeros(8, int), C)


def test_paired_splits_are_stratified_and_train_on_every_class(exp):
    y = np.zeros(400, int)
    y[::20] = 1  # 20 positives: 5 %, about GRAIN's share of Reuters-21578
    splits = exp.paired_splits(y, [0.01, 0.25], repeats=3, seed=7)
    for p, (n_pos, n_neg) in {0.01: (1, 4), 0.25: (5, 95)}.items():  # max(1, round(p N_c)) per class
        seen = set()
        for tr, te in splits[p]:
            assert (int(y[tr].sum()), int((y[tr] == 0).sum())) == (n_pos, n_neg)
            assert np.intersect1d(tr, te).size == 0 and np.union1d(tr, te).size == y.size
            seen.add(tuple(tr))
        assert len(seen) == 3  # the repeats are different splits
    again = exp.paired_splits(y, [0.01, 0.25], repeats=3, seed=7)  # paired: the seed fixes them
    for p in splits:
        for (a, _), (b, _) in zip(splits[p], again[p]):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="single document"):
        exp.paired_splits(np.array([0, 0, 0, 1]), [0.5], repeats=2, seed=0)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        exp.paired_splits(y, [1.0], repeats=2, seed=0)
    with pytest.raises(ValueError, match="repeats"):
        exp.paired_splits(y, [0.1], repeats=1, seed=0)


def test_paired_verdict_by_hand(exp):
    # differences 0.10, 0.00, 0.05: mean 0.05, sd 0.05, SE 0.05 / sqrt(3) = 0.0289 -> 2 SE > mean
    v = exp.paired_verdict([0.90, 0.80, 0.85], [0.80, 0.80, 0.80])
    assert v["mean"] == pytest.approx(0.05) and v["se"] == pytest.approx(0.05 / np.sqrt(3))
    assert (v["wins"], v["ties"], v["losses"], v["verdict"]) == (2, 1, 0, "tie")
    # differences 0.10, 0.10, 0.12: mean 0.10667, SE 0.011547 / sqrt(3) = 0.0066667
    v = exp.paired_verdict([0.90, 0.90, 0.92], [0.80, 0.80, 0.80])
    assert v["se"] == pytest.approx(np.sqrt(4e-4 / 3) / np.sqrt(3)) and v["verdict"] == "ahead"
    assert exp.paired_verdict([0.80, 0.80, 0.80], [0.90, 0.90, 0.92])["verdict"] == "behind"
    assert exp.paired_verdict([0.9, 0.9], [0.85, 0.85])["verdict"] == "ahead"  # the same gap twice: SE 0


def test_row_normalisation(exp):
    got = exp.normalise_rows(sp.csr_matrix([[3.0, 4.0], [0.0, 0.0]]), "l2")
    np.testing.assert_allclose(got.toarray(), [[0.6, 0.8], [0.0, 0.0]])
    np.testing.assert_allclose(exp.normalise_rows(np.array([[1.0, 3.0]]), "l1"), [[0.25, 0.75]])
    X = np.array([[2.0, 0.0]])
    assert exp.normalise_rows(X, "none") is X
    with pytest.raises(ValueError, match="norm"):
        exp.normalise_rows(X, "max")


def test_fig2_defaults_and_bad_options(exp):
    args = exp.parse_args([])
    assert (args.themes, args.topics, args.svm_c) == ([500, 1000], 50, "svmlight")
    assert args.proportions == [0.01, 0.05, 0.1, 0.15, 0.2, 0.25]
    assert exp.parse_args(["--svm-c", "0.5"]).svm_c == 0.5
    for bad in (["--svm-c", "0"], ["--svm-c", "big"], ["--repeats", "1"], ["--proportions", "0"]):
        with pytest.raises(SystemExit):
            exp.parse_args(bad)
