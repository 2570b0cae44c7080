"""The fused C++ E-step (topicjax.core.kernels) against a float64 numpy loop, the pure-JAX kernel
and itself at other thread counts, under jit, grad, higher-order derivatives and vmap.

The quantities are those of ARTM eq. 4 and 7-8: L = Σ n_dw log Σ_t φ_wt θ_td and its gradients
∂L/∂φ_w = Σ_d (n_dw / p_dw) θ_d, ∂L/∂θ_d = Σ_w (n_dw / p_dw) φ_w.  The layouts in these tests are
built here by hand (not by layout.prepare), with padding slots, whole padding pieces, explicit zero
counts, documents without pieces and documents spread over several chunks.
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax import Corpus, datasets
from topicjax.artm import algorithm as em
from topicjax.core import estep, kernels, layout

needs_kernel = pytest.mark.skipif(not kernels.available(), reason=f"E-step kernel not built ({kernels.load_error()})")


def test_kernel_is_built():
    """A source install builds the kernel; a missing one fails here (not silently skipped) unless
    TOPICJAX_NO_KERNEL=1 says the machine has no compiler on purpose."""
    if os.environ.get("TOPICJAX_NO_KERNEL") == "1":
        pytest.skip("TOPICJAX_NO_KERNEL=1")
    assert kernels.available(), f"the compiled E-step kernel did not load: {kernels.load_error()}"
    assert kernels.EPS == estep.EPS


# ------------------------------------------------------------------------------ references
def random_docs(rng, D, W, empty=(), long=(), zero_entry=True):
    """Documents as lists of (word, count): Poisson lengths, some empty, some long (several pieces)."""
    docs = []
    for d in range(D):
        if d in empty:
            docs.append([])
            continue
        n_words = int(rng.integers(40, 70)) if d in long else int(rng.integers(1, 12))
        words = rng.choice(W, size=min(n_words, W), replace=False)
        docs.append([(int(w), float(rng.integers(1, 5))) for w in words])
    if zero_entry:  # an explicit zero count inside a document contributes nothing
        docs[next(d for d in range(D) if docs[d])].append((W - 1, 0.0))
    return docs


def sliced(docs, width=16, k=3, extra_chunks=1, dtype=np.float32):
    """The sliced layout written from its definition: each document's entries cut into pieces of
    ``width`` slots (the last one padded with count 0), ``k`` pieces per chunk, the last chunk and
    ``extra_chunks`` more filled with padding pieces of the last document."""
    pieces = []
    for d, entries in enumerate(docs):
        for start in range(0, len(entries), width):
            part = entries[start:start + width]
            part = part + [(0, 0.0)] * (width - len(part))
            pieces.append((d, part))
    last = pieces[-1][0]
    n_chunks = -(-len(pieces) // k) + extra_chunks
    while len(pieces) < n_chunks * k:
        pieces.append((last, [(0, 0.0)] * width))
    piece_doc = np.array([p[0] for p in pieces], np.int32).reshape(n_chunks, k)
    word = np.array([[w for w, _ in p[1]] for p in pieces], np.int32).reshape(n_chunks, k * width)
    count = np.array([[n for _, n in p[1]] for p in pieces], dtype).reshape(n_chunks, k * width)
    doc = np.repeat(piece_doc, width, axis=1)
    return layout.DocWordCounts(jnp.asarray(doc), jnp.asarray(word), jnp.asarray(count), jnp.asarray(piece_doc))


def reference(phi, theta, docs):
    """The E-step as a float64 loop over the non-zeros (ARTM eq. 4, 7-8)."""
    phi, theta = np.asarray(phi, np.float64), np.asarray(theta, np.float64)
    g_phi, g_theta, ll = np.zeros_like(phi), np.zeros_like(theta), 0.0
    for d, entries in enumerate(docs):
        for w, n in entries:
            if n == 0:
                continue
            p = max(float(phi[w] @ theta[:, d]), estep.EPS)
            ll += n * np.log(p)
            g_phi[w] += n / p * theta[:, d]
            g_theta[:, d] += n / p * phi[w]
    return ll, g_phi, g_theta


def params(rng, W, D, T, dtype=np.float32):
    phi = rng.random((W, T)) + 0.05
    theta = rng.dirichlet(np.ones(T), D).T
    return (phi / phi.sum(0)).astype(dtype), theta.astype(dtype)


def close(got, want, rtol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(np.abs(want).max(), 1e-30)
    assert np.abs(got - want).max() <= rtol * scale, (np.abs(got - want).max(), scale)


@pytest.fixture(autouse=True)
def default_settings():
    """Every test starts from the automatic backend and the default threads, and leaves them so."""
    old = kernels.set_backend("auto")
    yield
    kernels.set_backend(old)
    kernels.set_threads()


def counts_fn(need_phi=True, need_theta=True):
    return jax.jit(lambda p, t, d: estep.expected_counts(p, t, d, need_phi=need_phi, need_theta=need_theta))


# ------------------------------------------------------------------------------ counts
@needs_kernel
@pytest.mark.parametrize("T", [1, 2, 7, 16, 33])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_counts_equal_float64_loop(T, dtype):
    rng = np.random.default_rng(T)
    W, D = 50, 23
    docs = random_docs(rng, D, W, empty=(0, 9, D - 1), long=(4, 5))
    with jax.enable_x64(dtype == "float64"):
        data = sliced(docs, dtype=dtype)
        phi, theta = params(rng, W, D, T, dtype)
        f = counts_fn()
        assert "topicjax_estep" in f.lower(phi, theta, data).as_text()  # the kernel, not XLA
        ll, g_phi, g_theta = f(phi, theta, data)
        assert ll.dtype == g_phi.dtype == g_theta.dtype == jnp.dtype(dtype)
        assert g_phi.shape == (W, T) and g_theta.shape == (T, D)
    want = reference(phi, theta, docs)
    rtol = 2e-5 if dtype == "float32" else 1e-12
    close(ll, want[0], rtol)
    close(g_phi, want[1], rtol)
    close(g_theta, want[2], rtol)
    assert np.all(np.asarray(g_theta)[:, [0, 9, D - 1]] == 0)  # documents without pieces


@needs_kernel
@pytest.mark.parametrize("need_phi,need_theta", [(True, False), (False, True), (False, False)])
def test_partial_outputs(need_phi, need_theta):
    rng = np.random.default_rng(3)
    docs = random_docs(rng, 17, 30, long=(2,))
    data = sliced(docs)
    phi, theta = params(rng, 30, 17, 5)
    ll, g_phi, g_theta = counts_fn(need_phi, need_theta)(phi, theta, data)
    want = reference(phi, theta, docs)
    close(ll, want[0], 2e-5)
    assert (g_phi is None) != need_phi and (g_theta is None) != need_theta
    if need_phi:
        close(g_phi, want[1], 2e-5)
    if need_theta:
        close(g_theta, want[2], 2e-5)


@needs_kernel
def test_unsorted_documents_and_clamp():
    """Pieces in any document order (one thread then does the work) and p below EPS (clamped:
    log EPS and n / EPS, as the printed L with the clamp of estep.EPS)."""
    rng = np.random.default_rng(5)
    W, D, T = 20, 8, 3
    docs = random_docs(rng, D, W, long=(1,))
    data = sliced(docs, width=4, k=2, extra_chunks=0)
    perm = np.random.default_rng(0).permutation(data.piece_doc.size)
    shuffle = lambda a, w: jnp.asarray(np.asarray(a).reshape(-1, w)[perm].reshape(a.shape))  # noqa: E731
    data = layout.DocWordCounts(shuffle(data.doc, 4), shuffle(data.word, 4), shuffle(data.count, 4),
                            shuffle(data.piece_doc, 1))
    phi, theta = params(rng, W, D, T)
    phi[docs[1][0][0]] = 0.0  # this word has probability 0 in document 1: p = 0 -> EPS
    kernels.set_threads(2)
    ll, g_phi, g_theta = counts_fn()(phi, theta, data)
    want = reference(phi, theta, docs)
    close(ll, want[0], 1e-6)
    close(g_phi, want[1], 1e-5)
    close(g_theta, want[2], 1e-5)


@needs_kernel
def test_repeated_words_in_a_document():
    """Hand-built data may list a word twice in one document (the kernel updates four words at a
    time and must not let two updates of one row of ∂L/∂Φ overlap): the terms simply add up."""
    rng = np.random.default_rng(8)
    W, D, T = 12, 4, 9
    docs = [[(3, 1.0), (3, 2.0), (5, 1.0), (3, 1.0), (7, 3.0), (7, 1.0), (2, 1.0)], [(3, 1.0)] * 5,
            [(1, 2.0), (4, 1.0), (1, 1.0), (4, 2.0), (6, 1.0)], [(0, 1.0), (0, 1.0)]]
    data = sliced(docs, width=4, k=2)
    phi, theta = params(rng, W, D, T)
    ll, g_phi, g_theta = counts_fn()(phi, theta, data)
    want = reference(phi, theta, docs)
    close(ll, want[0], 2e-6)
    close(g_phi, want[1], 2e-6)
    close(g_theta, want[2], 2e-6)


@needs_kernel
def test_bad_word_id_is_an_error():
    rng = np.random.default_rng(0)
    docs = random_docs(rng, 5, 10)
    data = sliced(docs)
    phi, theta = params(rng, 10, 5, 3)
    bad = data._replace(word=data.word.at[0, 0].set(10))
    with pytest.raises(Exception, match="word id 10 .* outside"):
        jax.block_until_ready(counts_fn()(phi, theta, bad))
    bad = data._replace(piece_doc=data.piece_doc.at[-1, -1].set(5))
    with pytest.raises(Exception, match="document id 5 .* outside"):
        jax.block_until_ready(counts_fn()(phi, theta, bad))


# ------------------------------------------------------------------------------ threads, fallback
@pytest.fixture(scope="module")
def kos_like():
    """A corpus large enough for every thread to get work (bars, 2000 documents)."""
    corpus, _, _ = datasets.make_bars(n_docs=2000, seed=1)
    rng = np.random.default_rng(0)
    phi, theta = params(rng, corpus.n_words, corpus.n_docs, 12)
    return layout.prepare(corpus, chunk=1024), phi, theta


@needs_kernel
def test_threads_agree_and_repeat(kos_like):
    data, phi, theta = kos_like
    f = counts_fn()
    outs = {}
    for n in (1, 2, 3, 5):
        kernels.set_threads(n)  # no recompilation: the same compiled f
        assert kernels.get_threads() == n
        outs[n] = [np.asarray(x) for x in f(phi, theta, data)]
        again = [np.asarray(x) for x in f(phi, theta, data)]
        for a, b in zip(outs[n], again):  # a thread count gives the same bits every time
            np.testing.assert_array_equal(a, b)
    for n in (2, 3, 5):  # float32 sums of thousands of terms in another order
        for a, b in zip(outs[n], outs[1]):
            close(a, b, 1e-5)


@needs_kernel
def test_xla_fallback_agrees(kos_like):
    data, phi, theta = kos_like
    ffi = counts_fn()(phi, theta, data)
    with kernels.backend("xla"):
        f = counts_fn()
        assert "topicjax_estep" not in f.lower(phi, theta, data).as_text()
        xla = f(phi, theta, data)
    for a, b in zip(ffi, xla):
        close(a, b, 1e-5)


@needs_kernel
def test_subnormals_are_flushed_on_every_thread_as_xla_does():
    """XLA:CPU computes with subnormal floats flushed to zero (FTZ/DAZ); so does every thread of
    the kernel's pool (they used to keep the mode of the Python thread that made the pool: the
    work of the threads other than XLA's then ran on subnormals, up to 5x slower in a long PLSA
    fit, and gave subnormal counts where XLA gives zeros).  A topic whose θ entries are subnormal
    gets exactly zero ∂L/∂φ from every document, with any number of threads."""
    rng = np.random.default_rng(11)
    W, D, T = 30, 60, 3
    docs = random_docs(rng, D, W, long=(3, 40))
    data = sliced(docs)
    phi, theta = params(rng, W, D, T)
    theta[:2] = 0.5
    theta[2] = np.float32(1e-39)  # subnormal in float32
    assert 0 < theta[2, 0] < np.finfo(np.float32).tiny
    with kernels.backend("xla"):
        xla = counts_fn()(phi, theta, data)
    assert np.all(np.asarray(xla[1])[:, 2] == 0)
    for n in (1, 2, 3):
        kernels.set_threads(n)
        _, g_phi, g_theta = counts_fn()(phi, theta, data)
        assert np.all(np.asarray(g_phi)[:, 2] == 0), n
        close(g_phi, xla[1], 1e-5)
        close(g_theta, xla[2], 1e-5)


@needs_kernel
def test_stale_build_is_reported(monkeypatch):
    """In a source checkout, a kernel built from other csrc/ sources than those present warns."""
    monkeypatch.setattr(kernels, "_source_hash", lambda folder: "not-the-built-hash")
    monkeypatch.setattr(kernels, "_WARNED", set())
    with pytest.warns(RuntimeWarning, match="older than csrc"):
        kernels._check_stale()


def test_settings_are_validated():
    with pytest.raises(ValueError, match="backend must be one of"):
        kernels.set_backend("gpu")
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(ValueError, match="positive integer"):
            kernels.set_threads(bad)


def _run(code, **env):
    full = {**os.environ, "JAX_PLATFORMS": "cpu", **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@needs_kernel
def test_environment_variables_and_a_forked_child():
    """One child interpreter (each costs a JAX start):

    * ``TOPICJAX_ESTEP`` and ``TOPICJAX_THREADS`` are read on first use, not at import
      (tests/test_environment.py: the command line's one line): with bad values ``import
      topicjax`` succeeds and each first use is a ``ValueError`` naming the variable and the value;
      set to good values before the next use, they are what the settings say;
    * a process forked after the kernel's pool started (multiprocessing's default on Linux) has
      none of its threads: the kernel starts a new pool there instead of waiting for them forever.
    """
    code = """
        import json, os, warnings
        warnings.simplefilter("ignore")
        os.environ.update(TOPICJAX_ESTEP="fast", TOPICJAX_THREADS="many")
        import topicjax
        from topicjax.core import kernels
        errors = []
        for first_use in (kernels.get_backend, kernels.get_threads):
            try:
                first_use()
                errors.append(None)
            except ValueError as e:
                errors.append(str(e))
        os.environ.update(TOPICJAX_ESTEP="xla", TOPICJAX_THREADS="3")
        settings = [kernels.get_threads(), kernels.get_backend()]

        import jax
        from topicjax import datasets
        from topicjax.artm import algorithm as em
        from topicjax.core import estep, layout
        kernels.set_backend("auto")  # the kernel's pool
        corpus, _, _ = datasets.make_bars(n_docs=2000, seed=0)
        data = layout.prepare(corpus, chunk=1024)
        kernels.set_threads(2)
        state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 5)
        f = jax.jit(lambda p, t: estep.expected_counts(p, t, data)[0])
        before = float(f(state.phi, state.theta))
        pid = os.fork()
        if pid == 0:
            os._exit(0 if float(f(state.phi, state.theta)) == before else 3)
        _, status = os.waitpid(pid, 0)
        print(json.dumps(dict(errors=errors, settings=settings, fork=os.waitstatus_to_exitcode(status))))
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["errors"] == ["TOPICJAX_ESTEP must be one of 'auto', 'xla', 'ffi', 'xla_scatter', got 'fast'",
                             "TOPICJAX_THREADS must be an integer in [1, 4096], got 'many'"]
    assert res["settings"] == [3, "xla"]
    assert res["fork"] == 0  # the forked child's E-step returned, with the parent's result


def test_missing_kernel_falls_back_with_one_warning():
    """Without the compiled module (a machine without a compiler) the package imports, ``auto``
    runs the pure-JAX E-step with one warning, and ``ffi`` is a clear error."""
    code = """
        import sys, warnings
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "topicjax.core._estep_ffi":
                    raise ImportError("no compiled kernel (simulated)")
        sys.meta_path.insert(0, Block())
        import jax, numpy as np, topicjax as tj
        from topicjax.artm import algorithm as em
        from topicjax.core import estep, kernels, layout
        assert not kernels.available() and kernels.get_threads() == 1
        assert "simulated" in str(kernels.load_error())
        corpus, _, _ = tj.datasets.make_bars(n_docs=30, seed=0)
        data = layout.prepare(corpus)
        state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                f = jax.jit(lambda p, t: estep.expected_counts(p, t, data))
                assert "topicjax_estep" not in f.lower(state.phi, state.theta).as_text()
                f(state.phi, state.theta)
        msgs = [str(w.message) for w in caught if "E-step kernel is unavailable" in str(w.message)]
        assert len(msgs) == 1, msgs
        try:
            kernels.set_backend("ffi")
        except RuntimeError as e:
            assert "unavailable" in str(e)
        else:
            raise AssertionError("set_backend('ffi') without the kernel must fail")
        print("ok")
    """
    out = _run(code, TOPICJAX_ESTEP="auto")  # the automatic choice is under test, whatever the caller's setting
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# ------------------------------------------------------------------------------ transformations
@needs_kernel
def test_grad_through_log_likelihood(kos_like):
    """jax.grad of estep.log_likelihood (its custom VJP returns the kernel's gradients) equals the
    gradients of the XLA kernel; the value too."""
    data, phi, theta = kos_like
    vg = jax.jit(jax.value_and_grad(estep.log_likelihood, argnums=(0, 1)))
    got = vg(phi, theta, data)
    with kernels.backend("xla"):
        want = jax.jit(jax.value_and_grad(estep.log_likelihood, argnums=(0, 1)))(phi, theta, data)
    close(got[0], want[0], 1e-6)
    for a, b in zip(got[1], want[1]):
        close(a, b, 1e-5)


@needs_kernel
def test_higher_order_derivatives():
    """Second derivatives with the kernel selected: a Hessian-vector product of L (forward over
    reverse) and reverse mode through a whole EM step (as a hypergradient needs) equal central
    finite differences in float64."""
    rng = np.random.default_rng(2)
    W, D, T = 25, 9, 4
    docs = random_docs(rng, D, W, long=(3,))
    with jax.enable_x64(True):
        data = sliced(docs, dtype="float64")
        phi, theta = params(rng, W, D, T, "float64")
        v = rng.standard_normal(phi.shape)
        grad_l = jax.grad(lambda q: estep.log_likelihood(q, theta, data))

        state0 = em.init(jax.random.key(0), W, D, T, dtype=jnp.float64)._replace(theta=jnp.asarray(theta))

        def after_step(p):
            return jnp.sum(em.make_step(jit=False)(state0._replace(phi=p), data).phi[:3] ** 2)

        assert "topicjax_estep" in jax.jit(after_step).lower(phi).as_text()
        hvp = jax.jit(lambda p: jax.jvp(grad_l, (p,), (jnp.asarray(v),))[1])(phi)
        g_step = jax.jit(jax.grad(after_step))(phi)
        h = 1e-6
        fd_hvp = (grad_l(phi + h * v) - grad_l(phi - h * v)) / (2 * h)
        fd_step = (after_step(phi + h * v) - after_step(phi - h * v)) / (2 * h)
    close(hvp, fd_hvp, 1e-6)
    assert abs(float(np.sum(np.asarray(g_step) * v)) - float(fd_step)) <= 1e-6 * abs(float(fd_step))


@needs_kernel
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_vmap_over_models_uses_batched_kernel(dtype):
    """jax.vmap over G models (Φ and Θ batched, counts shared or per model) runs the batched
    kernel and equals the float64 loop for every model."""
    rng = np.random.default_rng(7)
    W, D, T, G = 40, 15, 6, 3
    docs = random_docs(rng, D, W, empty=(2,), long=(6,))
    with jax.enable_x64(dtype == "float64"):
        data = sliced(docs, dtype=dtype)
        ps = [params(rng, W, D, T, dtype) for _ in range(G)]
        phis, thetas = jnp.stack([p for p, _ in ps]), jnp.stack([t for _, t in ps])
        f = jax.jit(jax.vmap(lambda p, t: estep.expected_counts(p, t, data)))
        assert "topicjax_estep_models" in f.lower(phis, thetas).as_text()
        ll, g_phi, g_theta = f(phis, thetas)
        # Per-model counts: model g sees the counts scaled by g + 1 (vmap over data.count too).
        scale = jnp.arange(1, G + 1, dtype=dtype)
        counts = data.count[None] * scale[:, None, None]
        h = jax.jit(jax.vmap(lambda p, t, c: estep.expected_counts(p, t, data._replace(count=c))))
        ll2, g_phi2, g_theta2 = h(phis, thetas, counts)
        # One Φ shared by the models, Θ batched.
        k = jax.jit(jax.vmap(lambda t: estep.expected_counts(phis[0], t, data)))
        ll3, g_phi3, _ = k(thetas)
    rtol = 2e-5 if dtype == "float32" else 1e-12
    for g in range(G):
        want = reference(ps[g][0], ps[g][1], docs)
        close(ll[g], want[0], rtol)
        close(g_phi[g], want[1], rtol)
        close(g_theta[g], want[2], rtol)
        close(ll2[g], (g + 1) * want[0], rtol)
        close(g_phi2[g], (g + 1) * want[1], rtol)
        close(g_theta2[g], (g + 1) * want[2], rtol)
        want3 = reference(ps[0][0], ps[g][1], docs)
        close(ll3[g], want3[0], rtol)
        close(g_phi3[g], want3[1], rtol)


@needs_kernel
def test_vmap_over_layouts_and_threads_of_batched_kernel():
    """vmap over whole layouts (models on different corpora) calls the single-model kernel per
    model; the batched kernel gives the same bits at every thread count up to round-off."""
    rng = np.random.default_rng(9)
    W, D, T = 30, 12, 5
    docs_a, docs_b = random_docs(rng, D, W, long=(1,)), random_docs(rng, D, W, long=(7,))
    la, lb = sliced(docs_a), sliced(docs_b)
    if la.word.shape != lb.word.shape:
        pytest.skip("layouts of different shapes")
    stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), la, lb)
    phi, theta = params(rng, W, D, T)
    ll, g_phi, g_theta = jax.jit(jax.vmap(lambda d: estep.expected_counts(phi, theta, d)))(stacked)
    for i, docs in enumerate((docs_a, docs_b)):
        want = reference(phi, theta, docs)
        close(ll[i], want[0], 2e-5)
        close(g_phi[i], want[1], 2e-5)
        close(g_theta[i], want[2], 2e-5)


@needs_kernel
def test_batched_kernel_threads(kos_like):
    """4 models at 1 thread, 2 threads (two whole models per thread), 3 threads (three models
    side by side, then the fourth split over the threads) and 5 (every model split) agree with
    each other and with the XLA kernel."""
    data, phi, theta = kos_like
    G = 4
    phis = jnp.stack([jnp.asarray(phi) ** (1 + 0.1 * g) for g in range(G)])
    thetas = jnp.stack([jnp.asarray(theta)] * G)
    f = jax.jit(jax.vmap(lambda p, t: estep.expected_counts(p, t, data)))
    outs = {}
    for n in (1, 2, 3, 5):
        kernels.set_threads(n)
        outs[n] = f(phis, thetas)
    with kernels.backend("xla"):
        xla = jax.jit(jax.vmap(lambda p, t: estep.expected_counts(p, t, data)))(phis, thetas)
    for n in (2, 3, 5):
        for a, b in zip(outs[n], outs[1]):
            close(a, b, 1e-5)
    for a, b in zip(outs[1], xla):
        close(a, b, 1e-5)


# ------------------------------------------------------------------------------ fits
@needs_kernel
def test_plsa_fit_equals_xla_fit():
    corpus, _, _ = datasets.make_bars(n_docs=400, seed=3)
    fit = lambda: tj_plsa().fit(corpus)  # noqa: E731
    got = fit()
    with kernels.backend("xla"):
        want = fit()
    close(got.phi_, want.phi_, 1e-4)
    close(got.theta_, want.theta_, 1e-4)
    assert abs(got.history_[-1]["objective"] - want.history_[-1]["objective"]) <= 1e-5 * abs(
        want.history_[-1]["objective"])


def tj_plsa():
    import topicjax as tj

    return tj.PLSA(n_components=10, max_iter=25, random_state=0, progress=False)


@needs_kernel
def test_fit_many_vmapped_equals_separate_fits():
    """A vmapped batch of 3 models (the batched kernel) equals 3 separate fits.  Not a test of
    the batch driver (tests/artm has those): of the batched kernel inside a whole fit."""
    import topicjax as tj

    corpus, _, _ = datasets.make_bars(n_docs=200, seed=4)
    grid = tj.ARTM(n_components=6, max_iter=12, random_state=0, progress=False).fit_many(corpus, seeds=[0, 1, 2], mode="vmap",
                                                                                       vmap_size=3)
    for i, seed in enumerate([0, 1, 2]):
        one = tj.ARTM(n_components=6, max_iter=12, random_state=seed, progress=False).fit(corpus)
        close(grid[i].phi_, one.phi_, 1e-4)


def test_corpus_layout_from_prepare_matches_loop():
    """layout.prepare's layout (default pieces) through the selected backend equals the loop."""
    rng = np.random.default_rng(1)
    dense = rng.poisson(0.4, size=(40, 70))
    dense[:, 0] += 1
    corpus = Corpus.from_dense(dense)
    phi, theta = params(rng, 70, 40, 9)
    ll, g_phi, g_theta = counts_fn()(phi, theta, layout.prepare(corpus))
    docs = [[(int(w), float(dense[d, w])) for w in np.flatnonzero(dense[d])] for d in range(40)]
    want = reference(phi, theta, docs)
    close(ll, want[0], 2e-5)
    close(g_phi, want[1], 2e-5)
    close(g_theta, want[2], 2e-5)


@needs_kernel
def test_thread_benchmark_quick_smoke_run(tmp_path, load_experiment):
    """experiments/bench_threads.py --quick: our step at 1 and N threads and the XLA step on a
    small synthetic corpus; tables and the target ratios written."""
    bench = load_experiment("bench_threads")
    out = tmp_path / "threads.md"
    targets = bench.main(["--quick", "--threads", "2", "--systems", "ours-ffi", "ours-xla", "--out", str(out)])
    text = out.read_text()
    assert "Load average at start" in text and "| ours-ffi-1 | 1 |" in text and "| ours-ffi-2 | 2 |" in text
    assert "| ours-xla |" in text and "Thread scaling" in text and "E-step alone" in text
    assert "M-step alone" in text and "ours-mstep-1" in text and "ours-mstep-2" in text
    (t,) = targets
    assert t["corpus"] == "bars" and t["T"] == 10 and t["scaling"] > 0
    assert t["estep_scaling"] > 0 and t["mstep_scaling"] > 0 and "the M-step: 1 / 2" in text


@needs_kernel
def test_pass_profile_quick_smoke_run(tmp_path, load_experiment):
    """experiments/profile_pass.py --quick: the step, E+M as two calls and each part timed at 1
    and 2 threads; the table's "predicted" column is Amdahl's law on the parts' medians."""
    prof = load_experiment("profile_pass")
    out = tmp_path / "parts.md"
    results = prof.main(["--quick", "--threads", "1", "2", "--out", str(out)])
    med = results[8]
    assert set(med) == {(p, n) for p in ("step", "E+M", "E", "M") for n in (1, 2)}
    assert all(v > 0 for v in med.values())
    row = next(line for line in out.read_text().splitlines() if line.startswith("| 8 |"))
    predicted = (med["E", 1] + med["M", 1]) / (med["E", 2] + med["M", 2])
    assert row.endswith(f"| {predicted:.2f} |")
    assert f"{med['step', 1] * 1e3:.2f} / {med['step', 2] * 1e3:.2f} ({med['step', 1] / med['step', 2]:.2f})" in row
