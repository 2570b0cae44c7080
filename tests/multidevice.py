"""Multi-device and multi-process runs for the tests: several CPU devices need
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before JAX starts, so they run in
subprocesses; two ``jax.distributed`` processes on localhost (gloo collectives) with two devices
each stand for two hosts."""

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
N_ITER = 6
T = 8

# The model every check compares with: ARTM.fit on one device, with and without a plain
# two-argument regularizer (smoothing Φ, ARTM eq. 23, and sparsing Θ).
COMMON = textwrap.dedent(
    f"""
    import json, sys
    import numpy as np, jax, jax.numpy as jnp
    import topicjax as tj
    from topicjax import datasets
    from topicjax.scale import distributed

    corpus, _ = datasets.make_bars(n_docs=70, doc_length=40, seed=3)

    def reg(phi, theta):
        return 0.01 * jnp.sum(jnp.log(phi)) - 0.02 * jnp.sum(jnp.log(theta))

    KW = dict(max_iter={N_ITER}, progress=False, random_state=0, scores=("perplexity",))
    REGS = {{"plsa": None, "artm": [reg]}}
    """
)


def env(n_devices: int) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n_devices}"
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run(code: str, n_devices: int, timeout: float = 180) -> dict:
    out = subprocess.run([sys.executable, "-c", code], env=env(n_devices), capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_processes(tmp_path, regs_name: str):
    """Fit ``REGS[regs_name]`` with the documents sharded over 2 processes x 2 devices; returns the
    two processes' saved ``phi``, ``theta``."""
    port = free_port()
    code = COMMON.replace("import json, sys\n", "import json, sys\npid = int(sys.argv[1])\n", 1)
    code = "import sys\nfrom topicjax.scale import distributed as _d\n" + textwrap.dedent(
        f"""
        _d.initialize("127.0.0.1:{port}", num_processes=2, process_id=int(sys.argv[1]))
        """
    ) + code + textwrap.dedent(
        f"""
        assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2
        m = distributed.fit(corpus, {T}, regularizers=REGS["{regs_name}"], **KW)
        np.savez("{tmp_path}/out%d.npz" % pid, phi=m.phi_, theta=m.theta_, ll=m.history_[-1]["objective"])
        print(json.dumps(dict(pid=pid, n=len(m.history_))))
        jax.distributed.shutdown()
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], env=env(2), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT) for i in range(2)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert sorted(o["pid"] for o in outs) == [0, 1] and all(o["n"] == N_ITER for o in outs)
    return [np.load(tmp_path / f"out{i}.npz") for i in range(2)]
