"""topicjax.scale.distributed: documents sharded over devices and processes give the single-device model.

Several CPU devices need ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before JAX starts,
so those checks run in subprocesses; the two-process check starts two ``jax.distributed``
processes on localhost (gloo collectives) with two devices each.
"""

import textwrap

import jax
import numpy as np
import pytest

import topicjax as tj
from topicjax import datasets
from topicjax.scale import distributed

from multidevice import COMMON, N_ITER, T, run, run_two_processes


def test_one_device_equals_the_artm_fit():
    corpus, _ = datasets.make_bars(n_docs=40, seed=1)
    m = distributed.fit(corpus, 6, max_iter=4, progress=False)
    ref = tj.ARTM(6, max_iter=4, progress=False).fit(corpus)
    np.testing.assert_allclose(m.phi_, ref.phi_, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(m.theta_, ref.theta_, rtol=1e-6, atol=1e-7)
    assert len(m.history_) == 4 and m.history_[-1]["objective"] == pytest.approx(ref.history_[-1]["objective"], rel=1e-6)
    assert m.history_[-1]["perplexity"] == pytest.approx(ref.history_[-1]["perplexity"], rel=1e-6)


def test_bad_mesh_and_empty_corpus_are_rejected():
    corpus, _ = datasets.make_bars(n_docs=10, seed=1)
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
    with pytest.raises(ValueError, match="single axis 'docs'"):
        distributed.shard(corpus, mesh)
    with pytest.raises(ValueError, match="no devices"):
        distributed.make_mesh([])


def test_four_devices_give_the_single_device_model():
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
            docs = np.asarray(sh.doc[s.index])[np.asarray(s.data) > 0]
            spans.append((int(docs.min()), int(docs.max())))
        assert spans[0][0] == 0 and spans[-1][1] == corpus.n_docs - 1
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
        res = {{}}
        for name, regs in REGS.items():
            ref = tj.ARTM({T}, regularizers=regs, **KW).fit(corpus)
            m = distributed.fit(corpus, {T}, regularizers=regs, **KW)
            res[name] = dict(
                phi=float(np.abs(m.phi_ - ref.phi_).max()), theta=float(np.abs(m.theta_ - ref.theta_).max()),
                ll=abs(m.history_[-1]["objective"] - ref.history_[-1]["objective"]) / abs(ref.history_[-1]["objective"]),
                reg=abs(m.history_[-1]["regularizer"] - ref.history_[-1]["regularizer"]) / max(
                    abs(ref.history_[-1]["regularizer"]), 1.0),
                phi_sum=float(np.abs(m.phi_.sum(0) - 1).max()))
        print(json.dumps(res))
        """
    )
    res = run(code, 4)
    for name in ("plsa", "artm"):
        r = res[name]
        assert r["phi"] < 1e-5 and r["theta"] < 1e-5, (name, r)
        assert r["ll"] < 1e-6 and r["reg"] < 1e-5 and r["phi_sum"] < 1e-5, (name, r)


def test_two_processes_with_jax_distributed(tmp_path):
    a, b = run_two_processes(tmp_path, "plsa")
    np.testing.assert_array_equal(a["phi"], b["phi"])  # every process holds the same model
    # ... which is the single-device model, computed here in one process.
    corpus, _ = datasets.make_bars(n_docs=70, doc_length=40, seed=3)
    ref = tj.ARTM(T, max_iter=N_ITER, progress=False, random_state=0).fit(corpus)
    np.testing.assert_allclose(a["phi"], ref.phi_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a["theta"], ref.theta_, rtol=1e-5, atol=1e-6)
