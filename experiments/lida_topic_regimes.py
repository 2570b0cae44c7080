"""How many topics does FTM/LIDA keep, and does it depend on the start?  (Table 1 note.)

The paper reports thousands of topics on KOS (about 4 documents and 43-47 words per topic, "over
4000" topics); our Table 1 chains, started from a random dense assignment to 50 topics, keep about
100.  This script runs the same training fold (Table 1's fold 0, same split and seeds) from two
starts, next to an LDA baseline, and records the trajectory:

* ``dense``: the Table 1 start (every token uniform over ``--init-topics`` topics);
* ``lda``: the LDA baseline (``--lda-topics`` topics; not a start of FTM, for the comparison);
* ``ibp``: Θ̄ drawn from the three-parameter IBP prior with η₀ = ``--eta``, δ₀ = ``--delta`` (the
  defaults, η = 6 and δ = 300, give an expected ~5,000 topics with ~4 documents each, the
  paper's regime; every token uniform over its document's topics).

Reported per start: live topics, documents per topic, topics per document, δ and held-out
log-perplexity (document completion, as Table 1) at the checkpoints, and a second reading of
eq. (45): the same θ (sampled on the observed half) scoring *all* tokens of the test documents,
observed half included ("both halves").  The paper's text ("we sample the topics of the test
documents on half of the corpus and evaluate perplexity on the other half") gives the first; the
second is reported because eq. (45) sums n_v·d* over the test documents without saying which
half, and it favours models whose θ fits the observed half closely (many small topics).

    python experiments/lida_topic_regimes.py --corpus kos --model ftm --sweeps 150
    python experiments/lida_topic_regimes.py --quick
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "experiments"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="kos")
    ap.add_argument("--model", default="ftm", choices=["ftm", "ftm1", "lida"])
    ap.add_argument("--sweeps", type=int, default=150)
    ap.add_argument("--checkpoints", type=int, default=1, help="held-out evaluations (fits of increasing length)")
    ap.add_argument("--init-topics", type=int, default=50)
    ap.add_argument("--eta", type=float, default=6.0)
    ap.add_argument("--delta", type=float, default=300.0)
    ap.add_argument("--starts", default="dense,ibp,lda")
    ap.add_argument("--lda-topics", type=int, default=100)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    command = "python experiments/lida_topic_regimes.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    import lida_table1 as T
    from topicjax.evaluation import metrics
    from topicjax.lida import LIDA

    settings = dict(folds=5, seed=0, news_docs=1000, news_words=1407, news_stop_words="english")
    spec = "quick" if args.quick else args.corpus
    if args.quick:
        args.sweeps, args.eta, args.delta, args.init_topics, args.checkpoints, args.lda_topics = 12, 3.0, 10.0, 6, 1, 6
    name, corpus, folds = T.corpus_and_folds(spec, settings)
    train, observed, held, _ = T.fold_split(corpus, folds, 0, seed=0)
    lines = ["# FTM/LIDA topic counts by start (Table 1 note)", "", f"Command: `{command}`", "",
             f"{name} fold 0: {train.n_docs} training documents, {train.n_tokens} tokens; model {args.model}; "
             f"sweeps {args.sweeps} (hyperparameters from sweep {args.sweeps // 5}, averaging over the last third).", "",
             "Counts are means of the last sample, *active* from the masks b, *assigned* from the tokens "
             "(n_kd > 0, n_vk > 0: the kind of sec. 5.3's KOS figures, HDP-LDA / FTM / LIDA 9 / 4 / 4 documents "
             "and 158 / 43 / 47 words per topic).", "",
             "| start | sweeps | live topics | K_max | docs/topic active / assigned | topics/doc active / assigned "
             "| words/topic active / assigned | α | η | δ | log-perplexity | both halves | fit s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    traj = []
    for start in [s.strip() for s in args.starts.split(",") if s.strip()]:
        for c in range(1, args.checkpoints + 1):
            sweeps = args.sweeps * c // args.checkpoints
            kw = dict(max_iter=sweeps, burn_in=(2 * sweeps) // 3, hyper_start=sweeps // 5, random_state=100 * 0,
                      progress=False, eval_every=0, sigma=0.0)
            if args.model == "ftm1":
                kw.update(delta=1.0, fixed_hyper=("delta",))
            if args.model == "lida":
                kw.update(zeta=0.25)
            variant = "lida" if args.model == "lida" else "ftm"
            if start == "lda":  # the baseline: LDA with --lda-topics topics, α and β sampled
                common = ("max_iter", "burn_in", "hyper_start", "random_state", "progress", "eval_every")
                model = LIDA(variant="lda", n_components=args.lda_topics, **{k: kw[k] for k in common})
            elif start == "dense":
                model = LIDA(variant=variant, n_components=200, init_topics=args.init_topics, **kw)
            else:
                delta = 1.0 if args.model == "ftm1" else args.delta
                model = LIDA(variant=variant, n_components=200, init="ibp", eta=args.eta, **{**kw, "delta": delta})
            t0 = time.perf_counter()
            model.fit(train)
            fit_s = time.perf_counter() - t0
            # θ of the test documents sampled once on the observed half (what log_predictive does),
            # then both readings of eq. (45) from it: the held-out half, and all tokens (both halves;
            # the halves split each document's counts, so the log-likelihood of all tokens is the sum)
            theta = model.transform(observed).T
            ll, n = metrics.log_likelihood(model.phi_, theta, held), held.n_tokens
            ll2 = ll + metrics.log_likelihood(model.phi_, theta, observed)
            n2 = n + observed.n_tokens
            h = model.hyper_
            row = (f"| {start} | {sweeps} | {model.n_topics_} | {model.n_components_} | "
                   + " | ".join(f"{f().mean():.1f} / {f('assigned').mean():.1f}" for f in (
                       model.documents_per_topic, model.topics_per_document, model.words_per_topic))
                   + f" | {h['alpha']:.3g} | {h['eta']:.3g} | {h['delta']:.3g} | "
                   f"{-ll / n:.4f} | {-ll2 / n2:.4f} | {fit_s:.0f} |")
            lines.append(row)
            print(row, flush=True)
            traj.append((start, [r["n_topics"] for r in model.history_]))
    lines += ["", "Live topics along the longest fit of each start (every tenth sweep):", ""]
    for start, t in traj[args.checkpoints - 1:: args.checkpoints]:
        lines.append(f"- {start}: " + ", ".join(str(v) for v in t[::10]))
    out = Path(args.out) if args.out else ROOT / "experiments" / "results" / (
        "lida_topic_regimes_quick.md" if args.quick else f"lida_topic_regimes_{name}_{args.model}.md")
    text = "\n".join(lines + T.kept_notes(out)) + "\n"
    out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
