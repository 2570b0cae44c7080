"""topicjax.scale.online: the on-disk batch store, its converters, online EM, and bounded memory."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from child_env import measured_child_env

from topicjax import Corpus, CorpusError, datasets
from topicjax.artm import algorithm as em
from topicjax.core import layout
import topicjax as tj
from topicjax.evaluation import metrics
from topicjax.regularizers import Context, as_regularizer
from topicjax.data import formats
from topicjax.scale import online as streaming

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bars():
    corpus, _, _ = datasets.make_bars(n_docs=230, doc_length=60, seed=4)
    return corpus


@pytest.fixture(scope="module")
def store(bars, tmp_path_factory):
    return streaming.write_store([bars], tmp_path_factory.mktemp("store"), batch_size=60)


# ------------------------------------------------------------------------------ store & converters
def test_store_round_trip_and_batches(bars, store):
    assert (store.n_docs, store.n_words, store.nnz, store.n_tokens) == (bars.n_docs, bars.n_words, bars.nnz, bars.n_tokens)
    assert store.n_batches == 4 and len(list(store)) == 4
    assert store.corpus().equals(bars)
    b = store.batch(3)  # the last, short batch
    assert b.first == 180 and b.n_docs == 50 and b.offsets[0] == 0
    np.testing.assert_array_equal(b.words, bars.word_ids[bars.doc_offsets[180]:])
    with pytest.raises(IndexError, match="outside"):
        store.batch(4)


def test_convert_uci_streams_blocks(bars, tmp_path):
    formats.write_uci(bars, tmp_path / "uci", "x", compress=True)
    st = streaming.convert_uci(tmp_path / "uci", tmp_path / "s", batch_size=50, block_lines=97)
    assert st.corpus().equals(bars)
    assert json.loads((tmp_path / "s" / "meta.json").read_text())["source"].endswith("docword.x.txt.gz")


def test_convert_uci_keeps_empty_documents_and_names_bad_lines(tmp_path):
    src = tmp_path / "src"  # the stores go beside the input's folder, never inside it
    src.mkdir()
    (src / "vocab.t.txt").write_text("a\nb\nc\n")
    # Documents 2 and 4 of D = 4 have no entries; a zero count is dropped.
    (src / "docword.t.txt").write_text("4\n3\n4\n1 1 2\n1 3 1\n3 2 5\n3 3 0\n")
    st = streaming.convert_uci(src, tmp_path / "s", batch_size=3, block_lines=2)
    assert st.n_docs == 4 and st.nnz == 3 and st.n_tokens == 8
    np.testing.assert_array_equal(st.batch(0).offsets, [0, 2, 2, 3])
    assert st.batch(1).n_docs == 1 and st.batch(1).words.size == 0
    (src / "docword.t.txt").write_text("4\n3\n3\n3 1 2\n1 3 1\n4 2 5\n")
    with pytest.raises(CorpusError, match=r"line 5: document 1 comes after document 3"):
        streaming.convert_uci(src, tmp_path / "s2")
    (src / "docword.t.txt").write_text("4\n3\n3\n1 1 2\n1 3 x\n")
    with pytest.raises(CorpusError, match=r"line 5: document 1, word id 3: count 'x' is not a number"):
        streaming.convert_uci(src, tmp_path / "s3")
    (src / "docword.t.txt").write_text("4\n3\n3\n1 1 2\n1 3 1\n")
    with pytest.raises(CorpusError, match="NNZ=3 but the file has 2 entries"):
        streaming.convert_uci(src, tmp_path / "s4")
    assert not (tmp_path / "s4" / "meta.json").exists()  # a failed conversion leaves no store


def test_convert_vw_with_modalities(tmp_path):
    text = "d1 apple:2 pear |@tag fruit\nd2 pear:3 |@tag fruit tree\n\nd3 |@tag tree\n"
    (tmp_path / "c.vw").write_text(text)
    st = streaming.convert_vw(tmp_path / "c.vw", tmp_path / "s", batch_size=2)
    ref = formats.read_vw(tmp_path / "c.vw")
    got = st.corpus()
    assert st.vocab() == list(ref.vocab)  # the same keys, in order of first appearance
    np.testing.assert_array_equal(got.to_dense(), ref.to_dense())
    (tmp_path / "bad.vw").write_text("d1 a b\nd2 a:x\n")
    with pytest.raises(CorpusError, match=r"line 2"):
        streaming.convert_vw(tmp_path / "bad.vw", tmp_path / "s2", batch_size=1)


def test_write_store_parts_and_broken_stores(bars, tmp_path):
    a, b = bars.subset(np.arange(100)), bars.subset(np.arange(100, 230))
    st = streaming.write_store((p for p in (a, b)), tmp_path / "s", batch_size=77)
    assert st.corpus().equals(bars)
    with pytest.raises(CorpusError, match="part 1 has another vocabulary"):
        streaming.write_store([a, a.with_vocab(list(a.vocab)[::-1])], tmp_path / "s2")
    with pytest.raises(FileNotFoundError, match="not a batch store"):
        streaming.BatchStore(tmp_path)
    with open(tmp_path / "s" / "words.bin", "r+b") as fh:
        fh.truncate(12)
    with pytest.raises(CorpusError, match="words.bin: 12 bytes"):
        streaming.BatchStore(tmp_path / "s")


# ------------------------------------------------------------------------------ online EM
def _init_phi(corpus, T):
    return np.asarray(em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, T).phi, np.float64)


def _batch_counts(phi, dense, doc_passes):
    """Dense float64 reference for one batch (ARTM eq. 6-8, 16): Θ from uniform by ``doc_passes``
    iterations with Φ fixed, then the batch's n_wt (the pass of ``ARTM(doc_passes=...)``).
    ``dense`` is (docs, W)."""
    N = dense.T.astype(float)  # (W, D)
    theta = np.full((phi.shape[1], N.shape[1]), 1.0 / phi.shape[1])
    for _ in range(doc_passes):
        R = N / (phi @ theta)
        theta = theta * (phi.T @ R)
        theta /= theta.sum(0)
    return phi * ((N / (phi @ theta)) @ theta.T)


def test_full_batch_updates_equal_the_offline_reference(bars, store):
    """update_every = all batches and κ = 0 (ρ = 1): each pass replaces n_wt by the corpus counts."""
    model = streaming.fit_online(store, 6, passes=2, update_every=store.n_batches, learning_decay=0.0, doc_passes=3,
                                 progress=False)
    phi, hist = model.phi_, model.history_
    ref = _init_phi(bars, 6)
    for _ in range(2):
        n_wt = _batch_counts(ref, bars.to_dense(), 3)
        ref = n_wt / n_wt.sum(0)
    np.testing.assert_allclose(phi, ref, atol=2e-6)
    assert [h.get("rho") for h in hist] == [None] * 3 + [1.0] + [None] * 3 + [1.0]


def test_step_sizes_follow_tau0_and_kappa(bars, store):
    """n_wt ← (1-ρ_t) n_wt + ρ_t n̂_wt with ρ_t = (τ0 + t)^-κ, one update per batch, and the Φ
    smoothing term of the regularizer (φ ∂R/∂φ = β for R = β Σ log φ) added at each update."""
    tau0, kappa, beta, T = 2.0, 0.5, 0.3, 5
    def smooth(phi, theta):
        return jnp.sum(jnp.log(phi))

    model = streaming.fit_online(store, T, passes=1, learning_offset=tau0, learning_decay=kappa, doc_passes=2,
                                 regularizers=[(smooth, beta)], progress=False)
    phi, hist = model.phi_, model.history_
    ref = _init_phi(bars, T)
    n_wt = ref.copy()  # the documented start: pseudo-counts Φ0 (mass one per topic), BigARTM's
    dense = bars.to_dense()
    for t in range(store.n_batches):
        rho = (tau0 + t) ** -kappa
        assert hist[t]["rho"] == pytest.approx(rho)
        n_wt = (1 - rho) * n_wt + rho * _batch_counts(ref, dense[60 * t:60 * (t + 1)], 2)
        ref = (n_wt + beta) / (n_wt + beta).sum(0)
    np.testing.assert_allclose(phi, ref, rtol=1e-4, atol=1e-6)


def test_a_word_absent_from_the_first_batch_keeps_and_gains_probability(tmp_path):
    """Words that only later batches contain: positive φ in every topic after the first update
    (zero counts at the start made them 0 for ever), and more mass once their batch has been seen;
    no word row of Φ is all zero after a pass."""
    rng = np.random.default_rng(3)
    W, T = 40, 4
    early = rng.multinomial(60, np.r_[np.full(20, 1 / 20), np.zeros(20)], size=50)  # words 0..19 only
    late = rng.multinomial(60, np.r_[np.zeros(20), np.full(20, 1 / 20)], size=50)  # words 20..39 only
    corpus = Corpus.from_dense(np.vstack([early, late]))
    st = streaming.write_store([corpus], tmp_path / "s", batch_size=50)
    state = streaming.online_init(jax.random.key(0), W, T)
    reg = as_regularizer(None).bind(Context(n_words=W, n_topics=T, n_docs=50))
    data = streaming._batch_data(st.batch(0), 50, 1, layout.DEFAULT_CHUNK // layout.PIECE, np.float32)
    after_first = streaming.batch_step(state, data, reg, jnp.asarray(True), streaming.OnlineStatic(), 50)
    late_mass_before = np.asarray(after_first.phi)[20:].sum()
    assert np.all(np.asarray(after_first.phi)[20:] > 0)
    model = streaming.fit_online(st, T, passes=1, progress=False)
    phi = model.phi_
    assert np.all(phi > 0) and not np.any(phi.sum(1) == 0)
    assert phi[20:].sum() > 2 * late_mass_before


def test_online_quality_approaches_batch_em(tmp_path):
    """On a small corpus with planted topics, ten online passes (batches of 100 documents, ρ =
    (τ0 + t)^-κ with τ0 = 64) reach a held-out perplexity within 5 % of 60 iterations of batch EM."""
    from topicjax.data import synthetic

    gen = synthetic.LDAGenerator(n_docs=1000, n_words=300, mean_length=80, n_topics=8, seed=5)
    chunk = next(gen.chunks(1000))
    corpus = Corpus.from_entries(np.repeat(np.arange(1000), np.diff(chunk.offsets)), chunk.word_ids, chunk.counts,
                                 n_words=300)
    train, test = corpus.train_test_split(0.2, seed=0)
    test = test.with_vocab(train.vocab, empty_docs="drop")
    observed, heldout = test.completion_split("tokens", seed=0)
    st = streaming.write_store([train], tmp_path / "s", batch_size=100)
    model = streaming.fit_online(st, 8, passes=10, learning_offset=64.0, progress=False)
    phi_online = model.phi_
    batch = tj.PLSA(8, max_iter=60, random_state=0, progress=False).fit(train)
    p_online = metrics.heldout_perplexity(phi_online, observed, heldout)
    p_batch = metrics.heldout_perplexity(batch.phi_, observed, heldout)
    assert p_online < 1.05 * p_batch, (p_online, p_batch)


def test_online_fit_learns_the_bars(store):
    """BigARTM's defaults over a few passes: the batches' progressive perplexity falls from the
    first pass to the fourth (by 5 %: the first pass starts from a random Φ whose words all keep
    positive probability; quality against batch EM is test_online_quality_approaches_batch_em)."""
    model = streaming.fit_online(store, 10, passes=4, progress=False)
    phi, hist = model.phi_, model.history_
    by_pass = [np.mean([h["perplexity"] for h in hist if h["pass"] == p]) for p in (1, 4)]
    assert by_pass[1] < 0.97 * by_pass[0]
    np.testing.assert_allclose(phi.sum(0), 1.0, atol=1e-5)


def test_resume_and_bad_arguments(store):
    with pytest.raises(ValueError, match=r"^passes must be an integer >= 1, got 0"):
        streaming.fit_online(store, 4, passes=0, progress=False)
    state = streaming.online_init(jax.random.key(0), store.n_words + 1, 4)
    with pytest.raises(ValueError, match="needs"):
        streaming.fit_online(store, 4, state=state, progress=False)
    with pytest.raises(ValueError, match="update_every"):
        streaming.fit_online(store, 4, update_every=0, progress=False)


def test_fit_online_returns_a_fitted_artm(bars, store, tmp_path):
    """fit_online's model is built as partial_fit builds its own: it transforms, saves and reopens;
    resuming it from its online_state_ for a pass is the second pass of a two-pass fit (step
    sizes too); and partial_fit continues it."""
    one = streaming.fit_online(store, 5, passes=1, random_state=3, progress=False)
    assert isinstance(one, tj.ARTM) and one.vocab_ == list(bars.vocab) and one.n_features_in_ == bars.n_words
    assert one.n_batch_iter_ == one.n_iter_ == store.n_batches == len(one.history_)
    assert one.theta_ is None and one.doc_alive_ is None and one._class_freq is None and one.psi_ is None
    assert (one.doc_passes, one.learning_offset, one.learning_decay) == (10, 1024.0, 0.7)
    np.testing.assert_array_equal(one.components_, one.phi_.T)
    theta = one.transform(bars)
    one.save(tmp_path / "model")
    back = tj.ARTM.load(tmp_path / "model")
    np.testing.assert_array_equal(back.phi_, one.phi_)
    np.testing.assert_allclose(back.transform(bars), theta, rtol=1e-6, atol=1e-7)

    two = streaming.fit_online(store, 5, passes=2, random_state=3, progress=False)
    resumed = streaming.fit_online(store, 5, passes=1, state=one.online_state_, progress=False)
    np.testing.assert_allclose(resumed.phi_, two.phi_, rtol=1e-6, atol=1e-9)
    assert [h["rho"] for h in resumed.history_] == [h["rho"] for h in two.history_[store.n_batches:]]
    assert [h["rho"] for h in two.history_] == pytest.approx([(1024.0 + t) ** -0.7 for t in range(2 * store.n_batches)])
    assert resumed.n_batch_iter_ == 2 * store.n_batches

    one.partial_fit(bars.subset(range(50)))
    assert one.n_batch_iter_ == store.n_batches + 1 and len(one.history_) == store.n_batches + 1


def test_infer_theta_by_batches_equals_em(bars, store):
    phi = np.asarray(em.init(jax.random.key(2), bars.n_words, bars.n_docs, 5).phi)
    parts = dict(streaming.infer_theta(store, phi, n_iter=7))
    got = np.concatenate([parts[k] for k in sorted(parts)], axis=1)
    ref = em.infer_theta(jnp.asarray(phi), layout.prepare(bars), bars.n_docs, as_regularizer(None), n_iter=7)
    np.testing.assert_allclose(got, np.asarray(ref), atol=1e-5)


# ------------------------------------------------------------------------------ bounded memory
MEASURE = r"""
import gc, json, sys, tracemalloc
from topicjax.scale import online as streaming
hwm = lambda: int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1])

def fit(folder):
    model = streaming.fit_online(streaming.BatchStore(folder), 8, passes=1, doc_passes=2, progress=False)
    return len(model.history_)

fit(sys.argv[1])  # compiles: the peaks below are the fits' alone
tracemalloc.start()
res = {}
for n, folder in zip(("1", "10"), sys.argv[1:]):
    gc.collect()
    with open("/proc/self/clear_refs", "w") as fh:  # VmHWM from here (Linux)
        fh.write("5")
    tracemalloc.reset_peak()
    batches = fit(folder)
    res[n] = dict(rss_kb=hwm(), traced=tracemalloc.get_traced_memory()[1], batches=batches)
print(json.dumps(res))
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc for the peak resident memory")
def test_peak_memory_does_not_grow_with_the_corpus(tmp_path):
    """The same corpus stored once and repeated 10 times: one online pass over each, in one fresh
    process, after a first pass over the x1 store that compiles (so that neither peak holds the
    compiler's).  Peak resident memory (VmHWM, reset before each pass) and peak traced host
    allocations stay flat, while loading the x10 corpus would add its ~70 MB of counts (more once
    copied to the device).  The corpus is large enough for that to stand well above the ±10 MB by
    which the peak of two runs of the same process differs (JIT and allocator noise)."""
    rng = np.random.default_rng(0)
    D, W, T, L = 6000, 2000, 20, 200
    phi = rng.dirichlet(np.full(W, 0.05), T).T
    p = rng.dirichlet(np.full(T, 0.2), D) @ phi.T
    corpus = Corpus.from_dense(np.stack([rng.multinomial(L, row / row.sum()) for row in p]))
    stores = {n: streaming.write_store([corpus] * n, tmp_path / f"x{n}", batch_size=500) for n in (1, 10)}
    grown = (stores[10].nnz - stores[1].nnz) * 8  # bytes of word ids + counts added on disk
    assert grown > 60e6
    env = measured_child_env(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", MEASURE, str(stores[1].folder), str(stores[10].folder)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    res = {int(n): r for n, r in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    assert res[10]["batches"] == 10 * res[1]["batches"]
    rss_growth = (res[10]["rss_kb"] - res[1]["rss_kb"]) * 1024
    assert rss_growth < 0.5 * grown, (res, grown)
    assert res[10]["traced"] - res[1]["traced"] < 0.1 * grown, (res, grown)
