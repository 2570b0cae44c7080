"""Speed of the PLSA/ARTM EM pass against BigARTM, gensim, scikit-learn, tomotopy and a fused numba
kernel, on the same corpus and machine, plus time to a common hold-out perplexity (issue 7).

What is measured, per corpus and number of topics T:

1. **Seconds per pass**, timed round-robin (one pass of every system in turn, repeated
   ``--rounds`` times, medians reported) so that the load of a shared machine hits all systems
   alike:

   * ``ours``: one jit-compiled PLSA EM iteration (``topicjax.artm.algorithm.make_step``: E-step of
     ARTM eq. 6-8 through the sliced kernel of ``em.expected_counts``, then the M-step; Θ is
     carried over between passes, so this is one document pass per Φ update);
   * ``ours-5`` / ``ours-10``: BigARTM's offline algorithm with our kernels
     (``em.EMConfig(doc_passes=N)``): Θ restarted from uniform each pass, 4 or 9 Θ-only iterations,
     then one full E-step (so ``ours-10`` does the work of ``bigartm-10``);
   * ``ours-Ndev``: ``ours`` with documents sharded over N JAX devices (only when there are
     several; on CPU set ``XLA_FLAGS=--xla_force_host_platform_device_count=N``), which is how
     one model uses N CPU threads in XLA;
   * ``numba``: the fused reference of ``experiments/numba_reference.py`` (one pass over the
     non-zeros per document, both count matrices accumulated in place, ``prange`` over
     documents) plus an in-place numba M-step, at ``--threads`` threads;
   * ``bigartm-1`` / ``bigartm-10``: BigARTM's ``fit_offline`` pass with
     ``num_document_passes`` = 1 and 10 (its default), ``num_processors = --threads``;
   * ``gensim``: one ``LdaModel.update`` pass over the corpus (online variational Bayes, its
     defaults: chunks of 2000 documents, 50 inner iterations);
   * ``sklearn``: one batch variational-EM iteration of ``LatentDirichletAllocation``
     (``_em_step``, what ``fit`` runs ``max_iter`` times), ``n_jobs = --threads``;
   * ``tomotopy``: one collapsed Gibbs sweep of ``tomotopy.LDAModel.train`` (``workers =
     --threads``), for orientation only (a Gibbs sweep is not an EM pass).

2. **Time to quality**: the hold-out perplexity that BigARTM (num_document_passes = 10)
   reaches after ``--target-passes`` (20) passes is the target; every system is restarted and
   run pass by pass until its Φ reaches it (or ``--max-passes`` / ``--max-seconds``).  All
   perplexities come from one function of ours on one split: documents are split 90/10, the test
   documents' tokens are halved by ``Corpus.completion_split`` (ARTM sec. 5), Θ is folded in on
   the observed half with Φ fixed (``em.infer_theta``, 30 iterations) and the held-out half is
   scored (``metrics.heldout_perplexity``), after mixing every Φ with the uniform distribution
   at weight 1e-9 (a token given probability 0 would make the perplexity infinite; BigARTM zeroes
   entries of Φ below 1e-16).  Evaluation time is not counted.

3. **Peak memory** of our compiled step (XLA's buffer assignment: arguments + outputs +
   temporaries), against the arrays a fit must hold: counts (nnz x 12 bytes) + Φ + Θ; also for
   a step that takes the likelihood gradients at Φ, Θ rather than at clamped copies.

4. ``--sweep``: E-step kernel variants (the old flat gather/scatter kernel with its default
   chunk, the sliced kernel with Θ read by rows or by columns, and CPU block sizes).

A system whose package is missing is reported as such (with the import error); nothing is
downloaded.  Results go to ``experiments/results/bench_em.md`` (with the machine description and
the exact command).  ``--quick`` runs ours alone on a small synthetic corpus in seconds (``--systems`` adds others).

Example::

    JAX_PLATFORMS=cpu python experiments/bench_em.py --corpus kos 20ng --topics 50 100 200
"""

from __future__ import annotations

import argparse
import os
os.environ.setdefault("TOPICJAX_CACHE", "off")  # compilation is timed here: never loaded from topicjax's cache
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

ALL_SYSTEMS = ("ours", "ours-5", "ours-10", "numba", "bigartm-1", "bigartm-10", "gensim", "sklearn", "tomotopy")


# ------------------------------------------------------------------------------------ corpora
def load_corpus(name: str, quick: bool):
    import topicjax as tj
    from topicjax import datasets

    if name == "bars":
        corpus, _, _ = datasets.make_bars(n_docs=300 if quick else 2000, seed=0)
        return corpus
    if name == "kos":
        return datasets.load_kos()
    if name in ("20ng", "20newsgroups"):
        return datasets.load_20newsgroups("train")
    return tj.Corpus.load(name)


def split(corpus, seed: int = 0):
    """90/10 documents; vocabulary restricted to words seen in training (ARTM sec. 5); test
    documents with fewer than 2 tokens dropped; test tokens halved for document completion."""
    train, test = corpus.train_test_split(0.1, seed=seed)
    seen = np.flatnonzero(train.word_counts > 0)
    vocab = [corpus.vocab[i] for i in seen]
    train = train.with_vocab(vocab)
    test = test.with_vocab(vocab, empty_docs="drop")
    test = test.subset(np.flatnonzero(test.doc_lengths >= 2))
    observed, heldout = test.completion_split("tokens", seed=seed)
    return train, observed, heldout


# ------------------------------------------------------------------------------------ systems
class System:
    """One trainer: ``reset()`` builds a fresh model (untimed), ``step()`` runs one timed pass,
    ``phi()`` returns its (W, T) word-topic matrix in the corpus's vocabulary order."""

    name = "?"

    def __init__(self, train, T, threads, seed):
        self.train, self.T, self.threads, self.seed = train, T, threads, seed

    def reset(self):
        raise NotImplementedError

    def step(self):
        raise NotImplementedError

    def phi(self):
        raise NotImplementedError


class Ours(System):
    name = "ours"

    def __init__(self, *a):
        super().__init__(*a)
        import jax

        from topicjax.artm import algorithm as em
        from topicjax.core import estep, layout

        self.jax, self.em = jax, em
        self.data = layout.prepare(self.train)
        self._step = em.make_step()
        t0 = time.perf_counter()
        self.reset()
        jax.block_until_ready(self._step(self.state, self.data, None))
        self.compile_s = time.perf_counter() - t0

    def reset(self):
        self.state = self.em.init(self.jax.random.key(self.seed), self.train.n_words, self.train.n_docs, self.T)

    def step(self):
        self.state = self._step(self.state, self.data, None)
        self.jax.block_until_ready(self.state.phi)

    def phi(self):
        return np.asarray(self.state.phi)

    def init_arrays(self):
        return np.asarray(self.state.phi), np.asarray(self.state.theta)


class OursOffline(Ours):
    """BigARTM's offline algorithm with our kernels: ``em.EMConfig(doc_passes=N)`` (Θ restarted from
    uniform each pass, ``doc_passes - 1`` Θ-only iterations, then one full E-step)."""

    def __init__(self, train, T, threads, seed, doc_passes=10):
        import jax

        from topicjax.artm import algorithm as em
        from topicjax.core import estep, layout

        System.__init__(self, train, T, threads, seed)
        self.jax, self.em = jax, em
        self.name = f"ours-{doc_passes}"
        self.data = layout.prepare(self.train)
        self._step = em.make_step(cfg=em.EMConfig(remove=False, doc_passes=doc_passes))
        t0 = time.perf_counter()
        self.reset()
        jax.block_until_ready(self._step(self.state, self.data, None))
        self.compile_s = time.perf_counter() - t0


class OursSharded(Ours):
    """``ours`` with the documents sharded over all JAX devices (``topicjax.scale.distributed``): on CPU,
    run the benchmark with ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` to give XLA N
    host devices, i.e. N threads working on one model."""

    def __init__(self, train, T, threads, seed):
        import jax

        from topicjax.scale import distributed

        System.__init__(self, train, T, threads, seed)
        self.jax, self.dist = jax, distributed
        from topicjax.artm import algorithm as em

        self.em = em
        self.data = distributed.shard(self.train)
        self.name = f"ours-{len(jax.devices())}dev"
        self._step = em.make_step()
        t0 = time.perf_counter()
        self.reset()
        jax.block_until_ready(self._step(self.state, self.data, None))
        self.compile_s = time.perf_counter() - t0

    def reset(self):
        state = self.em.init(self.jax.random.key(self.seed), self.train.n_words, self.train.n_docs, self.T)
        self.state = self.dist.replicate(self.data.mesh, state)


class Numba(System):
    name = "numba"

    def __init__(self, *a, init=None):
        super().__init__(*a)
        from numba_reference import NumbaEStep

        self.k = NumbaEStep(self.train.doc_offsets, self.train.word_ids, self.train.counts, self.train.n_words,
                            self.threads, np.float32)
        self.init = init
        t0 = time.perf_counter()
        self.reset()
        self.k.em_pass(self.phi_, self.theta_t)
        self.compile_s = time.perf_counter() - t0

    def reset(self):
        phi, theta = self.init  # the same initial Φ, Θ as ours: the same EM trajectory
        self.phi_ = np.array(phi, np.float32)
        self.theta_t = np.ascontiguousarray(np.asarray(theta, np.float32).T)

    def step(self):
        _, self.phi_, self.theta_t = self.k.em_pass(self.phi_, self.theta_t)

    def phi(self):
        return self.phi_


_BATCHES: dict = {}


class BigARTM(System):
    def __init__(self, *a, doc_passes=1, workdir=None):
        super().__init__(*a)
        cwd = os.getcwd()
        os.chdir(workdir)  # BigARTM's log files (bigartm.*) go to the current folder when it starts
        try:
            import artm

            artm.version()
        finally:
            os.chdir(cwd)

        from topicjax.data import formats

        self.artm, self.doc_passes = artm, doc_passes
        self.name = f"bigartm-{doc_passes}"
        key = str(workdir)
        if key not in _BATCHES:  # one conversion to BigARTM batches per corpus (not timed)
            folder = Path(workdir) / "uci"
            formats.write_uci(self.train, folder, "c")
            _BATCHES[key] = artm.BatchVectorizer(data_path=str(folder), data_format="bow_uci", collection_name="c",
                                                 target_folder=str(Path(workdir) / "batches"))
        self.bv = _BATCHES[key]
        self.index = {w: i for i, w in enumerate(self.train.vocab)}
        self.compile_s = 0.0
        self.reset()

    def reset(self):
        self.model = self.artm.ARTM(num_topics=self.T, dictionary=self.bv.dictionary, num_processors=self.threads,
                                    num_document_passes=self.doc_passes, seed=self.seed + 1, cache_theta=False)
        if not getattr(self.model, "_initialized", False):
            self.model.initialize(dictionary=self.bv.dictionary)

    def step(self):
        self.model.fit_offline(batch_vectorizer=self.bv, num_collection_passes=1)

    def phi(self):
        data, tokens, _ = self.model.get_phi_dense()
        out = np.zeros((self.train.n_words, self.T))
        rows = np.array([self.index[t] for t in tokens])
        out[rows] = data
        return out


class Gensim(System):
    name = "gensim"

    def __init__(self, *a):
        super().__init__(*a)
        from gensim.models import LdaModel

        self.LdaModel = LdaModel
        self.bow = self.train.to_lists()
        self.id2word = dict(enumerate(self.train.vocab))
        self.compile_s = 0.0
        self.reset()

    def reset(self):
        self.model = self.LdaModel(num_topics=self.T, id2word=self.id2word, random_state=self.seed, eval_every=None)

    def step(self):
        self.model.update(self.bow)

    def phi(self):
        return self.model.get_topics().T


class Sklearn(System):
    name = "sklearn"

    def __init__(self, *a):
        super().__init__(*a)
        from sklearn.decomposition import LatentDirichletAllocation

        self.LDA = LatentDirichletAllocation
        self.X = self.train.to_sparse().astype(np.float64)
        self.compile_s = 0.0
        self.reset()

    def reset(self):
        self.model = self.LDA(n_components=self.T, learning_method="batch", random_state=self.seed, n_jobs=self.threads)
        self.model._init_latent_vars(self.X.shape[1], dtype=np.float64)

    def step(self):
        # The body of one batch iteration of LatentDirichletAllocation.fit.
        self.model._em_step(self.X, total_samples=self.X.shape[0], batch_update=True)
        self.model.n_iter_ += 1

    def phi(self):
        c = self.model.components_
        return (c / c.sum(1, keepdims=True)).T


class Tomotopy(System):
    name = "tomotopy"

    def __init__(self, *a):
        super().__init__(*a)
        import tomotopy

        self.tp = tomotopy
        self.docs = [[self.train.vocab[w] for w, n in doc for _ in range(n)] for doc in self.train.to_lists()]
        self.compile_s = 0.0
        self.reset()

    def reset(self):
        self.model = self.tp.LDAModel(k=self.T, seed=self.seed)
        for d in self.docs:
            self.model.add_doc(d)
        self.model.train(0, workers=self.threads)

    def step(self):
        self.model.train(1, workers=self.threads)

    def phi(self):
        index = {w: i for i, w in enumerate(self.train.vocab)}
        rows = np.array([index[w] for w in self.model.used_vocabs])
        out = np.zeros((self.train.n_words, self.T))
        for t in range(self.T):
            out[rows, t] = self.model.get_topic_word_dist(t)
        return out


def make_systems(names, train, T, threads, seed, workdir):
    """Build every requested system; a missing package is reported, not fatal."""
    made, missing = [], {}
    ours = None
    for name in names:
        try:
            if name == "ours":
                ours = Ours(train, T, threads, seed)
                made.append(ours)
                import jax

                if len(jax.devices()) > 1:  # several (host) devices: also the sharded pass
                    made.append(OursSharded(train, T, threads, seed))
            elif name.startswith("ours-"):
                made.append(OursOffline(train, T, threads, seed, doc_passes=int(name.split("-")[1])))
            elif name == "numba":
                init = (ours or Ours(train, T, threads, seed)).init_arrays()
                made.append(Numba(train, T, threads, seed, init=init))
            elif name.startswith("bigartm-"):
                made.append(BigARTM(train, T, threads, seed, doc_passes=int(name.split("-")[1]), workdir=workdir))
            elif name == "gensim":
                made.append(Gensim(train, T, threads, seed))
            elif name == "sklearn":
                made.append(Sklearn(train, T, threads, seed))
            elif name == "tomotopy":
                made.append(Tomotopy(train, T, threads, seed))
            else:
                raise ValueError(f"unknown system {name!r} (choose from {', '.join(ALL_SYSTEMS)})")
        except ImportError as e:
            missing[name] = f"not installed ({e})"
    return made, missing


# ------------------------------------------------------------------------------------ measures
def time_passes(systems, rounds):
    """Round-robin: one pass of each system in turn, ``rounds`` times; median seconds per pass."""
    times = {s.name: [] for s in systems}
    for s in systems:  # one untimed pass each (caches, thread pools)
        s.step()
    for _ in range(rounds):
        for s in systems:
            t0 = time.perf_counter()
            s.step()
            times[s.name].append(time.perf_counter() - t0)
    return {k: (statistics.median(v), min(v)) for k, v in times.items()}


EVAL_FLOOR = 1e-9


def evaluate(phi, observed, heldout):
    """The one evaluation function: hold-out perplexity by document completion (ARTM sec. 5)."""
    from topicjax.evaluation import metrics

    phi = np.asarray(phi, np.float64)
    s = phi.sum(0, keepdims=True)
    phi = np.where(s > 0, phi / np.where(s > 0, s, 1), 1.0 / phi.shape[0])  # columns to distributions
    # Every Φ is mixed with the uniform distribution at weight EVAL_FLOOR, so that a held-out
    # token that a model gives probability 0 (BigARTM zeroes entries of Φ below 1e-16; PLSA can
    # reach exact zeros) costs log(EVAL_FLOOR / W) instead of an infinite perplexity.
    phi = (1 - EVAL_FLOOR) * phi + EVAL_FLOOR / phi.shape[0]
    return metrics.heldout_perplexity(phi, observed, heldout, n_iter=30)


def run_to_target(system, target, observed, heldout, max_passes, max_seconds):
    """Train from a fresh start until the hold-out perplexity is <= target; evaluation untimed."""
    system.reset()
    spent, trace = 0.0, []
    for i in range(1, max_passes + 1):
        t0 = time.perf_counter()
        system.step()
        spent += time.perf_counter() - t0
        ppl = evaluate(system.phi(), observed, heldout)
        trace.append(ppl)
        if ppl <= target:
            return {"reached": True, "passes": i, "seconds": spent, "perplexity": ppl, "trace": trace}
        if spent > max_seconds:
            break
    return {"reached": False, "passes": len(trace), "seconds": spent, "perplexity": min(trace), "trace": trace}


def memory_report(train, T):
    """XLA's peak for our step (arguments + outputs + temporaries - aliased) vs counts + Φ + Θ.

    ``plain``: the step as a Python loop calls it (the old state stays alive beside the new
    one); ``in_place``: the same step with its state donated, as inside the compiled loop of a
    fit (:func:`topicjax.core.driver.run_fixed`, ``ARTM.fit_many``), where the new Φ, Θ take the old ones' place."""
    import jax

    from topicjax.artm import algorithm as em
    from topicjax.core import estep, layout

    data = layout.prepare(train)
    state = em.init(jax.random.key(0), train.n_words, train.n_docs, T)
    must = train.nnz * 12 + (train.n_words + train.n_docs) * T * 4
    out = {"must_MB": must / 1e6}
    step = em.make_step(jit=False)
    for name, fn in (("plain", jax.jit(step)), ("in_place", jax.jit(step, donate_argnums=0))):
        ma = fn.lower(state, data, None).compile().memory_analysis()
        peak = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes - ma.alias_size_in_bytes
        out[name] = (peak / 1e6, peak / must, ma.temp_size_in_bytes / 1e6)
    # Outside XLA's accounting: the C++ E-step keeps a private ∂L/∂Φ slab per thread beyond the
    # first (csrc/estep_kernel.h) between calls.
    from topicjax.core import kernels

    n = kernels.get_threads() if kernels.use_ffi(state.phi.dtype) else 1
    slabs = (n - 1) * train.n_words * T * state.phi.dtype.itemsize
    out["kernel"] = (slabs / 1e6, n, (out["in_place"][0] * 1e6 + slabs) / must)
    return out


def kernel_sweep(train, T, rounds):
    """E-step variants on one corpus, timed round-robin (median ms)."""
    import jax
    import jax.numpy as jnp

    from topicjax.artm import algorithm as em
    from topicjax.core import estep, layout

    state = em.init(jax.random.key(0), train.n_words, train.n_docs, T)
    phi = state.phi
    theta = jax.random.dirichlet(jax.random.key(1), jnp.ones(T), (train.n_docs,)).T.astype(jnp.float32)
    sliced = layout.prepare(train)

    def flat_data(chunk):  # the pre-issue-7 layout: doc-sorted non-zeros in (C, chunk) blocks
        nnz = train.nnz
        n = -(-nnz // chunk) * chunk
        cols = [np.concatenate([np.asarray(a), np.zeros(n - nnz, a.dtype)]).reshape(-1, chunk)
                for a in (train.doc_ids, train.word_ids, train.counts)]
        return layout.DocWordCounts(jnp.asarray(cols[0], jnp.int32), jnp.asarray(cols[1], jnp.int32),
                                jnp.asarray(cols[2], jnp.float32))

    def old_flat(p, t, data):  # the pre-issue-7 kernel, verbatim: no re-blocking
        W, TT = p.shape
        tt = t.T

        def body(carry, ch):
            ll, gp, gt = carry
            d, w, n = ch
            rows, cols = p[w], tt[d]
            q = jnp.maximum(jnp.sum(rows * cols, axis=-1), estep.EPS)
            ll = ll + jnp.sum(n * jnp.log(q))
            r = n / q
            return (ll, gp.at[w].add(r[:, None] * cols), gt.at[d].add(r[:, None] * rows, indices_are_sorted=True)), None

        init = (jnp.zeros(()), jnp.zeros((W, TT)), jnp.zeros((t.shape[1], TT)))
        (ll, gp, gt), _ = jax.lax.scan(body, init, (data.doc, data.word, data.count))
        return ll, gp, gt.T

    variants = {
        "flat gather/scatter, chunk 16384 (before)": (jax.jit(old_flat), flat_data(16384)),
        "flat gather/scatter, chunk 4096": (jax.jit(old_flat), flat_data(4096)),
        "sliced, θ by rows": (jax.jit(lambda p, t, d: estep.sliced_counts(p, t, d, True, True, True)), sliced),
        "sliced, θ by columns (CPU default)": (jax.jit(lambda p, t, d: estep.sliced_counts(p, t, d, True, True, False)), sliced),
    }
    saved = estep.CPU_BLOCK_ELEMENTS
    try:
        for elems in (204_800, 819_200, 1_638_400):
            estep.CPU_BLOCK_ELEMENTS = elems
            f = jax.jit(lambda p, t, d: estep.sliced_counts(p, t, d, True, True, False))
            jax.block_until_ready(f(phi, theta, sliced))  # compiled with this block size
            variants[f"sliced, θ by columns, block {elems // 1000}k elements"] = (f, sliced)
    finally:
        estep.CPU_BLOCK_ELEMENTS = saved
    with jax.enable_x64(True):  # the float64 E-step (x64 only inside this context)
        data64 = layout.prepare(train, dtype=jnp.float64)
        phi64, theta64 = jnp.asarray(phi, jnp.float64), jnp.asarray(theta, jnp.float64)
        f64 = jax.jit(lambda p, t, d: estep.expected_counts(p, t, d))
        jax.block_until_ready(f64(phi64, theta64, data64))

    def run64(*_):
        with jax.enable_x64(True):
            return f64(phi64, theta64, data64)

    ref = variants["sliced, θ by rows"][0](phi, theta, sliced)
    for name, (f, d) in variants.items():  # every variant computes the same counts
        out = f(phi, theta, d)
        err = max(float(jnp.abs(a - b).max() / jnp.abs(b).max()) for a, b in zip(out[1:], ref[1:]))
        assert err < 1e-4, (name, err)
        jax.block_until_ready(out)
    variants["sliced, float64 (default layout)"] = (run64, None)
    times = {k: [] for k in variants}
    for _ in range(rounds):
        for k, (f, d) in variants.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f(phi, theta, d))
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def numba_estep_ms(train, T, threads, rounds):
    """E-step only: ours (expected_counts) vs the numba kernel at ``threads`` and 1 thread."""
    import jax
    import jax.numpy as jnp

    from numba_reference import NumbaEStep
    from topicjax.artm import algorithm as em
    from topicjax.core import estep, layout

    state = em.init(jax.random.key(0), train.n_words, train.n_docs, T)
    phi = state.phi
    theta = jax.random.dirichlet(jax.random.key(1), jnp.ones(T), (train.n_docs,)).T.astype(jnp.float32)
    data = layout.prepare(train)
    f = jax.jit(lambda p, t, d: estep.expected_counts(p, t, d))
    P, Th = np.asarray(phi), np.asarray(theta)
    kernels = {"ours": lambda: jax.block_until_ready(f(phi, theta, data))}
    for n in sorted({threads, 1}, reverse=True):
        k = NumbaEStep(train.doc_offsets, train.word_ids, train.counts, train.n_words, n, np.float32)
        kernels[f"numba-{n}"] = (lambda k=k: k(P, Th))
    for g in kernels.values():
        g()
    times = {k: [] for k in kernels}
    for _ in range(rounds):
        for k, g in kernels.items():
            t0 = time.perf_counter()
            g()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


# ------------------------------------------------------------------------------------ report
def machine():
    import jax

    cpu = platform.processor() or "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        mem = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    except (ValueError, OSError):
        pass
    vers = [f"jax {jax.__version__} ({jax.default_backend()})"]
    from importlib import metadata

    for dist in ("numba", "bigartm", "gensim", "scikit-learn", "tomotopy"):
        try:  # versions without importing the packages
            vers.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, {mem} RAM, Python {platform.python_version()}; " + ", ".join(vers)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", nargs="+", default=["kos", "20ng"],
                    help="kos, 20ng, bars, or a corpus path readable by Corpus.load")
    ap.add_argument("--topics", nargs="+", type=int, default=[50, 100, 200])
    ap.add_argument("--systems", nargs="+", default=None,
                    help=f"subset of {' '.join(ALL_SYSTEMS)} (default: all; with --quick: ours)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=5, help="timed passes per system (round-robin)")
    ap.add_argument("--target-passes", type=int, default=20, help="BigARTM passes that set the target perplexity")
    ap.add_argument("--max-passes", type=int, default=200)
    ap.add_argument("--max-seconds", type=float, default=90.0, help="time-to-quality budget per system")
    ap.add_argument("--no-ttq", action="store_true", help="skip the time-to-quality runs")
    ap.add_argument("--sweep", action="store_true", help="also time E-step kernel variants (first corpus)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="seconds-long smoke run on a synthetic corpus")
    ap.add_argument("--out", default=str(HERE / "results" / "bench_em.md"))
    args = ap.parse_args(argv)
    if args.quick:
        args.corpus, args.topics, args.rounds = ["bars"], [10], 2
        args.systems = args.systems or ["ours"]
        args.max_passes, args.target_passes = 30, 10
    args.systems = args.systems or list(ALL_SYSTEMS)
    try:
        import numba  # noqa: F401
    except ImportError:
        args.systems = [s for s in args.systems if s != "numba"]

    lines = [
        "# EM pass benchmark (issue 7)",
        "",
        f"Command: `{' '.join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0]) if sys.argv[0] else 'bench_em.py'] + (argv if argv is not None else sys.argv[1:]))}`",
        "",
        f"Machine: {machine()}.  Load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        f"Threads: {args.threads} for numba, BigARTM (num_processors), scikit-learn (n_jobs), tomotopy "
        "(workers); XLA uses its own CPU thread pool; gensim is single-process.",
        "",
    ]
    summary = []
    targets = []  # one row per corpus and T: the ratios issue 7 sets targets for
    workroot = tempfile.mkdtemp(prefix="bench_em_")
    for ci, cname in enumerate(args.corpus):
        t0 = time.perf_counter()
        corpus = load_corpus(cname, args.quick)
        train, observed, heldout = split(corpus, args.seed)
        lines += [f"## {cname}: {train.n_docs} training documents, {train.n_words} words, {train.nnz} non-zeros, "
                  f"{train.n_tokens} tokens; {observed.n_docs} test documents (loaded in {time.perf_counter() - t0:.1f} s)", ""]
        print(lines[-2], flush=True)
        for T in args.topics:
            workdir = Path(workroot) / f"{ci}"
            workdir.mkdir(exist_ok=True)
            systems, missing = make_systems(args.systems, train, T, args.threads, args.seed, workdir)
            times = time_passes(systems, args.rounds)
            ours = times.get("ours", (float("nan"),))[0]
            ours10 = times.get("ours-10", (float("nan"),))[0]
            lines += [f"### T = {T}: seconds per pass (median of {args.rounds}, round-robin; min in brackets)", "",
                      "| system | s/pass | ours / theirs | ours-10 / theirs | notes |", "|---|---|---|---|---|"]
            for s in systems:
                med, mn = times[s.name]
                note = f"compile/warm-up {s.compile_s:.1f} s" if s.compile_s else ""
                lines.append(f"| {s.name} | {med:.4f} [{mn:.4f}] | {ours / med:.3f} | {ours10 / med:.3f} | {note} |")
                summary.append((cname, T, s.name, med, ours / med))
            for name, why in missing.items():
                lines.append(f"| {name} | - | - | - | {why} |")
            lines.append("")
            print("\n".join(lines[-len(systems) - len(missing) - 4:]), flush=True)

            tgt = {"corpus": cname, "T": T}
            if "ours" in times:
                for other, key in (("bigartm-1", "pass_vs_bigartm1"), ("numba", "pass_vs_numba")):
                    if other in times:
                        tgt[key] = ours / times[other][0]
            if "ours-10" in times and "bigartm-10" in times:
                tgt["pass10_vs_bigartm10"] = ours10 / times["bigartm-10"][0]
            targets.append(tgt)
            if "numba" in args.systems and "ours" in args.systems:
                es = numba_estep_ms(train, T, args.threads, args.rounds)
                tgt["estep_vs_numba"] = es["ours"] / es[f"numba-{args.threads}"]
                lines += [f"E-step only (ms, median of {args.rounds}): " + ", ".join(f"{k} {v:.1f}" for k, v in es.items())
                          + "; ratios ours/numba: " + ", ".join(f"{k} {es['ours'] / v:.2f}" for k, v in es.items() if k != "ours"), ""]
                print(lines[-2], flush=True)
            if "ours" in args.systems:
                m = memory_report(train, T)
                tgt["memory"] = m["kernel"][2]
                lines += [f"Peak memory of our compiled step in a fit's loop (state updated in place): "
                          f"{m['in_place'][0]:.1f} MB = {m['in_place'][1]:.2f}x the {m['must_MB']:.1f} MB of counts + Φ + Θ "
                          f"(temporaries {m['in_place'][2]:.1f} MB); called from Python with the old state kept: "
                          f"{m['plain'][0]:.1f} MB = {m['plain'][1]:.2f}x.  With the C++ kernel's per-thread ∂L/∂Φ "
                          f"slabs, kept outside XLA ({m['kernel'][0]:.1f} MB at {m['kernel'][1]} threads): "
                          f"{m['kernel'][2]:.2f}x.", ""]
                print(lines[-2], flush=True)

            if not args.no_ttq:
                by_name = {s.name: s for s in systems}
                ref = by_name.get("bigartm-10")
                if ref is not None:
                    res = run_to_target(ref, 0.0, observed, heldout, args.target_passes, float("inf"))
                    target = res["trace"][-1]
                    base_time = res["seconds"]
                    src = f"BigARTM (num_document_passes=10) after {args.target_passes} passes"
                else:
                    ours_sys = by_name["ours"]
                    res = run_to_target(ours_sys, 0.0, observed, heldout, args.target_passes, float("inf"))
                    target, base_time = res["trace"][-1], res["seconds"]
                    src = f"ours after {args.target_passes} passes (BigARTM not run)"
                lines += [f"### T = {T}: time to hold-out perplexity {target:.2f} ({src}: {base_time:.2f} s)", "",
                          "| system | passes | seconds | reached | fastest ours / theirs | best perplexity |",
                          "|---|---|---|---|---|---|"]
                rows = {}
                for s in systems:
                    if s is ref:
                        rows[s.name] = {"reached": True, "passes": args.target_passes, "seconds": base_time,
                                        "perplexity": target}
                        continue
                    rows[s.name] = run_to_target(s, target, observed, heldout, args.max_passes, args.max_seconds)
                reached_ours = [r for n, r in rows.items() if n.startswith("ours") and r["reached"]]
                o = min(reached_ours, key=lambda r: r["seconds"]) if reached_ours else None
                if ref is not None:
                    tgt["ttq_vs_bigartm10"] = (o["seconds"] / base_time) if o else float("inf")
                for name, r in rows.items():
                    ratio = (o["seconds"] / r["seconds"]) if (o and r["reached"]) else float("nan")
                    lines.append(f"| {name} | {r['passes']} | {r['seconds']:.2f} | {'yes' if r['reached'] else 'no'} | "
                                 f"{ratio:.3f} | {r['perplexity']:.2f} |")
                lines.append("")
                print("\n".join(lines[-len(rows) - 4:]), flush=True)
            del systems
        if args.sweep and ci == 0:
            lines += [f"### E-step kernel variants on {cname} (ms, median of {max(args.rounds, 5)}, round-robin)", "",
                      "| variant | " + " | ".join(f"T = {T}" for T in args.topics) + " |",
                      "|---|" + "---|" * len(args.topics)]
            res = {T: kernel_sweep(train, T, max(args.rounds, 5)) for T in args.topics}
            for k in res[args.topics[0]]:
                lines.append(f"| {k} | " + " | ".join(f"{res[T][k]:.1f}" for T in args.topics) + " |")
            lines.append("")
            print("\n".join(lines[-len(res[args.topics[0]]) - 4:]), flush=True)
    cols = [("pass_vs_bigartm1", "ours / bigartm-1 per pass (<= 0.25)"),
            ("pass_vs_numba", "ours / numba per pass (<= 2)"),
            ("estep_vs_numba", f"ours / numba-{args.threads} E-step (<= 2)"),
            ("pass10_vs_bigartm10", "ours-10 / bigartm-10 per pass"),
            ("ttq_vs_bigartm10", "fastest ours / bigartm-10 to its 20-pass perplexity (<= 0.25)"),
            ("memory", "step peak + kernel slabs / (counts + Φ + Θ) (<= 2)")]
    cols = [c for c in cols if any(c[0] in t for t in targets)]
    if cols:
        lines += ["## Targets of issue 7 (ratios from the tables above)", "",
                  "| corpus | T | " + " | ".join(c[1] for c in cols) + " |", "|---|---|" + "---|" * len(cols)]
        for t in targets:
            cells = [f"{t[k]:.2f}" if k in t else "-" for k, _ in cols]
            lines.append(f"| {t['corpus']} | {t['T']} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return summary


if __name__ == "__main__":
    main()
