"""The regularizer pool: every autodiff M-step against the paper's closed form.

All pool regularizers are bound to ONE small random model (with classes, so that Ψ exists) and
compiled into ONE ARTM step; each test switches on its regularizer by a one-hot coefficient
vector (a traced argument: no recompilation) and compares the step's Φ, Θ with the M-step written
out by hand from the paper's equation, with E-step counts computed independently in numpy.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax import Corpus
from topicjax import regularizers as R
from topicjax.artm import setup as S
from topicjax.artm import algorithm as em

W, T, D, C = 15, 5, 10, 3
BG = (4,)
SPEC = np.array([0, 1, 2, 3])


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 4, size=(D, W))
    counts[:, 0] += 1  # no empty document
    labels = [[0], [1], [2], [0, 1], [1], [2, 0], [0], [1], [2], [0]]
    corpus = Corpus.from_dense(counts, vocab=[f"w{i}" for i in range(W)], labels=labels, label_names=["a", "b", "c"])
    names, background = S.topic_structure(T, 1, None)
    row_mod, mod_names, weights, classes = S.modality_structure(corpus, None, corpus.label_names, 2.0)
    lab = corpus.labels.astype(float)
    m = lab / lab.sum(1, keepdims=True) * corpus.doc_lengths[:, None]
    class_freq = m.sum(0) / m.sum()
    st = S.Structure(corpus, names, background, row_mod, mod_names, weights, classes, class_freq, corpus.labels)
    ctx = S.context(st, T, "fit")
    src, _ = S.weighted_entries(corpus, weights, row_mod, corpus.labels)
    data = S.device_data(src)
    aux = S.aux_arrays(st, T)

    mu = rng.normal(size=T)
    A = rng.normal(size=(T, T))
    sigma = A @ A.T + T * np.eye(T)
    links = [(0, 1), (2, 5, 2.0), (3, 3, 0.5)]
    pool = {
        "smooth_phi": R.smooth_phi(topics=[0, 1]),
        "smooth_theta": R.smooth_theta(alpha=np.arange(1.0, T + 1)),
        "sparse_phi": R.sparse_phi(beta="background", topics="specific"),
        "sparse_theta": R.sparse_theta(topics="specific"),
        "seed_words": R.seed_words({0: ["w1", "w2"], "topic_2": ["w5"]}),
        "labelled_documents": R.labelled_documents({0: [1], "3": [0, "topic_2"]}),
        "semi_supervised": R.semi_supervised(doc_topics={1: [3]}, words={1: ["w7", "w8", "w9"]}, alpha0=2.0, beta0=3.0),
        "decorrelate": R.decorrelate(topics="specific"),
        "document_links": R.document_links(links),
        "correlated_topics": R.correlated_topics(mu=mu, sigma=sigma, estimate=False),
        "coherence_kl": R.improve_coherence("kl"),
        "coherence_newman": R.improve_coherence("newman"),
        "topic_selection": R.topic_selection(),
        "label_regularization": R.label_regularization(),
        "smooth_phi_bg": R.smooth_phi(beta="uniform", topics="background"),
        "smooth_theta_bg": R.smooth_theta(topics="background"),
        "sparse_phi_u": R.sparse_phi(beta="uniform", topics="specific"),
    }
    order = list(pool)
    reg = R.combine(*[pool[k] for k in order]).bind(ctx).cast(jnp.float32)
    cfg = em.EMConfig(remove=False, n_segments=len(mod_names))
    step_fn = jax.jit(em.step, static_argnames=("cfg",))

    # a random positive model: words block and class block of Φ normalised separately
    phi = rng.uniform(0.1, 1.0, size=(W + C, T))
    phi[:W] /= phi[:W].sum(0)
    phi[W:] /= phi[W:].sum(0)
    theta = rng.dirichlet(np.ones(T), size=D).T

    # independent numpy E-step over the same tokens (words and weighted class tokens, eq. 46)
    # the fit's layout keeps no `doc`: a piece's slots all belong to the piece's document
    d_ids = np.repeat(np.asarray(data.piece_doc), data.count.shape[1] // data.piece_doc.shape[1], axis=1).ravel()
    w_ids = np.asarray(data.word).ravel()
    cnt = np.asarray(data.count, np.float64).ravel()
    p = phi[w_ids] * theta[:, d_ids].T
    p /= p.sum(1, keepdims=True)
    n_wt = np.zeros((W + C, T))
    n_td = np.zeros((T, D))
    np.add.at(n_wt, w_ids, cnt[:, None] * p)
    np.add.at(n_td.T, d_ids, cnt[:, None] * p)

    def step(taus):
        state = em.EMState(jnp.asarray(phi, jnp.float32), jnp.asarray(theta, jnp.float32), jnp.zeros(()),
                           jnp.zeros(()), jnp.zeros((), jnp.int32), reg.params, jnp.ones(T), jnp.ones(D),
                           jnp.zeros(T, bool), jnp.zeros(D, bool))
        out = step_fn(state, data, reg.with_coefs([float(t) for t in taus]), aux, cfg=cfg)
        return np.asarray(out.phi, np.float64), np.asarray(out.theta, np.float64)

    def run(**taus):
        vec = np.zeros(len(order))
        for k, v in taus.items():
            vec[order.index(k)] = v
        return step(vec)

    # jit objects of one function share their compiled programs, so another instance of this
    # fixture (xdist may set it up again in the same process) has left entries: count from here
    cache_start = step_fn._cache_size()
    return dict(corpus=corpus, ctx=ctx, phi=phi, theta=theta, n_wt=n_wt, n_td=n_td, run=run, mu=mu,
                sigma=sigma, links=links, step=step_fn, order=order, class_freq=class_freq, pool=pool,
                cache_start=cache_start)


def _norm_phi(a):
    a = np.maximum(a, 0)
    out = np.zeros_like(a)
    for rows in (slice(0, W), slice(W, W + C)):
        s = a[rows].sum(0, keepdims=True)
        out[rows] = np.divide(a[rows], s, out=np.zeros_like(a[rows]), where=s > 0)
    return out


def _norm_theta(a):
    a = np.maximum(a, 0)
    s = a.sum(0, keepdims=True)
    return np.divide(a, s, out=np.zeros_like(a), where=s > 0)


def _check(m, phi_term=None, theta_term=None, **taus):
    phi, theta = m["run"](**taus)
    want_phi = _norm_phi(m["n_wt"] + (0 if phi_term is None else phi_term))
    want_theta = _norm_theta(m["n_td"] + (0 if theta_term is None else theta_term))
    np.testing.assert_allclose(phi, want_phi, rtol=2e-4, atol=2e-6)
    np.testing.assert_allclose(theta, want_theta, rtol=2e-4, atol=2e-6)


def _words_only(term_w):
    out = np.zeros((W + C, T))
    out[:W] = term_w
    return out


def test_plsa_step_is_theorem_1(model):
    _check(model)  # all τ = 0: eq. 6-8


def test_smoothing_eq_24(model):
    tau = 0.7
    term = np.zeros((W, T))
    term[:, [0, 1]] = tau  # β_w = 1 on topics 0, 1
    alpha = np.arange(1.0, T + 1)
    _check(model, phi_term=_words_only(term), smooth_phi=tau)
    _check(model, theta_term=0.3 * alpha[:, None] * np.ones((1, D)), smooth_theta=0.3)


def test_sparsing_eq_26(model):
    tau = 4.0
    beta = model["corpus"].word_counts / model["corpus"].n_tokens
    term = np.zeros((W, T))
    term[:, SPEC] = -tau * beta[:, None]
    _check(model, phi_term=_words_only(term), sparse_phi=tau)
    th = np.zeros((T, D))
    th[SPEC] = -0.9
    _check(model, theta_term=th, sparse_theta=0.9)


def test_semi_supervised_eq_28_29(model):
    tau = 2.5
    term = np.zeros((W, T))
    term[[1, 2], 0] = tau / 2
    term[5, 2] = tau
    _check(model, phi_term=_words_only(term), seed_words=tau)
    th = np.zeros((T, D))
    th[1, 0] = tau
    th[[0, 2], 3] = tau / 2
    _check(model, theta_term=th, labelled_documents=tau)
    # eq. 27 with β_0 = 3, α_0 = 2 in one regularizer
    term = np.zeros((W, T))
    term[[7, 8, 9], 1] = 3.0 * 1.5 / 3
    th = np.zeros((T, D))
    th[3, 1] = 2.0 * 1.5
    _check(model, phi_term=_words_only(term), theta_term=th, semi_supervised=1.5)


def test_decorrelation_eq_31(model):
    gamma = 30.0
    phi = model["phi"][:W]
    ps = phi[:, SPEC]
    term = np.zeros((W, T))
    term[:, SPEC] = -gamma * ps * (ps.sum(1, keepdims=True) - ps)
    _check(model, phi_term=_words_only(term), decorrelate=gamma)


def test_document_links_eq_33(model):
    tau = 5.0
    theta = model["theta"]
    ndc = np.zeros((D, D))
    for e in model["links"]:
        w = e[2] if len(e) == 3 else 1.0
        ndc[e[0], e[1]] += w
        if e[0] != e[1]:
            ndc[e[1], e[0]] += w
        else:
            ndc[e[0], e[0]] += w  # a self link counts θ_d·θ_d twice in R, so twice in the gradient
    term = tau * theta * (theta @ ndc)
    _check(model, theta_term=term, document_links=tau)


def test_correlated_topics_eq_37(model):
    tau = 0.8
    prec = np.linalg.inv(model["sigma"])
    term = -tau * prec @ (np.log(model["theta"]) - model["mu"][:, None])
    _check(model, theta_term=term, correlated_topics=tau)


def test_correlated_topics_update_eq_38_39(model):
    reg = R.correlated_topics(threshold=0.0, ridge=1e-6).bind(model["ctx"]).terms[0]
    theta = model["theta"]
    new = reg.update(None, jnp.asarray(theta, jnp.float32), reg.params, 1.0)
    eta = np.log(theta)
    mu = eta.mean(1)
    sigma = (eta - mu[:, None]) @ (eta - mu[:, None]).T / D
    np.testing.assert_allclose(np.asarray(new["mu"]), mu, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(new["sigma"]), sigma, rtol=1e-4, atol=1e-6)
    ridge = 1e-6 * np.trace(sigma) / T
    np.testing.assert_allclose(np.asarray(new["prec"]), np.linalg.inv(sigma + ridge * np.eye(T)), rtol=2e-2, atol=1e-2)
    # sparse precision: entries below the threshold are zeroed, the diagonal is kept
    sparse = R.correlated_topics(threshold=0.5).bind(model["ctx"]).terms[0]
    p2 = np.asarray(sparse.update(None, jnp.asarray(theta, jnp.float32), sparse.params, 1.0)["prec"])
    assert np.all(np.diag(p2) != 0) and (p2 == 0).sum() > 0


def _cooc(corpus):
    B = (corpus.to_dense() > 0).astype(float)
    return B.T @ B


def test_coherence_eq_42(model):
    tau = 0.05
    corpus, phi, theta = model["corpus"], model["phi"][:W], model["theta"]
    N = _cooc(corpus)
    Cm = N / np.diag(N)[None, :]  # C_wv = p̂(w|v) = N_wv / N_v
    n_t = theta @ corpus.doc_lengths
    n_vt = n_t[None, :] * phi  # eq. 40: φ_vt = n_vt / n_t
    term = np.zeros((W, T))
    for w in range(W):
        for v in range(W):
            if v != w:
                term[w] += tau * Cm[w, v] * n_vt[v]
    _check(model, phi_term=_words_only(term), coherence_kl=tau)


def test_coherence_eq_43(model):
    tau = 3.0
    corpus, phi = model["corpus"], model["phi"][:W]
    N = _cooc(corpus)
    df = np.diag(N)
    with np.errstate(divide="ignore"):
        pmi = np.log(D * N / np.outer(df, df))
    Cm = np.where(pmi > 0, N, 0.0)
    q = np.einsum("ut,uv,vt->t", phi, Cm, phi)
    term = tau * 2 * phi * (Cm @ phi) / q[None, :]
    _check(model, phi_term=_words_only(term), coherence_newman=tau)


def test_topic_selection_term(model):
    """The M-step term θ ⊙ ∂R/∂θ of R = -(n/|T|) Σ_t ln p(t), p(t) = Σ_d n_d θ_td / n, by central
    finite differences of R written in numpy (float64), independent of the autodiff in the step."""
    tau = 3.0
    theta, n_d = model["theta"], model["corpus"].doc_lengths.astype(float)
    n = n_d.sum()

    def R_np(th):
        return -(n / T) * np.sum(np.log(th @ n_d / n))

    grad = np.zeros_like(theta)
    h = 1e-6
    for t in range(T):
        for d in range(D):
            e = np.zeros_like(theta)
            e[t, d] = h
            grad[t, d] = (R_np(theta + e) - R_np(theta - e)) / (2 * h)
    _check(model, theta_term=tau * theta * grad, topic_selection=tau)


def test_label_regularization_eq_52(model):
    xi = 40.0
    psi = model["phi"][W:]
    n_t = model["theta"] @ model["corpus"].doc_lengths
    term = np.zeros((W + C, T))
    term[W:] = xi * model["class_freq"][:, None] * psi * n_t[None, :] / (psi @ n_t)[:, None]
    _check(model, phi_term=term, label_regularization=xi)


def test_combined_background_model_eq_54_55(model):
    """Eq. 53 with all five coefficients at once gives the combined M-step (54)-(55)."""
    b0, b1, a0, a1, gamma = 3.0, 0.4, 0.6, 0.8, 25.0
    phi, theta = model["phi"][:W], model["theta"]
    bw = np.full(W, 1.0 / W)
    S, B = np.zeros(T, bool), np.zeros(T, bool)
    S[SPEC], B[list(BG)] = True, True
    ps = phi * S
    dec = ps * (ps.sum(1, keepdims=True) - ps)
    term_phi = -b0 * bw[:, None] * S + b1 * bw[:, None] * B - gamma * dec
    term_theta = (-a0 * S + a1 * B)[:, None] * np.ones((1, D))
    _check(model, phi_term=_words_only(term_phi), theta_term=term_theta,
           sparse_phi_u=b0, smooth_phi_bg=b1, sparse_theta=a0, smooth_theta_bg=a1, decorrelate=gamma)


def test_one_compiled_step_for_all(model):
    # every check above went through the same compiled step: coefficients are traced leaves
    model["run"](smooth_phi=0.5)
    model["run"](decorrelate=2.0, sparse_theta=0.1)
    assert model["step"]._cache_size() - model["cache_start"] == 1


def test_rate_controlled_sparsing(model):
    """The thresholds of sec. 5's trajectory, by what they do: the M-step (n - c)₊ with the
    threshold c zeroes exactly k = floor(carry + rate n) of a column's n values (the fraction
    left over is carried), never the largest one (so a column keeps a non-zero, and the remainder
    is dropped when that cap binds); the share zeroed per iteration in a fit is checked in
    test_artm.  The column values are n_t φ_wt / β_w (n_d θ_td / α_t for Θ)."""
    ctx, phi, theta = model["ctx"], model["phi"], model["theta"]
    n_d = model["corpus"].doc_lengths.astype(float)
    sp = R.sparse_phi(beta="uniform", topics="specific", rate=0.3).bind(ctx).terms[0]
    params = {**sp.params, "carry": jnp.full(T, 0.6, jnp.float32)}
    new = sp.update(jnp.asarray(phi, jnp.float32), jnp.asarray(theta, jnp.float32), params, 1.0)
    c = np.asarray(new["scale"])
    vals = (theta @ n_d)[None, :] * phi[:W] * W  # n_t φ_wt / β_w with β_w = 1/W
    for t in SPEC:  # 0.6 + 0.3 * 15 = 5.1: the 5 smallest go, 0.1 is carried
        assert (vals[:, t] < c[t]).sum() == 5 and vals[:, t].max() > c[t]
    np.testing.assert_allclose(np.asarray(new["carry"])[SPEC], 0.1, atol=1e-5)
    assert np.all(c[list(BG)] == 0)  # not sparsed: no threshold
    st = R.sparse_theta(topics="specific", rate=0.1).bind(ctx).terms[0]
    carry = np.linspace(0, 0.9, D)
    new = st.update(None, jnp.asarray(theta, jnp.float32), {**st.params, "carry": jnp.asarray(carry, jnp.float32)}, 1.0)
    vals = theta[SPEC] * n_d[None, :]
    for d in range(D):  # carry + 0.4: one value when the carry reaches 0.6
        k = int(np.floor(carry[d] + 0.4 + 1e-6))
        assert (vals[:, d] < float(new["scale"][d])).sum() == k
    # a column with a single non-zero never loses it, however large the carried remainder
    one = np.zeros((T, D))
    one[0] = 1.0
    new = st.update(None, jnp.asarray(one, jnp.float32), {**st.params, "carry": jnp.full(D, 0.99, jnp.float32)}, 1.0)
    assert np.all(np.asarray(new["scale"]) < n_d) and np.all(np.asarray(new["carry"]) == 0)


def test_callable_without_model():
    rng = np.random.default_rng(1)
    phi = rng.dirichlet(np.ones(6), size=3).T
    theta = rng.dirichlet(np.ones(3), size=4).T
    val = R.sparse_phi()(jnp.asarray(phi), jnp.asarray(theta))
    np.testing.assert_allclose(float(val), -np.log(phi).sum(), rtol=1e-5)
    np.testing.assert_allclose(float(R.decorrelate()(phi, theta)),
                               -0.5 * sum(phi[:, t] @ phi[:, s] for t in range(3) for s in range(3) if s != t),
                               rtol=1e-5)


def test_spec_round_trip(model):
    import json

    for name, r in [("seed_words", R.seed_words({0: ["w1"]})), ("links", R.document_links([(0, 1, 2.0)])),
                    ("sparse", R.sparse_theta(topics="specific", rate=0.1)),
                    ("labelled", R.labelled_documents({3: [0, 2]}))]:
        spec = json.loads(json.dumps(r.terms[0].spec))
        r2 = R.from_spec(spec)
        b1, b2 = r.bind(model["ctx"]).terms[0], r2.bind(model["ctx"]).terms[0]
        for k in b1.params:
            np.testing.assert_array_equal(np.asarray(b1.params[k]), np.asarray(b2.params[k]), err_msg=name)


def test_pool_members_pickle_unbound_and_bound(model):
    """Every pool member (closures of its factory) pickles through its spec: unbound it rebuilds
    with its coefficient and name; bound it keeps its data (equal leaves, the same pytree
    structure and the same values and M-step terms as the original)."""
    import copy
    import pickle

    pool = model["pool"]
    reg = R.combine(*[(pool[k], 0.5 + i) for i, k in enumerate(model["order"])])
    back = pickle.loads(pickle.dumps(reg))
    assert back.names == reg.names and [float(t.coef(1)) for t in back.terms] == [float(t.coef(1)) for t in reg.terms]
    bound = reg.bind(model["ctx"]).cast(jnp.float32)
    for b in (back.bind(model["ctx"]).cast(jnp.float32), pickle.loads(pickle.dumps(bound))):
        assert jax.tree.structure(b) == jax.tree.structure(bound)
        for x, y in zip(jax.tree.leaves(b), jax.tree.leaves(bound)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        assert [t.update is None for t in b.terms] == [t.update is None for t in bound.terms]
    # copies keep the functions themselves (static fields equal: the compiled step is reused)
    assert all(a.fn is b.fn for a, b in zip(copy.deepcopy(reg).terms, reg.terms))


def test_bad_input_is_a_clear_error(model):
    ctx = model["ctx"]
    with pytest.raises(ValueError, match="regularizer 'seed_words'.*unknown topic 'nope'"):
        R.seed_words({"nope": ["w1"]}).bind(ctx)
    with pytest.raises(ValueError, match="word 'zzz' is not in the vocabulary"):
        R.seed_words({0: ["zzz"]}).bind(ctx)
    with pytest.raises(ValueError, match="document 12 does not exist .*10 documents"):
        R.labelled_documents({12: [0]}).bind(ctx)
    with pytest.raises(ValueError, match="document 40 does not exist"):
        R.document_links([(0, 40)]).bind(ctx)
    with pytest.raises(ValueError, match="topic index 9 is outside"):
        R.decorrelate(topics=[9]).bind(ctx)
    with pytest.raises(ValueError, match="rate must be in"):
        R.sparse_phi(rate=1.5)
    plain = ctx.__class__.build(model["corpus"], T)
    with pytest.raises(ValueError, match="label_regularization needs a model with classes"):
        R.label_regularization().bind(plain)
    with pytest.raises(ValueError, match="no background topics"):
        R.smooth_phi(topics="background").bind(plain)
