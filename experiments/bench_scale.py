"""Scale benchmark at NYTimes size (issue 27, item 2): wall time, peak memory and held-out
perplexity of every topicjax family against BigARTM, tomotopy, gensim and the fused numba
reference, one process per system.

The corpus is ``topicjax.datasets.make_lda_corpus(preset="nytimes", n_topics=100, seed=0)``
(300,000 documents, 102,660 words, ~67 M non-zeros, ~99 M tokens, planted topics), generated once
in this process and cached in ``--workdir`` as the CSR arrays of a training part and of
``--heldout`` held-out documents (``.npz``), with the generator's true Φ (``phi_true.npy``).  Each
system then runs in a fresh Python process (``python bench_scale.py --child ...``) that loads the
cache, so no system's memory or imports count against another's:

* ``corpus``: ``Corpus.from_sparse`` of the training CSR matrix; ``uci`` (with ``--uci``):
  ``Corpus.from_uci`` of a UCI docword file written once to the workdir;
* ``plsa``, ``artm`` (smoothing of Φ, sparsing of Θ), ``ttmm``, ``ptm``, ``lida``
  (``variant="lda"``, the per-document-exact parallel sampler without MH steps, which runs in
  the compiled kernel on CPU, by its sparse draw since session 23 (earlier tables: the dense
  one), fixed α and β as tomotopy's): the Corpus built from the arrays, a
  1-iteration fit (compilation included), then a fit of ``--iterations`` iterations whose
  per-iteration time is the median of ``history_[i]["seconds"]``;
* ``plsa-store``: PLSA by ``topicjax.scale.offline.fit_store``, streamed from a batch store of
  10,000 documents per batch written once from the cached arrays into the workdir;
* ``bigartm-offline`` (``fit_offline``, ``num_document_passes=--doc-passes``,
  ``num_processors=--threads``, Θ kept between passes: one EM pass per collection pass) and
  ``bigartm-online`` (``fit_online`` over batches of ``--online-batch`` documents, one update per
  batch, τ0 = 1024, κ = 0.7, the same document passes), each with its own ``BatchVectorizer``
  conversion of the UCI file timed as a stage of its own;
* ``tomotopy-1``, ``tomotopy-2``: ``LDAModel`` (α = 0.1, η = 0.01, fixed) with 1 and 2 workers;
  building the model (``add_doc`` and the initialisation) is timed apart from the sweeps;
* ``numba-1``, ``numba-2``: the fused numba PLSA pass of ``experiments/numba_reference.py`` with
  1 and 2 threads (compilation and first pass, then per pass);
* ``gensim``: ``LdaMulticore`` (one pass, ``workers = --threads - 1``, at least 1), stopped after
  ``--gensim-cap`` seconds of training and then reported as "did not finish".

``--systems`` takes these names or the groups ``bigartm``, ``tomotopy``, ``numba``, ``ours``
and ``all`` (the default).

Time: wall seconds measured inside the child around each stage.  Memory: the child's peak resident
set (``ru_maxrss``) after each stage, and the whole child's peak from ``/usr/bin/time -v`` where
that exists (gensim's workers are separate processes: their largest peak is given in the notes).
Both grow monotonically, so a stage's peak includes what earlier stages of that child held (the
loaded arrays, the Corpus); the notes give the resident set before the stage.

Quality: every child writes its Φ (words x topics, float32 ``.npy``) to the workdir, and this
process evaluates all of them with one numpy procedure (:func:`completion_perplexity`): each
held-out document's tokens are split at random in two halves; θ is fitted on the first half by
``--fold-in-iter`` EM iterations with Φ fixed, and the perplexity is that of the second half.  The
evaluator is checked on the generator's true Φ (it must beat a uniform Φ, whose perplexity is the
vocabulary size, and come near the perplexity of the true Φ with the true θ).

Output: a markdown table printed, and written to ``--out`` (or, with ``--write``, to
``experiments/results/bench_scale.md``; ``bench_scale_quick.md`` with ``--quick``) with the command
line, the versions, the load average at the start and end, the date and the machine.  The table is
one section of that file, between ``<!-- bench_scale.py: begin/end -->`` markers: the rest of the
file (the streaming results of issue 28) is kept.  Timings mean something only on a quiet
machine: writing results is refused when the 1-minute load at the start is >= 1 (``--force``
overrides).

    python experiments/bench_scale.py --write                     # NYTimes size, every system (hours)
    python experiments/bench_scale.py --systems corpus plsa bigartm-offline --iterations 5
    python experiments/bench_scale.py --quick                     # 3,000 documents, about a minute
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "bench_scale.md"
QUICK_OUT = HERE / "results" / "bench_scale_quick.md"  # --quick --write never replaces the real table

OURS = ("plsa", "artm", "ttmm", "ptm", "lida")
SYSTEMS = ("corpus", "uci") + OURS + ("plsa-store",) + ("bigartm-offline", "bigartm-online", "tomotopy-1", "tomotopy-2",
                                      "numba-1", "numba-2", "gensim")
GROUPS = {"bigartm": ("bigartm-offline", "bigartm-online"), "tomotopy": ("tomotopy-1", "tomotopy-2"),
          "numba": ("numba-1", "numba-2"), "ours": OURS}
# the module each peer needs (a system whose module is missing is reported, not run)
NEEDS = {"bigartm-offline": "artm", "bigartm-online": "artm", "tomotopy-1": "tomotopy", "tomotopy-2": "tomotopy",
         "numba-1": "numba", "numba-2": "numba", "gensim": "gensim"}
ALPHA, BETA = 0.1, 0.01  # the LDA samplers' fixed Dirichlet parameters (LIDA "lda" and tomotopy)
GIB = 2.0 ** 30


# ============================================================================ the corpus cache
def corpus_tag(a) -> str:
    return f"nytimes_D{a.n_docs}_W{a.n_words}_L{a.mean_length:g}_T{a.topics}_s{a.seed}_h{a.heldout}"


def prepare_corpus(a, workdir: Path) -> Path:
    """Generate the corpus once and cache it: ``<tag>.npz`` (training and held-out CSR arrays,
    the held-out documents' true θ) and ``<tag>.phi_true.npy``.  Returns the ``.npz`` path."""
    path = workdir / f"{corpus_tag(a)}.npz"
    if path.exists():
        return path
    if not 0 < a.heldout < a.n_docs:
        raise SystemExit(f"--heldout {a.heldout} must be between 1 and {a.n_docs - 1} documents")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from topicjax import datasets

    t0 = time.perf_counter()
    corpus, phi, theta = datasets.make_lda_corpus(a.n_docs, a.n_words, a.mean_length, n_topics=a.topics,
                                                  seed=a.seed, preset="nytimes")
    D = corpus.n_docs
    test = np.zeros(D, bool)
    test[np.random.default_rng(a.seed).choice(D, a.heldout, replace=False)] = True
    indptr = np.asarray(corpus.doc_offsets, np.int64)
    per_doc = np.diff(indptr)
    on_test = np.repeat(test, per_doc)  # entry -> its document is held out (entries are sorted by document)

    def part(rows, mask):
        return dict(indptr=np.concatenate([[0], np.cumsum(per_doc[rows])]).astype(np.int64),
                    indices=np.asarray(corpus.word_ids[mask], np.int32), data=np.asarray(corpus.counts[mask], np.int32))

    train, held = part(~test, ~on_test), part(test, on_test)
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez(tmp, n_words=corpus.n_words, n_docs=D, **{f"train_{k}": v for k, v in train.items()},
             **{f"test_{k}": v for k, v in held.items()}, theta_test=np.asarray(theta[:, test], np.float32))
    np.save(workdir / f"{corpus_tag(a)}.phi_true.npy", np.asarray(phi, np.float32))
    os.replace(tmp, path)  # the cache exists only once complete
    print(f"corpus generated in {time.perf_counter() - t0:.1f} s: {D:,} documents, {corpus.n_words:,} words, "
          f"{corpus.nnz:,} non-zeros, {corpus.n_tokens:,} tokens -> {path}", flush=True)
    return path


def write_uci_cache(cache: Path, folder: Path, chunk: int = 1 << 20) -> Path:
    """The training part as UCI files ``docword.train.txt`` / ``vocab.train.txt`` (words
    ``w0, w1, ...`` as the generator names them), written in chunks of entries so that the text
    of the whole corpus is never held in memory; kept once complete.  Returns the docword path."""
    docword = folder / "docword.train.txt"
    if docword.exists():
        return docword
    folder.mkdir(parents=True, exist_ok=True)
    z = np.load(cache)
    indptr, words, counts, W = z["train_indptr"], z["train_indices"], z["train_data"], int(z["n_words"])
    D = indptr.size - 1
    t0 = time.perf_counter()
    (folder / "vocab.train.txt").write_text("".join(f"w{j}\n" for j in range(W)), encoding="utf-8")
    docs = np.repeat(np.arange(1, D + 1, dtype=np.int64), np.diff(indptr))
    tmp = folder / "docword.train.txt.tmp"
    with open(tmp, "w", encoding="ascii") as fh:
        fh.write(f"{D}\n{W}\n{words.size}\n")
        for lo in range(0, words.size, chunk):
            sl = slice(lo, lo + chunk)
            fh.write("".join(f"{d} {w} {c}\n" for d, w, c in
                             zip(docs[sl].tolist(), (words[sl] + 1).tolist(), counts[sl].tolist())))
    os.replace(tmp, docword)
    print(f"UCI file written in {time.perf_counter() - t0:.1f} s: {docword}", flush=True)
    return docword


# ============================================================================ the evaluator
def completion_split(indptr, indices, data, seed=0):
    """Each token of each document to the observed half with probability 1/2 (ARTM sec. 5):
    ``(observed, heldout)`` count arrays over the same entries."""
    observed = np.random.default_rng(seed).binomial(np.asarray(data, np.int64), 0.5)
    return observed, np.asarray(data, np.int64) - observed


def _smoothed(phi, known, eps):
    """Φ restricted to the words ``known`` from training, each column renormalised over them and
    mixed with the uniform distribution over them with weight ``eps`` (so no held-out token has
    probability 0; the same for every system).  float64 (W, T)."""
    phi = np.where(known[:, None], np.asarray(phi, np.float64), 0.0)
    col = phi.sum(0)
    phi = np.divide(phi, col, out=np.zeros_like(phi), where=col > 0)
    return np.where(known[:, None], (1.0 - eps) * phi + eps / known.sum(), 0.0)


def completion_perplexity(phi, indptr, indices, data, known, *, n_iter=50, seed=0, eps=1e-6, theta=None,
                          chunk_docs=500):
    """Held-out perplexity by document completion with Φ fixed, in numpy.

    ``phi``: (W, T) topics; ``indptr, indices, data``: the held-out documents (CSR); ``known``:
    bool (W,), the words of the training corpus (the held-out tokens of other words are dropped,
    as no trained Φ can score them).  Each document's tokens are split in halves
    (:func:`completion_split`); θ_d starts uniform and takes ``n_iter`` EM steps on the first half,
    ``θ_td ← θ_td Σ_w n_dw φ_wt / p_dw / n_d`` with ``p_dw = Σ_t φ_wt θ_td``; the result is
    ``exp(-Σ n'_dw ln p_dw / Σ n'_dw)`` over the second half.  ``theta`` (T, D) given instead
    skips the fold-in (the oracle with the true θ).  Returns ``(perplexity, zero_tokens)``, the
    second being the held-out tokens whose probability under the unsmoothed Φ is 0.
    """
    import scipy.sparse as sp

    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices, np.int64)
    obs, held = completion_split(indptr, indices, data, seed)
    keep = known[indices]
    obs, held = np.where(keep, obs, 0), np.where(keep, held, 0)
    phi = np.asarray(phi, np.float64)
    T = phi.shape[1]
    ph = _smoothed(phi, known, eps)
    raw = np.where(known[:, None], phi, 0.0)
    D = indptr.size - 1
    total, n_held, zero = 0.0, 0, 0
    for d0 in range(0, D, chunk_docs):
        d1 = min(D, d0 + chunk_docs)
        lo, hi = indptr[d0], indptr[d1]
        ptr = indptr[d0:d1 + 1] - lo
        rows = np.repeat(np.arange(d1 - d0), np.diff(ptr))
        w = indices[lo:hi]
        o, h = obs[lo:hi].astype(np.float64), held[lo:hi].astype(np.float64)
        pw = ph[w]  # (entries, T): Φ is fixed, gathered once
        if theta is None:
            n_d = np.bincount(rows, o, minlength=d1 - d0)
            th = np.full((d1 - d0, T), 1.0 / T)
            for _ in range(n_iter):
                p = np.einsum("nt,nt->n", pw, th[rows])
                r = sp.csr_matrix((np.divide(o, p, out=np.zeros_like(o), where=p > 0), w, ptr),
                                  shape=(d1 - d0, ph.shape[0]))
                # θ ← θ ⊙ (R Φ) / n_d; documents with no observed token keep the uniform θ
                th = np.where(n_d[:, None] > 0, th * np.asarray(r @ ph) / np.maximum(n_d, 1)[:, None], th)
        else:
            th = np.asarray(theta, np.float64)[:, d0:d1].T
            th = th / th.sum(1, keepdims=True)
        sel = h > 0
        p = np.einsum("nt,nt->n", pw[sel], th[rows[sel]])
        total += float(np.sum(h[sel] * np.log(p)))
        n_held += int(h[sel].sum())
        p_raw = np.einsum("nt,nt->n", raw[w[sel]], th[rows[sel]])
        zero += int(h[sel][p_raw <= 0].sum())
    return float(np.exp(-total / max(n_held, 1))), zero


# ============================================================================ the children
def _peak() -> int:
    """Peak resident set of this process so far, bytes (Linux reports kilobytes)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss() -> int | None:
    """Current resident set of this process, bytes (None where /proc is absent)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class Stages:
    """The stages of one child: wall seconds, per-iteration seconds, peak and prior RSS, notes."""

    def __init__(self):
        self.rows = []

    def add(self, stage, wall, per_iter=None, note="", rss_before=None):
        self.rows.append(dict(stage=stage, wall_s=wall, per_iter_s=per_iter, peak=_peak(), rss_before=rss_before,
                              note=note))


def _load(cfg):
    z = np.load(cfg["cache"])
    return {k: z[k] for k in ("train_indptr", "train_indices", "train_data", "n_words")}


def _matrix(z):
    import scipy.sparse as sp

    D = z["train_indptr"].size - 1
    return sp.csr_matrix((z["train_data"], z["train_indices"], z["train_indptr"]), shape=(D, int(z["n_words"])))


def _save_phi(cfg, phi):
    np.save(cfg["phi"], np.ascontiguousarray(phi, np.float32))


def child_corpus(cfg, st):
    import topicjax as tj

    z = _load(cfg)
    m = _matrix(z)
    before = _rss()
    t0 = time.perf_counter()
    corpus = tj.Corpus.from_sparse(m)
    wall = time.perf_counter() - t0
    arrays = sum(a.nbytes for a in (corpus.doc_ids, corpus.word_ids, corpus.counts))
    st.add("Corpus.from_sparse", wall, note=f"its arrays {arrays / 2**20:.1f} MiB, {corpus.nnz:,} non-zeros",
           rss_before=before)


def child_uci(cfg, st):
    import topicjax as tj

    before = _rss()
    t0 = time.perf_counter()
    corpus = tj.Corpus.from_uci(cfg["uci"], vocab_path=str(Path(cfg["uci"]).with_name("vocab.train.txt")))
    wall = time.perf_counter() - t0
    arrays = sum(a.nbytes for a in (corpus.doc_ids, corpus.word_ids, corpus.counts))
    st.add("Corpus.from_uci", wall, note=f"its arrays {arrays / 2**20:.1f} MiB, {corpus.nnz:,} non-zeros",
           rss_before=before)


def _our_model(system, T, n_iter, cfg):
    import topicjax as tj
    from topicjax import regularizers as R

    common = dict(max_iter=n_iter, random_state=0, progress=False)
    if system == "plsa":
        return tj.PLSA(T, **common)
    if system == "artm":
        return tj.ARTM(T, regularizers=[(R.smooth_phi(), 0.01), (R.sparse_theta(), 0.1)], overregularized="keep",
                       **common)
    if system == "ttmm":
        return tj.TTMM(T, n_themes=cfg["themes"], **common)
    if system == "ptm":
        return tj.PTM(T, **common)
    if system == "lida":
        return tj.LIDA(T, variant="lda", sampler="parallel", mh_steps=0, alpha=ALPHA, beta=BETA, sample_hyper=False,
                       eval_every=0, **common)
    raise ValueError(system)


def child_ours(cfg, st):
    import topicjax as tj

    system, T, n = cfg["system"], cfg["topics"], cfg["iterations"]
    z = _load(cfg)
    m = _matrix(z)
    before = _rss()
    t0 = time.perf_counter()
    corpus = tj.Corpus.from_sparse(m)
    st.add("Corpus.from_sparse", time.perf_counter() - t0, rss_before=before)
    del m, z
    before = _rss()
    t0 = time.perf_counter()
    _our_model(system, T, 1, cfg).fit(corpus)
    st.add("1-iteration fit", time.perf_counter() - t0, note="compilation included", rss_before=before)
    before = _rss()
    t0 = time.perf_counter()
    model = _our_model(system, T, n, cfg).fit(corpus)
    wall = time.perf_counter() - t0
    secs = [float(h["seconds"]) for h in model.history_ if "seconds" in h]
    per = statistics.median(secs) if secs else wall / max(model.n_iter_, 1)
    note = f"{model.n_iter_} iterations; median of history_ seconds"
    if system == "lida":
        from topicjax.lida import kernel

        try:
            path = "the compiled C++ kernel" if kernel.use_kernel(model.config_) else "the XLA sweep"
        except Exception as exc:  # noqa: BLE001 - a note only: say why it is unknown
            path = f"sweep path unknown ({exc})"
        note += f"; {corpus.n_tokens / per / 1e6:.2f} M tokens/s; {path}"
    st.add(f"fit, {n} iterations", wall, per, note, rss_before=before)
    _save_phi(cfg, model.phi_)


def _write_batch_store(cfg, folder: str):
    """The store of ``plsa-store``: the cached training arrays in batches of 10,000 documents
    (run in a process of its own, so the loaded arrays do not count in the fit's peak)."""
    import topicjax as tj
    from topicjax.scale.store import write_store

    m = _matrix(_load(cfg))
    step = 10_000
    write_store((tj.Corpus.from_sparse(m[a:a + step]) for a in range(0, m.shape[0], step)), folder, batch_size=step)


def child_store(cfg, st):
    import multiprocessing

    from topicjax.scale.offline import fit_store
    from topicjax.scale.store import BatchStore

    T, n = cfg["topics"], cfg["iterations"]
    folder = Path(cfg["workdir"]) / f"store_{Path(cfg['cache']).stem}"
    t0 = time.perf_counter()
    if not (folder / "meta.json").exists():
        proc = multiprocessing.get_context("spawn").Process(target=_write_batch_store, args=(cfg, str(folder)))
        proc.start()
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"writing the batch store {folder} failed (exit code {proc.exitcode})")
        st.add("write_store (own process)", time.perf_counter() - t0, note="batches of 10,000 documents")
    store = BatchStore(folder)
    before = _rss()
    t0 = time.perf_counter()
    fit_store(store, T, max_iter=1, random_state=0, progress=False)
    st.add("1-iteration fit", time.perf_counter() - t0, note="compilation included", rss_before=before)
    before = _rss()
    t0 = time.perf_counter()
    model = fit_store(store, T, max_iter=n, random_state=0, progress=False)
    wall = time.perf_counter() - t0
    secs = [float(h["seconds"]) for h in model.history_]
    per = statistics.median(secs) if secs else wall / max(model.n_iter_, 1)
    st.add(f"fit, {n} iterations", wall, per, f"{model.n_iter_} iterations over {store.n_batches} batches; median "
           "of history_ seconds", rss_before=before)
    _save_phi(cfg, model.phi_)


def child_numba(cfg, st):
    sys.path.insert(0, str(HERE))
    import numba_reference

    threads, T, n = int(cfg["system"].rsplit("-", 1)[1]), cfg["topics"], cfg["iterations"]
    z = _load(cfg)
    W = int(z["n_words"])
    D = z["train_indptr"].size - 1
    rng = np.random.default_rng(0)
    phi = rng.random((W, T), dtype=np.float32) + np.float32(0.01)
    phi /= phi.sum(0, keepdims=True)
    theta_t = np.full((D, T), 1.0 / T, np.float32)
    before = _rss()
    t0 = time.perf_counter()
    k = numba_reference.NumbaEStep(z["train_indptr"], z["train_indices"], z["train_data"], W, threads)
    _, phi, theta_t = k.em_pass(phi, theta_t)
    st.add("compilation + 1 pass", time.perf_counter() - t0, rss_before=before)
    times = []
    before = _rss()
    for _ in range(n):
        t0 = time.perf_counter()
        _, phi, theta_t = k.em_pass(phi, theta_t)
        times.append(time.perf_counter() - t0)
    st.add(f"{n} passes", sum(times), statistics.median(times), f"{threads} thread(s); median pass",
           rss_before=before)
    _save_phi(cfg, phi)


def _bigartm_phi(model, W):
    """BigARTM's Φ as a (W, T) array in our word order (its tokens are the UCI vocabulary's
    ``w<j>``; words it never saw stay 0)."""
    values, tokens, _ = model.get_phi_dense()
    phi = np.zeros((W, values.shape[1]), np.float32)
    phi[np.array([int(t[1:]) for t in tokens], np.int64)] = values
    return phi


def child_bigartm(cfg, st):
    import artm

    online = cfg["system"] == "bigartm-online"
    target = Path(cfg["workdir"]) / f"bigartm_batches_{'online' if online else 'offline'}"
    shutil.rmtree(target, ignore_errors=True)  # our own folder of the previous run: converted afresh
    before = _rss()
    t0 = time.perf_counter()
    bv = artm.BatchVectorizer(data_path=str(Path(cfg["uci"]).parent), data_format="bow_uci", collection_name="train",
                              target_folder=str(target), batch_size=cfg["online_batch"] if online else 1000)
    st.add("BatchVectorizer (UCI -> batches)", time.perf_counter() - t0,
           note=f"batches of {cfg['online_batch'] if online else 1000} documents", rss_before=before)
    n, dp = cfg["iterations"], cfg["doc_passes"]
    before = _rss()
    t0 = time.perf_counter()
    if online:
        model = artm.ARTM(num_topics=cfg["topics"], dictionary=bv.dictionary, num_document_passes=dp,
                          num_processors=cfg["threads"], seed=1)
        run = lambda: model.fit_online(batch_vectorizer=bv, tau0=1024.0, kappa=0.7, update_every=1)  # noqa: E731
    else:
        model = artm.ARTM(num_topics=cfg["topics"], dictionary=bv.dictionary, num_document_passes=dp,
                          cache_theta=True, reuse_theta=True, num_processors=cfg["threads"], seed=1)
        run = lambda: model.fit_offline(batch_vectorizer=bv, num_collection_passes=1)  # noqa: E731
    run()
    st.add("model + 1 pass", time.perf_counter() - t0, rss_before=before)
    times = []
    before = _rss()
    for _ in range(n):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    how = "fit_online, one update per batch, tau0=1024, kappa=0.7" if online else "fit_offline, Θ kept between passes"
    st.add(f"{n} passes", sum(times), statistics.median(times),
           f"{how}; num_document_passes={dp}, num_processors={cfg['threads']}; median pass", rss_before=before)
    _save_phi(cfg, _bigartm_phi(model, int(np.load(cfg["cache"])["n_words"])))


def child_tomotopy(cfg, st):
    import tomotopy as tp

    workers, T, n = int(cfg["system"].rsplit("-", 1)[1]), cfg["topics"], cfg["iterations"]
    z = _load(cfg)
    W = int(z["n_words"])
    indptr, words, counts = z["train_indptr"], z["train_indices"], z["train_data"]
    names = np.array([f"w{j}" for j in range(W)], dtype=object)
    before = _rss()
    t0 = time.perf_counter()
    mdl = tp.LDAModel(k=T, alpha=ALPHA, eta=BETA, seed=0)
    for d in range(indptr.size - 1):
        lo, hi = indptr[d], indptr[d + 1]
        mdl.add_doc(names[np.repeat(words[lo:hi], counts[lo:hi])].tolist())
    mdl.optim_interval = 0  # fixed α and β, as LIDA's "lda" run here
    mdl.train(0, workers=workers)  # the initial assignment
    n_tokens = int(counts.sum(dtype=np.int64))
    st.add("model building (add_doc + init)", time.perf_counter() - t0, rss_before=before)
    times = []
    before = _rss()
    for _ in range(n):
        t0 = time.perf_counter()
        mdl.train(1, workers=workers)
        times.append(time.perf_counter() - t0)
    per = statistics.median(times)
    st.add(f"{n} sweeps", sum(times), per, f"{workers} worker(s); {n_tokens / per / 1e6:.2f} M tokens/s; median sweep",
           rss_before=before)
    # Φ as the LDA samplers' point estimate (n_wk + β) / (n_k + W β) over the whole vocabulary
    rows = np.array([int(v[1:]) for v in mdl.used_vocabs], np.int64)
    n_wk = np.zeros((W, T))
    for k in range(T):
        n_wk[rows, k] = np.asarray(mdl.get_topic_word_dist(k, normalize=False)) - BETA
    n_wk = np.maximum(n_wk, 0.0)
    _save_phi(cfg, (n_wk + BETA) / (n_wk.sum(0) + W * BETA))


class _Capped(Exception):
    pass


def child_gensim(cfg, st):
    import resource

    from gensim.matutils import Sparse2Corpus
    from gensim.models import LdaMulticore

    z = _load(cfg)
    W = int(z["n_words"])
    docs = Sparse2Corpus(_matrix(z), documents_columns=False)  # streams the CSR rows, no copy of them
    workers = max(1, cfg["threads"] - 1)

    def alarm(signum, frame):
        raise _Capped

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(max(1, int(cfg["gensim_cap"])))
    before = _rss()
    t0 = time.perf_counter()
    try:
        lda = LdaMulticore(docs, num_topics=cfg["topics"], id2word={j: f"w{j}" for j in range(W)}, workers=workers,
                           passes=1, chunksize=2000, random_state=0)
    except _Capped:
        import multiprocessing

        for worker in multiprocessing.active_children():  # LdaMulticore's pool, started by this process
            worker.terminate()
        st.add("1 pass", time.perf_counter() - t0, note=f"did not finish within --gensim-cap {cfg['gensim_cap']} s",
               rss_before=before)
        st.rows[-1]["did_not_finish"] = True
        return
    finally:
        signal.alarm(0)
    wall = time.perf_counter() - t0
    worker_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    st.add("1 pass", wall, wall, f"LdaMulticore, workers={workers}, chunksize=2000; largest worker process "
           f"{worker_peak / GIB:.2f} GiB beside this peak", rss_before=before)
    _save_phi(cfg, lda.get_topics().T)


CHILDREN = {"corpus": child_corpus, "uci": child_uci, **{s: child_ours for s in OURS}, "plsa-store": child_store,
            "bigartm-offline": child_bigartm, "bigartm-online": child_bigartm, "tomotopy-1": child_tomotopy,
            "tomotopy-2": child_tomotopy, "numba-1": child_numba, "numba-2": child_numba, "gensim": child_gensim}


def child_main(cfg_json: str):
    """Run one system (in its own process) and write its stages as JSON to ``cfg["result"]``."""
    cfg = json.loads(cfg_json)
    st = Stages()
    out = {"system": cfg["system"], "import_peak": _peak()}
    try:
        CHILDREN[cfg["system"]](cfg, st)
    finally:
        out["stages"] = st.rows
        Path(cfg["result"]).write_text(json.dumps(out), encoding="utf-8")
    if any(r.get("did_not_finish") for r in st.rows):
        # an interrupted LdaMulticore leaves queue threads that a normal exit would wait for
        sys.stdout.flush()
        os._exit(0)


# ============================================================================ the parent
def expand_systems(names):
    out = []
    for n in names:
        for s in (SYSTEMS if n == "all" else GROUPS.get(n, (n,))):
            if s not in SYSTEMS:
                raise SystemExit(f"unknown system {s!r}: choose from {', '.join(SYSTEMS)} or the groups "
                                 f"{', '.join(GROUPS)}, all")
            if s not in out:
                out.append(s)
    return out


def _missing_module(system):
    import importlib.util

    mod = NEEDS.get(system)
    return mod if mod and importlib.util.find_spec(mod) is None else None


def _time_v_peak(path: Path):
    try:
        for line in path.read_text(errors="replace").splitlines():
            if "Maximum resident set size" in line:
                return int(line.rsplit(":", 1)[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def run_child(system, cfg, workdir: Path, timeout, script: Path = Path(__file__).resolve()):
    """Run ``system`` in a fresh process (``script --child CFG``, under ``/usr/bin/time -v`` where
    it exists); returns the child's result dict with ``failed`` (a line of why) or its stages, and
    ``time_v_peak``.  ``bench_online.py`` starts its own children through it."""
    cfg = dict(cfg, system=system, result=str(workdir / f"result_{system}.json"),
               phi=str(workdir / f"phi_{system}.npy"))
    for key in ("result", "phi"):
        Path(cfg[key]).unlink(missing_ok=True)
    threads = int(system.rsplit("-", 1)[1]) if system.startswith("numba-") else cfg["threads"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               TOPICJAX_THREADS=str(cfg["threads"]), NUMBA_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(cfg["threads"]))
    cmd = [sys.executable, str(script), "--child", json.dumps(cfg)]
    tv = workdir / f"time_{system}.txt"
    tv.unlink(missing_ok=True)
    if Path("/usr/bin/time").exists():
        cmd = ["/usr/bin/time", "-v", "-o", str(tv)] + cmd
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)  # its own group: a timeout ends gensim's workers too
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return {"system": system, "failed": f"killed after {timeout:.0f} s", "output": output}
    res = json.loads(Path(cfg["result"]).read_text()) if Path(cfg["result"]).exists() else {"system": system,
                                                                                           "stages": []}
    res.update(process_s=time.perf_counter() - t0, time_v_peak=_time_v_peak(tv), output=output)
    if proc.returncode != 0:
        last = [l for l in output.strip().splitlines() if l.strip()]
        res["failed"] = f"exit {proc.returncode}: {last[-1] if last else 'no output'}"
    if Path(cfg["phi"]).exists():
        res["phi"] = cfg["phi"]
    return res


def evaluate(phi_path, held, known, a):
    phi = np.load(phi_path)
    return completion_perplexity(phi, held["indptr"], held["indices"], held["data"], known, n_iter=a.fold_in_iter,
                                 seed=a.seed)


def reference_perplexities(cache: Path, a):
    """The evaluator on the generator's truth, each ``(perplexity, zero_tokens)``: ``"true"``
    (the true Φ), ``"uniform"`` (a uniform Φ: the number of training words), ``"oracle"`` (the
    true Φ with the true θ of the held-out documents, no fold-in) and ``"entropy"`` (the
    generator's own perplexity, :func:`generator_perplexity`); also the held-out CSR arrays and the
    mask of training words."""
    z = np.load(cache)
    held = {k: z[f"test_{k}"] for k in ("indptr", "indices", "data")}
    known = np.bincount(z["train_indices"], minlength=int(z["n_words"])) > 0
    phi_true = np.load(cache.with_name(cache.stem + ".phi_true.npy"))
    W, T = phi_true.shape
    out = {"true": completion_perplexity(phi_true, *held.values(), known, n_iter=a.fold_in_iter, seed=a.seed),
           "uniform": completion_perplexity(np.ones((W, T)), *held.values(), known, n_iter=a.fold_in_iter, seed=a.seed),
           "oracle": completion_perplexity(phi_true, *held.values(), known, seed=a.seed, theta=z["theta_test"]),
           "entropy": (generator_perplexity(phi_true, z["theta_test"], _doc_tokens(held)), 0)}
    return out, held, known


def _doc_tokens(csr):
    n = csr["indptr"].size - 1
    return np.bincount(np.repeat(np.arange(n), np.diff(csr["indptr"])), weights=csr["data"], minlength=n)


def generator_perplexity(phi, theta, weights, chunk_docs=100):
    """``exp`` of the generator's entropy per token: each document's word distribution
    ``p_d = Φ θ_d`` has entropy ``H_d = -Σ_w p_dw ln p_dw``; the mean of the ``H_d`` weighted by
    ``weights`` (the documents' tokens) is what a model that knew Φ and every θ_d would pay per
    token, the floor that the evaluator's perplexity of the true Φ should come near."""
    phi = np.asarray(phi, np.float64)
    theta = np.asarray(theta, np.float64)
    weights = np.asarray(weights, np.float64)
    total = 0.0
    for d0 in range(0, theta.shape[1], chunk_docs):
        p = phi @ (theta[:, d0:d0 + chunk_docs] / theta[:, d0:d0 + chunk_docs].sum(0))  # (W, docs)
        h = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=0)
        total += float(h @ weights[d0:d0 + chunk_docs])
    return float(np.exp(total / weights.sum()))


def versions() -> str:
    """Installed versions of the systems measured (read from the package metadata, nothing imported)."""
    from importlib import metadata

    found = []
    for dist in ("topicjax", "jax", "jaxlib", "numpy", "bigartm", "tomotopy", "gensim", "numba"):
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(found) + f", Python {sys.version.split()[0]}"


def machine() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    import platform

    cpu = platform.processor() or platform.machine()
    return f"{platform.node()}, {cores} cores usable (nproc), {mem} memory, {cpu}"


def _fmt(x, spec):
    return "—" if x is None else format(x, spec)


def build_rows(results, perplexities):
    """Table rows: one per stage; the perplexity on each system's last stage; the ratios of the
    per-iteration times to BigARTM offline's per pass and to tomotopy's 2-worker sweep."""
    def per_iter(system):
        r = results.get(system)
        if not r or r.get("failed"):
            return None
        vals = [s["per_iter_s"] for s in r["stages"] if s.get("per_iter_s")]
        return vals[-1] if vals else None

    big, tomo = per_iter("bigartm-offline"), per_iter("tomotopy-2")
    rows = []
    for system, r in results.items():
        if r.get("skipped"):
            rows.append([system, "—", None, None, None, None, None, None, r["skipped"]])
            continue
        stages = r.get("stages", [])
        for i, s in enumerate(stages):
            last = i == len(stages) - 1
            per = s.get("per_iter_s")
            peak = s["peak"]
            note = s.get("note", "")
            if s.get("rss_before") is not None:
                note = (note + "; " if note else "") + f"RSS before {s['rss_before'] / GIB:.2f} GiB"
            if last and r.get("time_v_peak"):
                note += f"; /usr/bin/time -v peak {r['time_v_peak'] / GIB:.2f} GiB"
            ppl = perplexities.get(system) if last else None
            rows.append([system, s["stage"], s["wall_s"], per, peak / GIB, ppl,
                         per / big if per and big else None, per / tomo if per and tomo else None, note])
        if r.get("failed"):
            rows.append([system, "FAILED", None, None, None, None, None, None, r["failed"]])
    return rows


def render(rows, refs, header_lines):
    lines = list(header_lines) + [
        "| system | stage | wall s | per-iteration s | peak RSS GiB | perplexity | x BigARTM offline | "
        "x tomotopy 2 workers | notes |", "|---|---|---|---|---|---|---|---|---|"]
    for system, stage, wall, per, peak, ppl, rb, rt, note in rows:
        ppl_s = "—" if ppl is None else (f"{ppl[0]:.1f}" + (f" ({ppl[1]:,} tokens at p=0)" if ppl[1] else ""))
        lines.append(f"| {system} | {stage} | {_fmt(wall, '.3f')} | {_fmt(per, '.4f')} | {_fmt(peak, '.2f')} | "
                     f"{ppl_s} | {_fmt(rb, '.3f')} | {_fmt(rt, '.3f')} | {note} |")
    tp, up, op, ep = (refs[k][0] for k in ("true", "uniform", "oracle", "entropy"))
    verdict = "passed" if tp < up and 0.9 < tp / ep < 1.5 else "FAILED"
    lines += ["", f"Evaluator check ({verdict}; the same held-out halves): the generator's true Φ {tp:.1f}; a uniform "
              f"Φ {up:.1f} (= the number of training words); the true Φ with the true θ, no fold-in, {op:.1f}; the "
              f"generator's entropy per token (exp of the token-weighted mean entropy of the held-out documents' "
              f"word distributions Φθ_d) {ep:.1f}."]
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- bench_scale.py: begin -->", "<!-- bench_scale.py: end -->"


def write_section(out: Path, text: str, begin: str = BEGIN, end: str = END):
    """Write ``text`` between the markers ``begin``/``end`` (default: this script's) in ``out``,
    keeping whatever else the file holds (``bench_online.py``'s streaming results sit beside the
    NYTimes table): the section is replaced where the markers are, put first otherwise."""
    section = f"{begin}\n{text}{end}\n"
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + section + rest.split(end, 1)[1].lstrip("\n")
    else:
        new = section + ("\n" + old if old else "")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, out)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", nargs="+", default=["all"], help="systems or groups (see above); default all")
    ap.add_argument("--uci", action="store_true", help="also time Corpus.from_uci of a UCI file (system 'uci')")
    ap.add_argument("--iterations", type=int, default=5, help="timed iterations / passes / sweeps per system")
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--themes", type=int, default=20, help="TTMM's themes")
    ap.add_argument("--threads", type=int, default=2, help="threads of every system (numba-k, tomotopy-k: k)")
    ap.add_argument("--doc-passes", type=int, default=1, help="BigARTM's num_document_passes")
    ap.add_argument("--online-batch", type=int, default=10_000, help="documents per BigARTM online batch")
    ap.add_argument("--gensim-cap", type=float, default=1800.0, help="seconds of gensim training before giving up")
    ap.add_argument("--timeout", type=float, default=4 * 3600.0, help="seconds before any child is killed")
    ap.add_argument("--n-docs", type=int, default=None, help="default: the NYTimes preset's 300,000")
    ap.add_argument("--n-words", type=int, default=None, help="default: the NYTimes preset's 102,660")
    ap.add_argument("--mean-length", type=float, default=None, help="default: the NYTimes preset's 332")
    ap.add_argument("--heldout", type=int, default=2000, help="held-out documents for the perplexity")
    ap.add_argument("--fold-in-iter", type=int, default=50, help="EM iterations of the evaluator's fold-in")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/topicjax-bench-scale")
    ap.add_argument("--quick", action="store_true", help="3,000 documents, 5,000 words, T = 20: about a minute")
    ap.add_argument("--out", default=None, help=f"write the table here (default with --write: {DEFAULT_OUT})")
    ap.add_argument("--write", action="store_true", help=f"write the table to {DEFAULT_OUT.relative_to(ROOT)} "
                    f"({QUICK_OUT.relative_to(ROOT)} with --quick)")
    ap.add_argument("--force", action="store_true", help="write results even when the machine is loaded")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.quick:
        a.n_docs = a.n_docs or 3000
        a.n_words = a.n_words or 5000
        a.mean_length = a.mean_length or 150.0
        # the full run's defaults, replaced where the command line left them
        for name, (full, quick) in {"topics": (100, 20), "themes": (20, 5), "iterations": (5, 3),
                                    "heldout": (2000, 300), "gensim_cap": (1800.0, 120.0),
                                    "fold_in_iter": (50, 30)}.items():
            if getattr(a, name) == full:
                setattr(a, name, quick)
    from topicjax.data.synthetic import PRESETS  # noqa: E402  (only the numbers)

    preset = PRESETS["nytimes"]
    a.n_docs = a.n_docs or preset["n_docs"]
    a.n_words = a.n_words or preset["n_words"]
    a.mean_length = a.mean_length or preset["mean_length"]
    for name in ("iterations", "topics", "themes", "threads", "doc_passes", "online_batch", "heldout", "fold_in_iter"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)}")
    return a


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        return child_main(argv[1])
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    a = parse(argv)
    command = "python experiments/bench_scale.py " + " ".join(shlex.quote(x) for x in argv)
    load_start = os.getloadavg()
    out = Path(a.out) if a.out else ((QUICK_OUT if a.quick else DEFAULT_OUT) if a.write else None)
    if out is not None and load_start[0] >= 1 and not a.force:
        print(f"refusing to write {out}: the 1-minute load average is {load_start[0]:.2f} (>= 1), so the timings "
              "would measure the other jobs too; run on a quiet machine, or pass --force", flush=True)
        return None
    systems = expand_systems(a.systems + (["uci"] if a.uci else []))
    workdir = Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {load_start}", flush=True)
    cache = prepare_corpus(a, workdir)
    cfg = dict(cache=str(cache), workdir=str(workdir), topics=a.topics, themes=a.themes, iterations=a.iterations,
               threads=a.threads, doc_passes=a.doc_passes, online_batch=a.online_batch, gensim_cap=a.gensim_cap)
    if any(s in systems for s in ("uci", "bigartm-offline", "bigartm-online")):
        cfg["uci"] = str(write_uci_cache(cache, workdir / f"uci_{corpus_tag(a)}"))
    results = {}
    for system in systems:
        missing = _missing_module(system)
        if missing:
            results[system] = {"system": system, "skipped": f"not run: `import {missing}` fails here"}
            print(f"{system}: skipped ({missing} is not installed)", flush=True)
            continue
        timeout = a.gensim_cap + 600 if system == "gensim" else a.timeout
        r = run_child(system, cfg, workdir, timeout)
        results[system] = r
        done = "; ".join(f"{s['stage']} {s['wall_s']:.2f} s, peak {s['peak'] / GIB:.2f} GiB"
                         for s in r.get("stages", []))
        failed = f"  FAILED {r['failed']}\n{r.get('output', '')[-3000:]}" if r.get("failed") else ""
        print(f"{system}: {done}{failed}", flush=True)
    refs, held, known = reference_perplexities(cache, a)
    perplexities = {s: evaluate(r["phi"], held, known, a) for s, r in results.items() if r.get("phi")}
    load_end = os.getloadavg()
    z = np.load(cache)
    D_train, nnz = z["train_indptr"].size - 1, int(z["train_indices"].size)
    tokens = int(z["train_data"].sum(dtype=np.int64))
    header = [
        "## NYTimes size: topicjax against BigARTM, tomotopy, gensim and the numba reference"
        + (" (quick run)" if a.quick else ""), "",
        f"Command: `{command}`", "", f"Versions: {versions()}.", "",
        f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}. Machine: {machine()}. "
        f"Load average (1, 5, 15 min) at the start {' '.join(f'{x:.2f}' for x in load_start)}, at the end "
        f"{' '.join(f'{x:.2f}' for x in load_end)}" + (" (timings are results only on a quiet machine)."
                                                      if max(load_start[0], load_end[0]) >= 1 else "."), "",
        f"Corpus: `make_lda_corpus(preset=\"nytimes\", n_docs={a.n_docs}, n_words={a.n_words}, "
        f"mean_length={a.mean_length:g}, n_topics={a.topics}, seed={a.seed})`; training part {D_train:,} documents, "
        f"{nnz:,} non-zeros, {tokens:,} tokens; {a.heldout:,} held-out documents. T = {a.topics}; {a.threads} "
        f"threads; {a.iterations} timed iterations per system.", "",
        "One process per system; wall seconds measured in the process per stage; peak RSS is the process's "
        "`ru_maxrss` after the stage (cumulative over its stages). Perplexity: held-out documents' tokens split in "
        f"halves at random, θ fitted on the first half by {a.fold_in_iter} EM iterations with the system's Φ fixed "
        "(renormalised over the training words and mixed with 1e-6 of the uniform distribution over them), "
        "perplexity of the second half (one numpy evaluator for all). Ratios: per-iteration time over BigARTM "
        "offline's time per pass and over tomotopy's (2 workers) time per sweep (below 1: faster).", ""]
    rows = build_rows(results, perplexities)
    text = render(rows, refs, header)
    print(text, flush=True)
    if out is not None:
        write_section(out, text)
        print(f"wrote {out}", flush=True)
    return {"rows": rows, "refs": refs, "results": results, "text": text, "out": out}


if __name__ == "__main__":
    main()
