"""Shapes rounded up to buckets (issue 42 item 3): corpora of similar size share compiled programs,
and the padding changes no result.

* :func:`topicjax.core.layout.bucket_size` against its definition written out (8 sizes per octave,
  a floor ``step``), and ``TOPICJAX_BUCKETS``;
* a bucketed layout's E-step against the log-likelihood and gradients of ARTM eq. 4, 7-8 computed
  densely with numpy (the compiled CPU kernel, and the pure-JAX kernel on the word mirror);
* fits with buckets (the default) against the same fits with ``TOPICJAX_BUCKETS=off`` (exact
  shapes): PLSA (documents and words padded), ARTM with a Φ regularizer (documents padded) and with a Θ
  regularizer (documents not padded: its R sees Θ of the real documents only), ``fit_many``;
  the padded columns and rows never appear (``theta_``, ``phi_``, ``components_``, ``doc_alive_``,
  ``transform``, ``score``, history);
* five folds of a cross-validation lower their programs once (counted with ``jax.monitoring``).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import topicjax as tj
from topicjax import regularizers as R
from topicjax.artm import setup
from topicjax.core import estep, kernels, layout
from shapes import bucketed_and_exact, lowered_programs, programs_per_run

#: the corpus of these tests: 70 documents of 1 to 3 pieces each (below the floors: 128 columns of
#: Θ, 128 rows of Φ, 256 pieces)
N_DOCS, N_WORDS = 70, 40


def _corpus(n_docs=N_DOCS, seed=0, n_words=N_WORDS):
    """Documents of varied lengths over ``n_words`` words (every word used), counts 0-4."""
    rng = np.random.default_rng(seed)
    rate = rng.uniform(0.1, 1.6, size=(n_docs, 1)) * rng.uniform(0.2, 1.4, size=(1, n_words))
    X = rng.poisson(rate)
    X[np.arange(n_docs), rng.integers(0, n_words, n_docs)] += 1  # no empty document
    X[0] += 1  # every word occurs
    return tj.Corpus.from_dense(X)


@pytest.fixture(scope="module")
def corpus():
    return _corpus()


def _geometric(n):
    """The definition of the buckets written out: the first m * 2**e >= n with 8 <= m < 16
    (n < 16: n itself)."""
    if n <= 16:
        return n
    e = 0
    while 16 * 2 ** e < n:
        e += 1
    return next(m * 2 ** e for m in range(8, 17) if m * 2 ** e >= n)


def test_bucket_size_is_eight_sizes_per_octave_with_a_floor():
    for n in list(range(0, 300)) + [1000, 3430, 25_123, 2 ** 20 + 1]:
        assert layout.bucket_size(n) == _geometric(n), n
        b = layout.bucket_size(n)
        assert n <= b <= max(n, 9 * n / 8)
        for step in (16, 64):
            got = layout.bucket_size(n, step)
            assert got == max(_geometric(n), -(-n // step) * step) and got % step == 0 and got >= n
    # neighbouring sizes share a bucket: the folds of a cross-validation
    assert layout.bucket_size(161, 16) == layout.bucket_size(163, 16) == 176
    with pytest.raises(ValueError, match="n must be >= 0"):
        layout.bucket_size(-1)
    with pytest.raises(ValueError, match="step >= 1"):
        layout.bucket_size(5, 0)


def test_bucket_size_at_and_around_the_floor():
    """Every size up to the floor is the floor; above it the buckets of the step (the rule above)."""
    for floor, step in ((256, 64), (128, 16), (32, 16), (64, 1)):
        for n in range(0, 2 * floor + 40):
            want = floor if n <= floor else max(_geometric(n), -(-n // step) * step)
            assert layout.bucket_size(n, step, floor) == want, (n, step, floor)
        assert layout.bucket_size(floor + 1, step, floor) > floor  # the first size above: the next bucket
    # the package's floors: tiny corpora pad to them, KOS (3,430 documents, 6,906 words) is far above
    assert layout.bucket_size(1, layout.PIECE_STEP, layout.PIECE_FLOOR) == layout.PIECE_FLOOR == 256
    assert layout.bucket_size(1, layout.DOC_STEP, layout.DOC_FLOOR) == layout.DOC_FLOOR == 128
    assert layout.bucket_size(70, layout.DOC_STEP, layout.WORD_FLOOR) == layout.WORD_FLOOR == 128
    assert layout.bucket_size(3430, layout.DOC_STEP, layout.DOC_FLOOR) == layout.bucket_size(3430, layout.DOC_STEP)
    with pytest.raises(ValueError, match="floor must be a bucket"):
        layout.bucket_size(5, 64, 100)  # not a multiple of the step: the buckets would not be monotone
    with pytest.raises(ValueError, match="floor >= 0"):
        layout.bucket_size(5, 1, -1)


def test_the_switch(monkeypatch):
    monkeypatch.delenv("TOPICJAX_BUCKETS", raising=False)
    assert layout.buckets_on()
    for value, on in (("off", False), ("OFF", False), ("0", False), ("on", True), ("1", True), (" ", True)):
        monkeypatch.setenv("TOPICJAX_BUCKETS", value)
        assert layout.buckets_on() is on
    monkeypatch.setenv("TOPICJAX_BUCKETS", "maybe")
    with pytest.raises(ValueError, match="TOPICJAX_BUCKETS must be one of 'on', 'off', '1', '0', got 'maybe'"):
        layout.buckets_on()
    with pytest.raises(ValueError, match="TOPICJAX_BUCKETS"):
        tj.PLSA(3, max_iter=2, progress=False).fit(_corpus(20))


def _dense_counts(phi, theta, X):
    """ARTM eq. 4, 7-8 densely: L = Σ n_dw log p_dw, ∂L/∂φ_wt = Σ_d n_dw θ_td / p_dw,
    ∂L/∂θ_td = Σ_w n_dw φ_wt / p_dw (float64)."""
    p = (phi @ theta).T  # D x W
    r = np.where(X > 0, X / np.where(X > 0, p, 1), 0.0)
    return float(np.sum(X[X > 0] * np.log(p[X > 0]))), (theta @ r).T, phi.T @ r.T


def test_a_bucketed_layout_is_the_corpus_with_zero_pieces(corpus):
    # chunks of 4 pieces: the exact layout has ceil(P / 4) chunks, the bucketed one those of a bucket
    n_pieces = int(np.sum(-(-np.diff(corpus.doc_offsets) // layout.PIECE)))
    exact = layout.prepare(corpus, chunk=4 * layout.PIECE, with_doc=False)
    assert exact.piece_doc.shape == (-(-n_pieces // 4), 4)
    padded = layout.prepare(corpus, chunk=4 * layout.PIECE, with_doc=False, buckets=True, word_mirror=True)
    assert n_pieces < 256 and padded.piece_doc.shape == (256 // 4, 4)  # the floor, layout.PIECE_FLOOR
    assert padded.piece_doc.size > exact.piece_doc.size
    assert float(padded.count.sum()) == corpus.n_tokens
    pd = np.asarray(padded.piece_doc).reshape(-1)
    assert np.all(np.diff(pd) >= 0) and pd.max() == corpus.n_docs - 1  # sorted, no document beyond the corpus
    assert padded.mirror.slot.shape[0] == layout.bucket_size(padded.mirror.slot.shape[0])
    # the E-step over more columns than documents (a bucketed fit's Θ), against numpy
    rng = np.random.default_rng(1)
    T, width = 5, 128  # the floor of Θ's columns, layout.DOC_FLOOR
    phi = rng.uniform(0.1, 1, (N_WORDS, T))
    phi /= phi.sum(0)
    theta = rng.uniform(0.1, 1, (T, width))
    theta /= theta.sum(0)
    X = corpus.to_dense().astype(np.float64)
    ll, g_phi, g_theta = _dense_counts(phi, theta[:, :corpus.n_docs], X)
    f32 = (jnp.asarray(phi, jnp.float32), jnp.asarray(theta, jnp.float32))
    for got in (estep.expected_counts(*f32, padded),  # the compiled CPU kernel where built
                estep.sliced_counts(*f32, padded, True, True)):  # pure JAX, ∂L/∂Φ over the padded mirror
        np.testing.assert_allclose(float(got[0]), ll, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(got[1]), g_phi, rtol=2e-4, atol=1e-4)
        np.testing.assert_allclose(np.asarray(got[2])[:, :corpus.n_docs], g_theta, rtol=2e-4, atol=1e-4)
        assert not np.asarray(got[2])[:, corpus.n_docs:].any()  # no token in a padded column
    assert kernels.get_backend() in ("auto", "xla", "ffi")


def _fit_both(monkeypatch, make, X, fit=lambda m, X: m.fit(X)):
    """The same fit with buckets and with exact shapes (``TOPICJAX_BUCKETS=off``)."""
    return bucketed_and_exact(monkeypatch, lambda: fit(make(), X))


def _assert_same_model(a, b, test):
    np.testing.assert_allclose(a.phi_, b.phi_, rtol=2e-5, atol=1e-7)
    assert a.theta_.shape == b.theta_.shape == (a.n_components, N_DOCS)
    np.testing.assert_allclose(a.theta_, b.theta_, rtol=2e-5, atol=1e-7)
    assert a.doc_alive_.shape == (N_DOCS,) and a.removed_docs_ == b.removed_docs_
    assert a.n_iter_ == b.n_iter_ and [h.keys() for h in a.history_] == [h.keys() for h in b.history_]
    for ha, hb in zip(a.history_, b.history_):
        for k, v in ha.items():
            if k != "seconds":
                assert v == pytest.approx(hb[k], rel=1e-5, abs=1e-9) if isinstance(v, float) else v == hb[k], k
    assert all(h["overregularized_docs"] == 0 for h in a.history_)  # the padded columns are never counted
    out = a.transform(test)
    assert out.shape == (test.n_docs, a.n_components) == b.transform(test).shape
    np.testing.assert_allclose(out, b.transform(test), rtol=2e-5, atol=1e-7)
    assert a.components_.shape == (a.n_components, N_WORDS)
    assert a.score(test) == pytest.approx(b.score(test), rel=1e-6)


@pytest.mark.parametrize("kind", ["plsa", "artm_phi", "artm_theta"])
def test_a_bucketed_fit_is_the_exact_shape_fit(monkeypatch, corpus, kind):
    """Documents padded (PLSA; ARTM whose regularizer reads Φ only) or not (ARTM with a Θ
    regularizer: R(phi, theta) must see Θ of the real documents), chunks padded in all three."""
    # chunks of 64 slots: several chunks, rounded up to a bucket
    make = {"plsa": lambda: tj.PLSA(5, max_iter=10, random_state=0, chunk=64, progress=False),
            "artm_phi": lambda: tj.ARTM(5, regularizers=[(R.decorrelate(), 5.0), (R.smooth_phi(), 0.1)], scores=(),
                                        max_iter=10, random_state=0, progress=False),
            "artm_theta": lambda: tj.ARTM(5, regularizers=[(R.decorrelate(), 5.0), (R.sparse_theta(), 0.05)],
                                          max_iter=10, random_state=0, chunk=64, progress=False)}[kind]
    model = make()
    st, device = model._structure(corpus, None, 5), model._trackers()[0]
    reg = model.regularizer().bind(setup.context(st, 5, "fit"))  # as the fit binds it
    assert setup.theta_width(N_DOCS, reg, device, (N_WORDS, 5)) == (N_DOCS if kind == "artm_theta" else 128)
    # Φ's rows padded (to the floor) only where nothing reads Φ (no regularizer, no device score)
    assert setup.phi_rows(st, reg, device) == (128 if kind == "plsa" else N_WORDS)
    bucketed, exact = _fit_both(monkeypatch, make, corpus)
    _assert_same_model(bucketed, exact, _corpus(23, seed=5))


def test_a_large_corpus_keeps_its_exact_layout(monkeypatch, corpus):
    """Above :data:`topicjax.core.layout.BUCKET_MAX_NONZEROS` non-zeros (lowered here to below this
    corpus's) the pieces, chunks, Θ's columns and Φ's rows keep their exact sizes even with buckets
    on, and the fit is the exact-shape fit."""
    monkeypatch.setattr(layout, "BUCKET_MAX_NONZEROS", corpus.nnz - 1)
    exact = layout.prepare(corpus, chunk=4 * layout.PIECE, with_doc=False, word_mirror=True)
    kept = layout.prepare(corpus, chunk=4 * layout.PIECE, with_doc=False, buckets=True, word_mirror=True)
    assert kept.piece_doc.shape == exact.piece_doc.shape and kept.count.shape == exact.count.shape
    assert kept.mirror.slot.shape == exact.mirror.slot.shape  # the mirror's chunks unpadded too
    np.testing.assert_array_equal(np.asarray(kept.count), np.asarray(exact.count))
    make = lambda: tj.PLSA(5, max_iter=10, random_state=0, chunk=64, progress=False)  # noqa: E731
    model = make()
    st = model._structure(corpus, None, 5)
    reg = model.regularizer().bind(setup.context(st, 5, "fit"))
    assert setup.theta_width(N_DOCS, reg, (), (N_WORDS, 5), corpus.nnz) == N_DOCS
    assert setup.theta_width(N_DOCS, reg, (), (N_WORDS, 5), corpus.nnz - 1) == 128  # below the limit: the floor
    assert setup.phi_rows(st, reg) == N_WORDS
    bucketed, exact_fit = _fit_both(monkeypatch, make, corpus)
    _assert_same_model(bucketed, exact_fit, _corpus(23, seed=5))


def test_a_theta_regularizer_sees_the_documents_only(monkeypatch, corpus):
    """A plain R(phi, theta) gets Θ with exactly the corpus's columns, with buckets on."""
    widths = []

    def entropy(phi, theta):
        widths.append(theta.shape[1])
        return -jnp.sum(theta * jnp.log(theta)) * 1e-3

    monkeypatch.delenv("TOPICJAX_BUCKETS", raising=False)
    tj.ARTM(4, regularizers=[entropy], max_iter=2, scores=(), random_state=0, progress=False).fit(corpus)
    assert widths and set(widths) == {N_DOCS}
    # which terms read Θ is found by tracing them: a plain R of Φ alone leaves Θ in buckets
    shape = (N_WORDS, 4)
    assert setup.theta_width(N_DOCS, R.as_regularizer([entropy]), (), shape) == N_DOCS
    assert setup.theta_width(N_DOCS, R.as_regularizer([lambda phi, theta: -jnp.sum(phi ** 2)]), (), shape) == 128
    assert setup.theta_width(N_DOCS, R.as_regularizer([lambda phi, theta: jnp.sum(theta[0])]), (), shape) == N_DOCS
    assert setup.theta_width(N_DOCS, R.as_regularizer([]), ("a device score",), shape) == N_DOCS


def test_fit_many_with_buckets_is_the_exact_shape_batch(monkeypatch, corpus):
    def many(m, X):
        return m.fit_many(X, seeds=[0, 1], n_topics=[4, 5])

    (a0, a1), (b0, b1) = _fit_both(monkeypatch, lambda: tj.PLSA(5, max_iter=6, progress=False), corpus, many)
    for a, b in ((a0, b0), (a1, b1)):
        np.testing.assert_allclose(a.phi_, b.phi_, rtol=2e-5, atol=1e-7)
        assert a.theta_.shape == b.theta_.shape == (b.n_components, N_DOCS)
        np.testing.assert_allclose(a.theta_, b.theta_, rtol=2e-5, atol=1e-7)
        np.testing.assert_allclose([h["objective"] for h in a.history_], [h["objective"] for h in b.history_],
                                   rtol=1e-6)


def _pieces(corpus):
    return int(np.sum(-(-np.diff(corpus.doc_offsets) // layout.PIECE)))


def test_folds_of_a_cross_validation_share_their_programs(monkeypatch):
    """Five folds of 203 documents (162 or 163 to fit, 41 or 40 to transform, other numbers of
    tokens and pieces in each) lower the programs of a fit and a transform once: the folds after
    the first lower none.  With exact shapes a fold of another corpus size lowers its own."""
    from sklearn.model_selection import KFold

    full = _corpus(203, seed=0)
    folds = [(full.subset(a), full.subset(b))
             for a, b in KFold(5, shuffle=True, random_state=0).split(np.arange(full.n_docs))]
    # exact shapes differ between folds (documents and pieces), their buckets do not
    assert len({(tr.n_docs, _pieces(tr), te.n_docs, _pieces(te)) for tr, te in folds}) == 5
    assert {tr.n_docs for tr, _ in folds} == {162, 163} and {te.n_docs for _, te in folds} == {40, 41}

    def fold(train, test):
        model = tj.PLSA(4, max_iter=3, random_state=0, progress=False).fit(train)
        assert model.transform(test).shape == (test.n_docs, 4) and model.theta_.shape == (4, train.n_docs)

    counts, exact = programs_per_run(monkeypatch, [lambda f=f: fold(*f) for f in folds],
                                     lambda: tj.PLSA(4, max_iter=3, random_state=0, progress=False).fit(folds[0][0]))
    assert counts[1:] == [0, 0, 0, 0], counts
    assert exact


@pytest.mark.parametrize("kind", ["plsa", "artm"])
def test_sizes_below_the_floors_share_one_program(monkeypatch, kind):
    """A corpus of 20 documents and one of 100 (other words for PLSA: 40 and 30; ARTM, whose Φ
    regularizer keeps Φ's rows exact, 40 both): without the floors their buckets differ (32 and 112
    columns of Θ, 64 and 192 pieces, 48 and 32 rows of Φ); with them both pad to 128 columns, 256
    pieces (and 128 rows): the second fit and its ``transform`` lower no program."""
    small = _corpus(20, seed=7)
    large = _corpus(100, seed=7, n_words=30 if kind == "plsa" else N_WORDS)
    assert (layout.bucket_size(20, layout.DOC_STEP), layout.bucket_size(_pieces(small), layout.PIECE_STEP)) == (32, 64)
    assert (layout.bucket_size(100, layout.DOC_STEP), layout.bucket_size(_pieces(large), layout.PIECE_STEP)) == (112, 192)
    make = {"plsa": lambda: tj.PLSA(4, max_iter=3, random_state=0, progress=False),
            "artm": lambda: tj.ARTM(4, regularizers=[(R.decorrelate(), 1.0)], scores=(), max_iter=3,
                                    random_state=0, progress=False)}[kind]
    monkeypatch.delenv("TOPICJAX_BUCKETS", raising=False)
    make().fit(small).transform(small)  # the floors' programs, built once
    with lowered_programs() as lowered:
        model = make().fit(large)
        assert model.transform(large.subset(range(20))).shape == (20, 4) and model.theta_.shape == (4, 100)
        assert model.phi_.shape == (large.n_words, 4)
        assert lowered == [], len(lowered)


def test_a_checkpoint_of_other_shapes_is_refused_by_name(monkeypatch, tmp_path):
    """A fit stopped after its first checkpoint with exact shapes (``TOPICJAX_BUCKETS=off``) and
    resumed with buckets on meets padded shapes: refused with the setting named, nothing loaded;
    resumed with the same setting it finishes as the uninterrupted fit."""
    from topicjax.core import checkpoint as ck

    corpus = _corpus(70)
    write = ck.RunCheckpoint._write

    class Stop(Exception):
        pass

    def write_then_stop(self, *args, **kwargs):
        write(self, *args, **kwargs)
        raise Stop

    folder = tmp_path / "ck"
    monkeypatch.setenv("TOPICJAX_BUCKETS", "off")
    monkeypatch.setattr(ck.RunCheckpoint, "_write", write_then_stop)
    with pytest.raises(Stop):
        tj.PLSA(4, max_iter=6, progress=False, random_state=0).fit(corpus, checkpoint=folder, checkpoint_every=2)
    monkeypatch.setattr(ck.RunCheckpoint, "_write", write)
    monkeypatch.setenv("TOPICJAX_BUCKETS", "on")
    with pytest.raises(ValueError, match=r"the checkpoint is not of this fit \(or was written with another "
                                         r"TOPICJAX_BUCKETS setting"):
        tj.PLSA(4, max_iter=6, progress=False, random_state=0).fit(corpus, checkpoint=folder, checkpoint_every=2)
    monkeypatch.setenv("TOPICJAX_BUCKETS", "off")
    resumed = tj.PLSA(4, max_iter=6, progress=False, random_state=0).fit(corpus, checkpoint=folder,
                                                                         checkpoint_every=2)
    whole = tj.PLSA(4, max_iter=6, progress=False, random_state=0).fit(corpus)
    np.testing.assert_array_equal(resumed.phi_, whole.phi_)
