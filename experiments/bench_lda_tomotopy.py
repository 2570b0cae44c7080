"""Speed and held-out quality of our LDA Gibbs sweeps against tomotopy's ``LDAModel`` at equal K.

Samplers (plain LDA, fixed α and β, random start, the same training documents):

* topicjax ``mode="parallel"``: documents in parallel with their own counts exact token by token,
  word-topic counts refreshed between blocks (AD-LDA; :mod:`topicjax.lida.parallel`): the compiled
  C++ kernel (:mod:`topicjax.lida.kernel`) with 1 and 2 threads, and the XLA sweep with the dense
  draw over the K topics (``mh_steps=0``) and with 2 Metropolis-Hastings steps of O(1) proposals
  (``--mh-steps``);
* topicjax ``mode="exact"`` (the sequential reference; fewer sweeps, reported for its speed);
* tomotopy ``LDAModel`` with 1 and 2 workers (``pip install tomotopy``; comparison only, never a
  dependency of topicjax).  Equal workers: kernel threads = tomotopy workers.

Speed: the samplers are timed in alternating rounds of ``--sweeps`` sweeps (A, B, C, A, B, C ...,
so that all see the same background load) and the median round is reported as tokens per second
(training tokens x sweeps / seconds; compilation and initialisation excluded).  Quality: after the
same total number of sweeps, the held-out log-perplexity of every sampler's point estimate
φ = (n_wk + β)/(n_k + Wβ), measured by one procedure for all (document completion, eq. 44-46: the
test documents' topics sampled on one half of their tokens with φ fixed, the other half scored).

Only a quiet machine gives timings (``uptime`` load < 1); on a shared machine run it to check
that it works, and compare ratios only.

    python experiments/bench_lda_tomotopy.py                        # KOS, K = 100, 5 rounds of 20 sweeps
    python experiments/bench_lda_tomotopy.py --corpus PATH --k 50 --sweeps 50
    python experiments/bench_lda_tomotopy.py --quick                # seconds, synthetic corpus
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
import jax.numpy as jnp  # noqa: E402

import topicjax as tj  # noqa: E402
from topicjax.lida import sampler as lida_sampler, state as lida_state  # noqa: E402
from topicjax.lida.evaluate import gibbs_fold_in  # noqa: E402


def load(spec):
    if spec == "kos":
        return "kos", tj.datasets.load_kos()
    return Path(spec).name, tj.Corpus.load(spec)


def heldout_logperp(phi, corpus_test, alpha, seed=0, n_sweeps=40):
    """Document completion with φ fixed (exact sequential sweeps over the observed halves, θ
    averaged after half of them), log-perplexity of the held-out halves."""
    observed, held = corpus_test.completion_split("tokens", seed=seed)
    tok = lida_state.make_tokens(observed)
    theta = gibbs_fold_in(jax.random.key(seed), jnp.asarray(phi, jnp.float32), jnp.zeros(phi.shape[1]), 1.0, alpha,
                          1.0, 1.0, 0.0, tok.doc, tok.word, tok.n_d, jnp.zeros(observed.n_docs), n_sweeps=n_sweeps,
                          burn_in=n_sweeps // 2, focused=False)
    theta = np.asarray(theta, np.float64)
    p = np.einsum("nk,kn->n", phi[held.word_ids], theta[:, held.doc_ids])
    return float(-np.sum(held.counts * np.log(p)) / held.n_tokens)


def phi_of(n_wk, beta):
    n_wk = np.asarray(n_wk, np.float64)
    return (n_wk + beta) / (n_wk.sum(0) + n_wk.shape[0] * beta)


class Ours:
    """Our sampler, kept between timing rounds.  ``backend``: "ffi" (the compiled kernel of
    topicjax.lida.kernel, ``threads`` threads) or "xla" (the XLA sweep)."""

    def __init__(self, corpus, K, alpha, beta, mode, mh_steps, block_tokens, seed, backend="xla", threads=1):
        self.backend, self.threads = backend, threads
        self.corpus, self.alpha, self.beta = corpus, alpha, beta
        self.tokens = lida_state.make_tokens(corpus, block_tokens=block_tokens)
        self.cfg = lida_state.Config(variant="lda", n_topics=K, n_docs=corpus.n_docs, n_words=corpus.n_words,
                            n_rows=corpus.n_words, n_tokens=corpus.n_tokens, mode=mode, mh_steps=mh_steps, sample=())
        hyper = dict(alpha=alpha, beta=beta, eta=1.0, delta=1.0, gamma=1.0, xi=1.0)
        self.key = jax.random.key(seed)
        self.state = lida_state.init_state(jax.random.fold_in(self.key, 0), self.tokens, self.cfg, hyper, K)
        self.done = 0
        self.run(1)  # compile

    def run(self, sweeps):
        from topicjax.lida import kernel

        kernel.set_backend(self.backend)  # clears the compilation caches only when it changes
        if self.backend == "ffi":
            kernel.set_threads(self.threads)
        t0 = time.perf_counter()
        for _ in range(sweeps):
            self.done += 1
            self.state = lida_sampler.sweep(self.state, jax.random.fold_in(self.key, self.done), self.tokens, self.cfg,
                                 donate=True)
        jax.block_until_ready(self.state)
        return time.perf_counter() - t0

    def phi(self):
        return phi_of(self.state.n_wk, self.beta)


class Tomotopy:
    def __init__(self, corpus, K, alpha, beta, workers, seed):
        import tomotopy as tp

        self.corpus, self.K, self.beta, self.workers = corpus, K, beta, workers
        self.mdl = tp.LDAModel(k=K, alpha=alpha, eta=beta, seed=seed)
        vocab = corpus.vocab
        for doc in corpus.to_lists():
            self.mdl.add_doc([vocab[w] for w, c in doc for _ in range(c)])
        self.mdl.optim_interval = 0  # fixed α and β, like ours
        self.mdl.train(0, workers=workers)  # initialisation
        self.done = 1
        self.mdl.train(1, workers=workers)

    def run(self, sweeps):
        t0 = time.perf_counter()
        self.mdl.train(sweeps, workers=self.workers)
        self.done += sweeps
        return time.perf_counter() - t0

    def phi(self):
        index = {w: i for i, w in enumerate(self.corpus.vocab)}
        rows = np.array([index[w] for w in self.mdl.used_vocabs])
        n_wk = np.zeros((self.corpus.n_words, self.K))
        for k in range(self.K):  # unnormalised distributions are counts + prior
            n_wk[rows, k] = np.asarray(self.mdl.get_topic_word_dist(k, normalize=False)) - self.beta
        return phi_of(np.maximum(n_wk, 0), self.beta)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="kos")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--sweeps", type=int, default=20, help="sweeps per timing round")
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (median reported)")
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--beta", type=float, default=0.01)
    ap.add_argument("--mh-steps", type=int, default=2)
    ap.add_argument("--block-tokens", type=int, default=None, help="default: 1/16 of the training tokens, <= 65536")
    ap.add_argument("--exact-sweeps", type=int, default=2, help="sweeps of the (slow) exact mode, 0 to skip")
    ap.add_argument("--test-fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    command = "python experiments/bench_lda_tomotopy.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.quick:
        name, corpus = "bars (synthetic)", tj.datasets.make_bars(n_docs=300, seed=0)[0]
        args.k, args.sweeps, args.exact_sweeps, args.rounds = 10, 3, 1, 2
        out = Path(args.out) if args.out else ROOT / "experiments" / "results" / "bench_lda_tomotopy_quick.md"
    else:
        name, corpus = load(args.corpus)
        out = Path(args.out) if args.out else ROOT / "experiments" / "results" / "bench_lda_tomotopy.md"
    train, test = corpus.train_test_split(args.test_fraction, seed=args.seed)
    test = test.subset(np.flatnonzero(test.doc_lengths >= 2))
    block = args.block_tokens or int(min(65536, max(1, -(-train.n_tokens // 16))))
    print(f"{name}: {train.n_docs} training docs, {train.n_tokens} tokens, {test.n_docs} test docs; K={args.k}; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    from topicjax.lida import kernel

    samplers = []
    if kernel.available():
        for threads in (1, 2):
            samplers.append((f"topicjax parallel, C++ kernel, threads={threads}",
                             lambda t=threads: Ours(train, args.k, args.alpha, args.beta, "parallel", 0, block,
                                                    args.seed, "ffi", t)))
    else:
        print(f"the compiled LIDA kernel is unavailable ({kernel.load_error()}): XLA sweeps only")
    samplers += [
        ("topicjax parallel, XLA, dense draw",
         lambda: Ours(train, args.k, args.alpha, args.beta, "parallel", 0, block, args.seed, "xla")),
        (f"topicjax parallel, XLA, {args.mh_steps} MH steps",
         lambda: Ours(train, args.k, args.alpha, args.beta, "parallel", args.mh_steps, block, args.seed, "xla")),
    ]
    try:
        import tomotopy  # noqa: F401

        for workers in (1, 2):
            samplers.append((f"tomotopy LDAModel, workers={workers}",
                             lambda w=workers: Tomotopy(train, args.k, args.alpha, args.beta, w, args.seed)))
    except ImportError:
        print("tomotopy is not installed (pip install tomotopy): comparison skipped")
    objs = [(label, make()) for label, make in samplers]
    times = {label: [] for label, _ in objs}
    for r in range(args.rounds):
        for label, obj in objs:
            times[label].append(obj.run(args.sweeps))
            print(f"round {r} {label:34s} {train.n_tokens * args.sweeps / times[label][-1] / 1e6:7.2f} M tokens/s",
                  flush=True)
    rows = []
    for label, obj in objs:
        med = float(np.median(times[label])) / args.sweeps
        rows.append((label, obj.done, train.n_tokens / med, med, heldout_logperp(obj.phi(), test, args.alpha)))
    if args.exact_sweeps:
        obj = Ours(train, args.k, args.alpha, args.beta, "exact", 0, block, args.seed, "xla")
        dt = obj.run(args.exact_sweeps) / args.exact_sweeps
        rows.append(("topicjax exact (sequential)", obj.done, train.n_tokens / dt, dt, float("nan")))
    lines = ["# LDA Gibbs sampling: topicjax vs tomotopy", "", f"Command: `{command}`", "",
             f"Corpus: {name}, {train.n_docs} training documents, {train.n_words} words, {train.n_tokens} tokens, "
             f"{test.n_docs} test documents; K = {args.k}, α = {args.alpha}, β = {args.beta}; parallel blocks of "
             f"{block} tokens; {os.cpu_count()} CPU cores, load average at the start {os.getloadavg()[0]:.2f} "
             "(timings are results only on a quiet machine).", "",
             "| sampler | sweeps | M tokens/s | s/sweep | held-out log-perplexity after these sweeps |",
             "|---|---|---|---|---|"]
    for label, sw, tps, s, lp in rows:
        lines.append(f"| {label} | {sw} | {tps / 1e6:.2f} | {s:.4f} | {'—' if np.isnan(lp) else f'{lp:.4f}'} |")
    tp = {w: next((r[2] for r in rows if r[0] == f"tomotopy LDAModel, workers={w}"), None) for w in (1, 2)}
    ours = {w: next((r[2] for r in rows if r[0] == f"topicjax parallel, C++ kernel, threads={w}"), None) for w in (1, 2)}
    if tp[1] and ours[1]:
        lines += ["", f"Ratio at equal workers (topicjax C++ kernel / tomotopy): {ours[1] / tp[1]:.2f} with 1, "
                      f"{ours[2] / tp[2]:.2f} with 2."]
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)
    return rows


if __name__ == "__main__":
    main()
