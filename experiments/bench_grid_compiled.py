"""Per-model-iteration cost of the compiled computations behind ``ARTM.fit_grid``, without the
host work of an estimator call (corpus layout, initial states, copying every model's Φ and Θ back,
building the fitted objects): what a batch of models costs the device itself (issue 7).

Timed (best of ``--rounds`` after a warm-up), per model and iteration, for G models at T topics:

* ``artm grid``: the compiled ``fit_grid`` runner (``lax.scan`` over iterations, all G models
  vmapped; the E-step under vmap lays the models side by side, see :mod:`topicjax.core.estep`);
* ``artm vmapped step``: the vmapped ARTM step called from a Python loop;
* ``plsa vmapped``: ``driver.run_many(mode="vmap")`` over G PLSA models;
* ``plsa single``: one PLSA model's ``driver.run_fixed`` (G times its time), the sequential baseline
  without any Python overhead.

Example::

    python experiments/bench_grid_compiled.py --corpus kos 20ng --topics 100 --models 32
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", nargs="+", default=["kos"])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--models", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    import jax
    import jax.numpy as jnp

    import bench_grid
    from bench_em import load_corpus
    from topicjax import regularizers as R
    from topicjax.artm import algorithm as em
    from topicjax.core import driver, layout
    from topicjax.core.compiled import jit

    if args.quick:
        args.corpus, args.topics, args.models, args.iterations, args.rounds = ["bars"], 5, 3, 2, 1
    G, T, N = args.models, args.topics, args.iterations

    def best(f):
        jax.block_until_ready(f())
        ts = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            jax.block_until_ready(f())
            ts.append(time.perf_counter() - t0)
        return min(ts)

    rows = []
    for name in args.corpus:
        tr = load_corpus(name, args.quick)
        data = layout.prepare(tr)
        reg = R.combine(*(r for r, _ in bench_grid.make_base(T, N).regularizers)).bind(R.Context.build(tr, T))
        reg = reg.cast(jnp.float32)
        taus = bench_grid.grid_taus(G)
        # the batch set-up compiled as whole programs (eagerly, each operation compiles one of its own)
        reg_b = jit(lambda trees: jax.tree.map(lambda *xs: jnp.stack(xs), *trees))(
            [reg.with_coefs([float(v) for v in row]) for row in taus])
        keys = jax.random.split(jax.random.key(0), G)
        states = jit(jax.vmap(lambda k: em.init(k, tr.n_words, tr.n_docs, T, reg=reg)))(keys)
        static = em.EMStatic()
        res = {"artm grid": best(lambda: driver.run_many(em.ARTM_EM, static, states, (data, reg_b, None),
                                                         batched=(False, True, False), max_iter=N, mode="vmap")[0].phi)}
        plsa = R.as_regularizer(None)
        st0 = jit(jax.vmap(lambda k: em.init(k, tr.n_words, tr.n_docs, T)))(keys)
        res["plsa vmapped"] = best(lambda: driver.run_many(em.ARTM_EM, static, st0, (data, plsa, None),
                                                           batched=(False, False, False), max_iter=N,
                                                           mode="vmap")[0].phi)
        one = jit(lambda st: jax.tree.map(lambda a: a[0], st))(st0)
        res["plsa single (x G)"] = best(lambda: driver.run_fixed(em.ARTM_EM, static, one, (data, plsa, None),
                                                                 max_iter=N)[0].phi) * G
        per = {k: v / (N * G) * 1e3 for k, v in res.items()}
        rows.append((name, per))
        print(f"{name} ({jax.default_backend()}, T={T}, G={G}): "
              + " | ".join(f"{k}: {v:.3f} ms/model-iteration" for k, v in per.items()), flush=True)
    return rows


if __name__ == "__main__":
    main()
