"""topicjax.scale.distributed: documents sharded over devices and processes give the single-device model.

Several CPU devices need ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before JAX starts,
so those checks run in subprocesses; the two-process checks read what the suite's one pair of
``jax.distributed`` processes on localhost (gloo collectives, two devices each) fitted
(tests/two_process_run.py): a corpus every process holds, and a batch store of which each reads
only its own part (sharded and online fits).

Tolerances against the one-device model: the sharded E-step adds the same float32 terms in
another order (per device, then across devices), a few ulps (float32 eps = 1.2e-7) per sum;
after a few EM iterations the probabilities differ by ~1e-7 (measured: 4e-8 for Φ and 1.5e-7 for
Θ of these fits), so rtol=1e-5, atol=1e-6 leaves margin while any real difference in the model
(a document counted twice or left out, another start) moves them by >= 1e-3.
"""

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import topicjax as tj
from topicjax import datasets
from topicjax.core.sharding import RangeCorpus, device_ranges
from topicjax.data.corpus import CorpusError
from topicjax.scale import distributed, online
from topicjax.scale.store import BatchStore, StoreWriter, write_store

from multidevice import COMMON, N_ITER, ONLINE_KW, STORE_BATCH, T, owned_documents, run, store_corpus
from two_process_run import two_process_run

#: among the suite's longest: run first (tests/conftest.py: pytest_collection_modifyitems)
pytestmark = pytest.mark.slow

TOL = dict(rtol=1e-5, atol=1e-6)  # float32 sums in another order (module docstring)


def test_one_device_equals_the_artm_fit():
    corpus, _, _ = datasets.make_bars(n_docs=40, seed=1)
    m = distributed.fit(corpus, 6, max_iter=4, progress=False)
    ref = tj.ARTM(6, max_iter=4, progress=False).fit(corpus)
    np.testing.assert_allclose(m.phi_, ref.phi_, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(m.theta_, ref.theta_, rtol=1e-6, atol=1e-7)
    assert len(m.history_) == 4 and m.history_[-1]["objective"] == pytest.approx(ref.history_[-1]["objective"], rel=1e-6)
    assert m.history_[-1]["perplexity"] == pytest.approx(ref.history_[-1]["perplexity"], rel=1e-6)


def test_bad_mesh_and_empty_corpus_are_rejected():
    corpus, _, _ = datasets.make_bars(n_docs=10, seed=1)
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
    with pytest.raises(ValueError, match="single axis 'docs'"):
        distributed.shard(corpus, mesh)
    with pytest.raises(ValueError, match="no devices"):
        distributed.make_mesh([])


def _reg(phi, theta):  # multidevice.COMMON's regularizer
    return 0.01 * jnp.sum(jnp.log(phi)) - 0.02 * jnp.sum(jnp.log(theta))


@pytest.fixture(scope="module")
def references():
    """The one-device ARTM fits of :data:`multidevice.COMMON` that the sharded fits are compared
    with, by the name of their regularizers: none ("plsa"), COMMON's ("artm") and one that averages
    over the columns of Θ ("mean"), fitted once for the module (not in each child process)."""
    corpus, _, _ = datasets.make_bars(n_docs=70, doc_length=40, seed=3)
    kw = dict(max_iter=N_ITER, progress=False, random_state=0, scores=("perplexity",))
    regs = {"plsa": None, "artm": [_reg], "mean": [lambda phi, theta: 0.5 * jnp.sum(jnp.log(jnp.mean(theta, axis=1)))]}
    return {name: tj.ARTM(T, regularizers=r, **kw).fit(corpus) for name, r in regs.items()}


def test_four_devices_give_the_single_device_model(references):
    code = COMMON + textwrap.dedent(
        f"""
        assert len(jax.devices()) == 4
        sh = distributed.shard(corpus)
        # Each device holds one contiguous document range; together they hold every token.
        assert len(sh.word.sharding.device_set) == 4
        shards = sorted(sh.count.addressable_shards, key=lambda s: s.index[0].start)
        assert sum(float(np.asarray(s.data).sum()) for s in shards) == corpus.n_tokens
        spans = []
        for s in shards:
            piece_doc = np.asarray(sh.piece_doc[s.index])  # a piece's slots are all its document's
            docs = np.repeat(piece_doc, np.asarray(s.data).shape[1] // piece_doc.shape[1], axis=1)[np.asarray(s.data) > 0]
            spans.append((int(docs.min()), int(docs.max())))
        assert spans[0][0] == 0 and spans[-1][1] == corpus.n_docs - 1
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
        # Θ split by documents: 70 documents in blocks of 18 columns, the last device's 16 and
        # 2 columns of padding; the jitted step keeps it so, and it is the one-device step's Θ.
        from topicjax.artm import algorithm as em
        from topicjax.core import layout
        from topicjax.regularizers import as_regularizer
        sh = distributed.shard(corpus, shard_theta=True)
        reg0 = as_regularizer(None)
        state = em.place(em.init(jax.random.key(0), corpus.n_words, 0, {T}), sh)
        ref = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, {T})
        step = jax.jit(em.step)
        for _ in range(3):
            state, ref = step(state, sh, reg0), step(ref, layout.prepare(corpus), reg0)
        theta = np.asarray(state.theta)
        layout_res = dict(block=sh.doc_block, width=sh.theta_width, spec=str(state.theta.sharding.spec),
                          shapes=sorted({{s.data.shape for s in state.theta.addressable_shards}}),
                          pad=float(np.abs(theta[:, 70:]).max()), alive=np.asarray(state.doc_alive)[68:].tolist(),
                          diff=float(np.abs(theta[:, :70] - np.asarray(ref.theta)).max()))
        # What a device holds of the compiled step, Θ replicated and split (XLA's own accounting):
        # 4,000 documents at T = 64, Θ 1.0 MB, its split saves 3/4 of it in arguments and outputs.
        big, _, _ = datasets.make_bars(n_docs=4000, seed=0)
        for split in (False, True):
            shb = distributed.shard(big, shard_theta=split)
            st = em.place(em.init(jax.random.key(0), big.n_words, 0, 64), shb)
            ma = jax.jit(em.step).lower(st, shb, reg0).compile().memory_analysis()
            layout_res["split" if split else "replicated"] = [
                ma.argument_size_in_bytes, ma.output_size_in_bytes, ma.temp_size_in_bytes,
                sum(int(x.nbytes) for x in (shb.word, shb.count, shb.piece_doc)) // 4]
        # A regularizer that averages over the columns of Θ sees the 70 documents, not the padding.
        REGS["mean"] = [lambda phi, theta: 0.5 * jnp.sum(jnp.log(jnp.mean(theta, axis=1)))]
        res = {{"layout": layout_res}}
        for name, regs in REGS.items():  # the one-device fits are the parent's (references())
            m = distributed.fit(corpus, {T}, regularizers=regs, **KW)
            res[name] = dict(phi=m.phi_.tolist(), theta=m.theta_.tolist(), ll=m.history_[-1]["objective"],
                             reg=m.history_[-1]["regularizer"])
        print(json.dumps(res))
        """
    )
    res = run(code, 4)
    for name in ("plsa", "artm", "mean"):  # float32 values, exact through JSON's float64
        phi, theta = np.asarray(res[name]["phi"], np.float32), np.asarray(res[name]["theta"], np.float32)
        ref = references[name]
        ll, reg = ref.history_[-1]["objective"], ref.history_[-1]["regularizer"]
        res[name] = dict(phi=float(np.abs(phi - ref.phi_).max()), theta=float(np.abs(theta - ref.theta_).max()),
                         ll=abs(res[name]["ll"] - ll) / abs(ll), reg=abs(res[name]["reg"] - reg) / max(abs(reg), 1.0),
                         phi_sum=float(np.abs(phi.sum(0) - 1).max()))
    lay = res["layout"]
    assert lay["block"] == 18 and lay["width"] == 72 and lay["spec"] == "P(None, 'docs')", lay
    assert lay["shapes"] == [[T, 18]] and lay["pad"] == 0.0 and lay["alive"] == [1.0, 1.0, 0.0, 0.0], lay
    assert lay["diff"] < 1e-5, lay
    theta_bytes = 64 * 4000 * 4
    (a_rep, o_rep, t_rep, l_rep), (a_sh, o_sh, t_sh, l_sh) = lay["replicated"], lay["split"]
    assert a_rep - l_rep - (a_sh - l_sh) >= 0.74 * theta_bytes, lay  # the layouts' own sizes aside
    # ... and the step's temporaries are Θ-sized: split, a quarter of them (measured 0.25)
    assert o_rep - o_sh >= 0.74 * theta_bytes and t_sh <= 0.3 * t_rep, lay
    for name in ("plsa", "artm", "mean"):
        r = res[name]
        assert r["phi"] < 1e-5 and r["theta"] < 1e-5, (name, r)
        assert r["ll"] < 1e-6 and r["reg"] < 1e-5 and r["phi_sum"] < 1e-5, (name, r)


def test_two_processes_with_jax_distributed(tmp_path_factory, references):
    # A regularizer of Θ: it must see the 70 documents of Θ split over 4 devices (blocks of 18,
    # 2 padding columns), as the one-device fit does.  Θ gathered to the host in blocks: checked
    # in the processes (tests/two_process_run.py, step 4).
    run = two_process_run(tmp_path_factory)
    a, b = run.results(0), run.results(1)
    assert [r["n"] for r in run.report] == [N_ITER, N_ITER]
    np.testing.assert_array_equal(a["phi"], b["phi"])  # every process holds the same model
    np.testing.assert_array_equal(a["theta"], b["theta"])
    # ... which is the single-device model, computed here in one process.
    ref = references["artm"]
    assert a["theta"].shape == ref.theta_.shape
    np.testing.assert_allclose(a["phi"], ref.phi_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a["theta"], ref.theta_, rtol=1e-5, atol=1e-6)


def test_two_processes_each_read_only_their_own_part_of_a_store(tmp_path_factory):
    run = two_process_run(tmp_path_factory)
    a, b = run.results(0), run.results(1)
    n_batches = -(-store_corpus().n_docs // STORE_BATCH)
    assert all(r["n_store"] == N_ITER and r["n_online"] == ONLINE_KW["passes"] * n_batches for r in run.report)
    for key in ("store_phi", "store_theta", "online_phi", "online_ll"):
        np.testing.assert_array_equal(a[key], b[key])  # every process holds the same model
    store = BatchStore(run.store)
    ref = tj.ARTM(T, max_iter=N_ITER, progress=False, random_state=0, scores=("perplexity",)).fit(store.corpus())
    np.testing.assert_allclose(a["store_phi"], ref.phi_, **TOL)
    np.testing.assert_allclose(a["store_theta"], ref.theta_, **TOL)
    assert float(a["perplexity"]) == pytest.approx(ref.history_[-1]["perplexity"], rel=1e-6)
    ref_online = online.fit_online(store, T, progress=False, random_state=0, **ONLINE_KW)
    np.testing.assert_allclose(a["online_phi"], ref_online.phi_, **TOL)
    np.testing.assert_allclose(a["online_ll"], [r["objective"] for r in ref_online.history_], rtol=1e-5)
    # Each process's copy had the other's part as garbage that no read gets past: the fits above
    # succeeded only because no process read a document of the other's devices.
    offsets = store.doc_offsets()
    for kind, batch in (("fit", None), ("online", STORE_BATCH)):
        owned = owned_documents(offsets, 2, 2, batch)
        for p in range(2):
            assert owned[p].any() and not (owned[0] & owned[1]).any() and (owned[0] | owned[1]).all()
            copy = BatchStore(run.folder / f"{kind}{p}")
            foreign = int(np.flatnonzero(~owned[p])[0])
            with pytest.raises(CorpusError, match="outside"):
                copy.documents(foreign, foreign + 1)
            mine = int(np.flatnonzero(owned[p])[0])
            np.testing.assert_array_equal(copy.documents(mine, mine + 1).words, store.documents(mine, mine + 1).words)


def test_a_store_on_one_device_is_the_artm_fit_of_its_corpus(tmp_path):
    store = write_store([store_corpus()], tmp_path / "s", batch_size=STORE_BATCH)
    corpus = store.corpus()
    m = distributed.fit(store.folder, T, max_iter=4, progress=False, random_state=0)
    ref = tj.ARTM(T, max_iter=4, progress=False, random_state=0).fit(corpus)
    np.testing.assert_allclose(m.phi_, ref.phi_, **TOL)
    np.testing.assert_allclose(m.theta_, ref.theta_, **TOL)
    assert m.vocab_ == list(corpus.vocab) and m.history_[-1]["perplexity"] == pytest.approx(
        ref.history_[-1]["perplexity"], rel=1e-6)
    # the totals summed over the devices are the corpus's
    rc = distributed.store_corpus(store)
    sh = distributed.shard(rc)
    n_d, n_w = sh.totals(rc.n_docs, rc.n_words)
    np.testing.assert_array_equal(n_d, corpus.doc_lengths)
    np.testing.assert_array_equal(n_w, corpus.word_counts)
    # the online fit with a mesh is the one without
    o = online.fit_online(store, T, progress=False, random_state=0, mesh=distributed.make_mesh(), **ONLINE_KW)
    ref_o = online.fit_online(store, T, progress=False, random_state=0, **ONLINE_KW)
    np.testing.assert_allclose(o.phi_, ref_o.phi_, **TOL)
    assert [r["perplexity"] for r in o.history_] == pytest.approx([r["perplexity"] for r in ref_o.history_], rel=1e-5)


def test_documents_reads_any_range_and_the_ranges_cover_the_corpus(tmp_path):
    corpus = store_corpus()
    store = write_store([corpus], tmp_path / "s", batch_size=STORE_BATCH)
    off = corpus.doc_offsets
    got = store.documents(5, 33)
    assert got.first == 5 and got.n_docs == 28
    np.testing.assert_array_equal(got.words, corpus.word_ids[off[5]:off[33]])
    np.testing.assert_array_equal(got.offsets, off[5:34] - off[5])
    assert store.documents(7, 7).n_docs == 0
    with pytest.raises(IndexError, match="outside"):
        store.documents(60, 71)
    ranges = device_ranges(store.doc_offsets(), 3)
    assert ranges[0][0] == 0 and ranges[-1][1] == corpus.n_docs and all(
        r[1] == s[0] for r, s in zip(ranges, ranges[1:]))


def test_store_fits_refuse_what_needs_the_whole_corpus(tmp_path):
    store = write_store([store_corpus()], tmp_path / "s", batch_size=STORE_BATCH)
    rc = distributed.store_corpus(store)
    with pytest.raises(AttributeError, match="needs every entry"):
        rc.word_ids
    with pytest.raises(ValueError, match="fitted on a mesh"):
        tj.ARTM(T, progress=False).fit(rc)
    with pytest.raises(ValueError, match="labels"):
        tj.ARTM(T, progress=False, label_weight=1.0).fit(rc, mesh=distributed.make_mesh())
    with pytest.raises(ValueError, match="checkpoint"):
        distributed.fit(store, T, checkpoint=tmp_path / "ck", progress=False)
    with pytest.raises(AttributeError, match="needs every entry"):
        distributed.fit(store, T, max_iter=1, progress=False, scores=("background_ratio",), background_topics=1)
    with pytest.raises(ValueError, match="more than the"):
        distributed.fit(store, 10 ** 6, progress=False)
    # a document without tokens is found from the devices' totals, named with the store
    w = StoreWriter(tmp_path / "e", batch_size=2, source="test")
    w.append(np.array([2, 0, 1]), np.array([0, 1, 2]), np.array([3, 1, 2]))
    empty = w.close(["a", "b", "c"])
    with pytest.raises(CorpusError, match=r"document 1 has no tokens"):
        distributed.fit(empty, 2, max_iter=1, progress=False)
    assert isinstance(rc, RangeCorpus) and rc.n_docs == store.n_docs and rc.nnz == store.nnz
