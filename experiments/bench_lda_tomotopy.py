"""Speed of our LDA Gibbs sampler against tomotopy's ``LDAModel`` on the same corpus and K.

Both run plain LDA with fixed α and β (no hyperparameter optimisation) from a random start, timed
in alternating rounds of ``--sweeps`` sweeps (the CPU is shared, so both see the same background
load); we report the median round as tokens per second (tokens x sweeps / seconds, compile and
initialisation excluded), the ratio, and the training perplexity of both point estimates
(φ = (n_wk + β)/(n_k + Wβ), θ = (n_dk + α)/(n_d + Kα)) measured by the same function, so that the
speed is compared at comparable quality.  tomotopy is a comparison tool only
(``pip install tomotopy``), never a dependency of topicjax.

Our sampler: ``mode="parallel"`` (batched, counts refreshed after every batch of tokens,
``mh_steps`` Metropolis-Hastings steps per token with O(1) document/word proposals), the dense
variant ``mh_steps=0``, and the exact sequential sweep (``mode="exact"``, a ``lax.scan`` over
tokens) for reference.  tomotopy: one worker (single thread) and all workers.

    python experiments/bench_lda_tomotopy.py                     # KOS, K = 100, 50 sweeps
    python experiments/bench_lda_tomotopy.py --corpus PATH --k 50 --sweeps 100
    python experiments/bench_lda_tomotopy.py --quick             # seconds, synthetic corpus
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

import topicjax as tj  # noqa: E402
from topicjax import lida as L  # noqa: E402
from topicjax import metrics  # noqa: E402


def load(spec):
    if spec == "kos":
        return "kos", tj.datasets.load_kos()
    return Path(spec).name, tj.Corpus.load(spec)


def point_estimates(n_dk, n_wk, alpha, beta):
    n_dk = np.asarray(n_dk, np.float64)
    n_wk = np.asarray(n_wk, np.float64)
    K, W = n_dk.shape[1], n_wk.shape[0]
    phi = (n_wk + beta) / (n_wk.sum(0) + W * beta)
    theta = ((n_dk + alpha) / (n_dk.sum(1, keepdims=True) + K * alpha)).T
    return phi, theta


class Ours:
    """Our sampler, kept between timing rounds."""

    def __init__(self, corpus, K, alpha, beta, mode, mh_steps, batch, seed):
        self.corpus, self.alpha, self.beta = corpus, alpha, beta
        self.tokens = L.make_tokens(corpus)
        self.cfg = L.Config(variant="lda", n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words,
                            n_rows=corpus.n_words, n_tokens=corpus.n_tokens, mode=mode,
                            batch=min(batch, corpus.n_tokens), mh_steps=mh_steps, sample=())
        hyper = dict(alpha=alpha, beta=beta, eta=1.0, delta=1.0, gamma=1.0, xi=1.0)
        self.key = jax.random.key(seed)
        self.state = L.init_state(jax.random.fold_in(self.key, 0), self.tokens, self.cfg, hyper, K)
        self.done = 0
        self.run(1)  # compile

    def run(self, sweeps):
        t0 = time.perf_counter()
        for _ in range(sweeps):
            self.done += 1
            self.state = L.sweep(self.state, jax.random.fold_in(self.key, self.done), self.tokens, self.cfg)
        jax.block_until_ready(self.state)
        return time.perf_counter() - t0

    def perplexity(self):
        phi, theta = point_estimates(self.state.n_dk, self.state.n_wk, self.alpha, self.beta)
        return metrics.perplexity(phi, theta, self.corpus)


class Tomotopy:
    def __init__(self, corpus, K, alpha, beta, workers, seed):
        import tomotopy as tp

        self.corpus, self.K, self.alpha, self.beta, self.workers = corpus, K, alpha, beta, workers
        self.mdl = tp.LDAModel(k=K, alpha=alpha, eta=beta, seed=seed)
        vocab = corpus.vocab
        for doc in corpus.to_lists():
            self.mdl.add_doc([vocab[w] for w, c in doc for _ in range(c)])
        self.mdl.optim_interval = 0  # fixed α and β, like ours
        self.mdl.train(0, workers=workers)  # initialisation

    def run(self, sweeps):
        t0 = time.perf_counter()
        self.mdl.train(sweeps, workers=self.workers)
        return time.perf_counter() - t0

    def perplexity(self):
        mdl, corpus = self.mdl, self.corpus
        index = {w: i for i, w in enumerate(corpus.vocab)}
        rows = np.array([index[w] for w in mdl.used_vocabs])
        n_wk = np.zeros((corpus.n_words, self.K))
        for k in range(self.K):  # unnormalised distributions are counts + prior
            n_wk[rows, k] = np.asarray(mdl.get_topic_word_dist(k, normalize=False)) - self.beta
        n_dk = np.array([d.get_topic_dist(normalize=False) for d in mdl.docs]) - self.alpha
        phi, theta = point_estimates(np.maximum(n_dk, 0), np.maximum(n_wk, 0), self.alpha, self.beta)
        return metrics.perplexity(phi, theta, corpus)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="kos")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--sweeps", type=int, default=50)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--beta", type=float, default=0.01)
    ap.add_argument("--mh-steps", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=65536)
    ap.add_argument("--exact-sweeps", type=int, default=2, help="sweeps of the (slow) exact mode, 0 to skip")
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (median reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    command = "python experiments/bench_lda_tomotopy.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.quick:
        name, corpus = "bars (synthetic)", tj.datasets.make_bars(n_docs=200, seed=0)[0]
        args.k, args.sweeps, args.exact_sweeps, args.rounds = 10, 5, 1, 2
        out = Path(args.out) if args.out else ROOT / "experiments" / "results" / "bench_lda_tomotopy_quick.md"
    else:
        name, corpus = load(args.corpus)
        out = Path(args.out) if args.out else ROOT / "experiments" / "results" / "bench_lda_tomotopy.md"
    print(f"{name}: {corpus.n_docs} docs, {corpus.n_words} words, {corpus.n_tokens} tokens; K={args.k}", flush=True)
    rows = []
    # The machine is shared: the samplers are timed in alternating rounds of --sweeps sweeps and the
    # median round is reported, so that both see the same background load.
    samplers = [("topicjax parallel, MH", lambda: Ours(corpus, args.k, args.alpha, args.beta, "parallel",
                                                       args.mh_steps, args.batch_size, args.seed))]
    try:
        import tomotopy  # noqa: F401

        have_tp = True
        for workers in (1, 0):
            samplers.append((f"tomotopy LDAModel, workers={workers or os.cpu_count()}",
                             lambda w=workers: Tomotopy(corpus, args.k, args.alpha, args.beta, w, args.seed)))
    except ImportError:
        have_tp = False
        print("tomotopy is not installed (pip install tomotopy): comparison skipped")
    objs = [(label, make()) for label, make in samplers]
    times = {label: [] for label, _ in objs}
    for r in range(args.rounds):
        for label, obj in objs:
            times[label].append(obj.run(args.sweeps))
            print(f"round {r} {label:32s} {corpus.n_tokens * args.sweeps / times[label][-1] / 1e6:7.2f} M tokens/s",
                  flush=True)
    for label, obj in objs:
        med = float(np.median(times[label])) / args.sweeps
        rows.append((label, args.sweeps * args.rounds, corpus.n_tokens / med, med, obj.perplexity(),
                     f"median of {args.rounds} rounds"))
    # for reference, slower settings of ours (one round)
    extra = [("topicjax parallel, dense (mh_steps=0)", "parallel", 0, max(1, args.sweeps // 10))]
    if args.exact_sweeps:
        extra.append(("topicjax exact (sequential)", "exact", 0, args.exact_sweeps))
    for label, mode, mh, sw in extra:
        obj = Ours(corpus, args.k, args.alpha, args.beta, mode, mh, args.batch_size, args.seed)
        dt = obj.run(sw) / sw
        rows.append((label, sw, corpus.n_tokens / dt, dt, obj.perplexity(), "perplexity after fewer sweeps"))
    for label, sw, tps, s_, perp, _ in rows:
        print(f"{label:38s} {tps / 1e6:7.2f} M tokens/s  {s_:.4f} s/sweep  train perplexity {perp:.1f}", flush=True)
    lines = ["# LDA Gibbs sampling speed: topicjax vs tomotopy", "", f"Command: `{command}`", "",
             f"Corpus: {name}, {corpus.n_docs} documents, {corpus.n_words} words, {corpus.n_tokens} tokens; "
             f"K = {args.k}, α = {args.alpha}, β = {args.beta}, CPU cores visible: {os.cpu_count()} "
             f"(shared with other jobs: timings are noisy).", "",
             "| sampler | sweeps | M tokens/s | s/sweep | training perplexity | note |", "|---|---|---|---|---|---|"]
    for label, sw, tps, s, perp, note in rows:
        lines.append(f"| {label} | {sw} | {tps / 1e6:.2f} | {s:.4f} | {perp:.1f} | {note} |")
    if have_tp:
        ours = rows[0][2]
        tp1 = next(r[2] for r in rows if "workers=1" in r[0])
        tpn = next(r[2] for r in rows if r[0].startswith("tomotopy") and "workers=1" not in r[0])
        lines += ["", f"Ratio (topicjax parallel MH / tomotopy): {ours / tp1:.2f} against one tomotopy worker, "
                      f"{ours / tpn:.2f} against all workers."]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return rows


if __name__ == "__main__":
    main()
