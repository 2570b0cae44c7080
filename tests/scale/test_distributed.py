"""topicjax.scale.distributed: documents sharded over devices and processes give the single-device model.

Several CPU devices need ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before JAX starts,
so those checks run in subprocesses; the two-process check starts two ``jax.distributed``
processes on localhost (gloo collectives) with two devices each.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax import datasets
from topicjax.core import em
from topicjax.scale import distributed

ROOT = Path(__file__).resolve().parents[2]
N_ITER = 6
T = 8

# The model every check compares with: em's single-device steps from em.init(key(0)).
COMMON = textwrap.dedent(
    f"""
    import json, sys
    import numpy as np, jax, jax.numpy as jnp
    from topicjax import datasets
    from topicjax.core import em
    from topicjax.scale import distributed

    corpus, _ = datasets.make_bars(n_docs=70, doc_length=40, seed=3)

    def reg(phi, theta, coefs):  # smoothing Φ (ARTM eq. 23) and sparsing Θ, traced coefficients
        return coefs[0] * jnp.sum(jnp.log(phi)) - coefs[1] * jnp.sum(jnp.log(theta))

    COEFS = jnp.array([0.01, 0.02])

    def single(regularizer=None):
        data = em.prepare(corpus)
        state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, {T})
        step = em.make_step(regularizer)
        for _ in range({N_ITER}):
            state = step(state, data, COEFS if regularizer else None)
        return state
    """
)


def _env(n_devices: int) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n_devices}"
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(code: str, n_devices: int, timeout: float = 120) -> dict:
    out = subprocess.run([sys.executable, "-c", code], env=_env(n_devices), capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_one_device_equals_em_exactly():
    corpus, _ = datasets.make_bars(n_docs=40, seed=1)
    phi, theta, hist = distributed.fit(corpus, 6, max_iter=4, progress=False)
    data = em.prepare(corpus)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, 6)
    step = em.make_step()
    for _ in range(4):
        state = step(state, data, None)
    np.testing.assert_allclose(phi, np.asarray(state.phi), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(theta, np.asarray(state.theta), rtol=1e-6, atol=1e-7)
    assert len(hist) == 4 and hist[-1]["objective"] == pytest.approx(float(state.loglik), rel=1e-6)
    assert hist[-1]["perplexity"] == pytest.approx(np.exp(-float(state.loglik) / corpus.n_tokens), rel=1e-6)


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
        # Each device holds one contiguous, non-empty document range; together they cover all.
        ranges = sh.doc_ranges
        assert ranges[0][0] == 0 and ranges[-1][1] == corpus.n_docs
        assert all(a < b for a, b in ranges) and all(r[1] == s[0] for r, s in zip(ranges, ranges[1:]))
        assert len(sh.data.word.sharding.device_set) == 4
        shards = sh.data.count.addressable_shards
        assert sum(float(np.asarray(s.data).sum()) for s in shards) == corpus.n_tokens
        for s, (a, b) in zip(sorted(shards, key=lambda s: s.index[0].start), ranges):
            docs = np.asarray(sh.data.doc[s.index])[np.asarray(s.data) > 0]
            assert docs.min() >= a and docs.max() < b
        res = {{}}
        for name, regularizer in (("plsa", None), ("artm", reg)):
            ref = single(regularizer)
            state = distributed.init(jax.random.key(0), sh, {T})
            step = distributed.make_step(sh.mesh, regularizer)
            for _ in range({N_ITER}):
                state = step(state, sh.data, COEFS if regularizer else None)
            res[name] = dict(
                phi=float(np.abs(np.asarray(state.phi) - np.asarray(ref.phi)).max()),
                theta=float(np.abs(np.asarray(state.theta) - np.asarray(ref.theta)).max()),
                ll=float(abs(state.loglik - ref.loglik) / abs(ref.loglik)),
                reg=float(abs(state.reg - ref.reg) / max(abs(float(ref.reg)), 1.0)),
                phi_sum=float(np.abs(np.asarray(state.phi).sum(0) - 1).max()))
        print(json.dumps(res))
        """
    )
    res = _run(code, 4)
    for name in ("plsa", "artm"):
        r = res[name]
        assert r["phi"] < 1e-5 and r["theta"] < 1e-5, (name, r)
        assert r["ll"] < 1e-6 and r["reg"] < 1e-5 and r["phi_sum"] < 1e-5, (name, r)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_with_jax_distributed(tmp_path):
    port = _free_port()
    code = COMMON.replace("import json, sys\n", "import json, sys\npid = int(sys.argv[1])\n", 1)
    code = "import sys\nfrom topicjax.scale import distributed as _d\n" + textwrap.dedent(
        f"""
        _d.initialize("127.0.0.1:{port}", num_processes=2, process_id=int(sys.argv[1]))
        """
    ) + code + textwrap.dedent(
        f"""
        assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2
        phi, theta, hist = distributed.fit(corpus, {T}, max_iter={N_ITER}, progress=False)
        np.savez("{tmp_path}/out%d.npz" % pid, phi=phi, theta=theta, ll=hist[-1]["objective"])
        print(json.dumps(dict(pid=pid, n=len(hist))))
        jax.distributed.shutdown()
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], env=_env(2), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT) for i in range(2)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert sorted(o["pid"] for o in outs) == [0, 1] and all(o["n"] == N_ITER for o in outs)
    a, b = (np.load(tmp_path / f"out{i}.npz") for i in range(2))
    np.testing.assert_array_equal(a["phi"], b["phi"])  # every process holds the same model
    # ... which is the single-device model, computed here in one process.
    corpus, _ = datasets.make_bars(n_docs=70, doc_length=40, seed=3)
    data = em.prepare(corpus)
    state = em.init(jax.random.key(0), corpus.n_words, corpus.n_docs, T)
    step = em.make_step()
    for _ in range(N_ITER):
        state = step(state, data, None)
    np.testing.assert_allclose(a["phi"], np.asarray(state.phi), atol=1e-5)
    np.testing.assert_allclose(a["theta"], np.asarray(state.theta), atol=1e-5)
    # The last history entry is L at the parameters before the last step (em.EMState.loglik).
    assert float(a["ll"]) == pytest.approx(float(state.loglik), rel=1e-6)
