"""ARTM Table 1 (Vorontsov & Potapenko 2015, sec. 5) on a UCI bag-of-words corpus (default: KOS).

Ten models, 100 topics of which 10 are background, 40 iterations:

* PLSA; LDA as smoothing of every topic (eq. 23-24, α = 0.5, β = 0.01);
* the combinations of smoothing of the background topics (Sm: α = 0.8, β = 0.1 from the first
  iteration), sparsing of the specific topics (Sp) relative to the uniform (u) or background
  (b: β_w = n_w/n) word distribution, switched on at iteration 10 with coefficients adjusted so
  that ~10% of the non-zeros of each φ_t and ~8% of each θ_d become zero per iteration, and
  decorrelation of the specific topics (Dc, γ from the first iteration).

All ten are ONE ``ARTM.fit_grid`` call: one regularizer list (the union of all rows), one
coefficient vector per row (0 switches a regularizer off), compiled once (on CPU the models run
one after the other inside that call, ``batch_size=1``, faster there than vmapping them).  Columns
as in the paper: hold-out perplexity P (9:1 split of the documents, each test document split in
two halves of its tokens; Θ inferred by the model's ``transform`` on the first half, perplexity on
the second; held-out words absent from the training part are ignored, as in sec. 5, and a token
the model gives probability exactly 0 — a word zeroed in every topic of its document, which PLSA's
EM and sparsing produce — is scored by the training unigram n_w/n, BigARTM's convention; the
share of such tokens is reported), background ratio B (eq. 57), sparsity of Φ and Θ over specific topics, kernel contrast,
purity and size (δ = 0.25), coherence (mean PMI, document co-occurrence in the training
collection) of each kernel, of the top-10 and of the top-100 words.  PLSA and LDA have no
background topics, so their measures are over all topics (B = 0).

γ defaults to the paper's 2·10⁵ rescaled from NIPS (n ≈ 2.3·10⁶ tokens, |W| ≈ 1.3·10⁴) to this
corpus by n·|W| (the decorrelation term relative to n_wt scales as γ |T|² / (|W| n)).

    python experiments/artm_table1.py                      # KOS from ../shared/data, writes the table
    python experiments/artm_table1.py --corpus PATH        # any UCI docword file or folder
    python experiments/artm_table1.py --quick              # a few seconds on a synthetic corpus
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import topicjax as tj  # noqa: E402
from topicjax import metrics  # noqa: E402
from topicjax import regularizers as R  # noqa: E402
from topicjax.artm import ARTM  # noqa: E402
from topicjax.regularizers import Step  # noqa: E402

# rows: (label, Sm, Sp, Dc, LDA)
ROWS = [
    ("PLSA", False, None, False, False),
    ("LDA", False, None, False, True),
    ("Sp u", False, "u", False, False),
    ("Sp b", False, "b", False, False),
    ("Dc", False, None, True, False),
    ("Sm Sp u", True, "u", False, False),
    ("Sm Sp b", True, "b", False, False),
    ("Sm Dc", True, None, True, False),
    ("Sm Sp u Dc", True, "u", True, False),
    ("Sm Sp b Dc", True, "b", True, False),
]

# the paper's Table 1 (NIPS), for reference
PAPER = {
    "PLSA": (1923, 0.00, 0.000, 0.000, 0.43, 0.14, 100, 0.84, 0.25, 0.17),
    "LDA": (1902, 0.00, 0.000, 0.000, 0.42, 0.12, 82, 0.93, 0.26, 0.17),
    "Sp u": (2114, 0.24, 0.957, 0.867, 0.53, 0.20, 71, 0.91, 0.25, 0.18),
    "Sp b": (2507, 0.51, 0.957, 0.867, 0.46, 0.56, 151, 0.71, 0.60, 0.58),
    "Dc": (2025, 0.57, 0.561, 0.000, 0.46, 0.38, 109, 0.82, 0.94, 0.56),
    "Sm Sp u": (1961, 0.25, 0.957, 0.867, 0.51, 0.20, 64, 0.97, 0.26, 0.18),
    "Sm Sp b": (2025, 0.49, 0.957, 0.867, 0.45, 0.52, 128, 0.77, 0.55, 0.55),
    "Sm Dc": (1985, 0.59, 0.582, 0.000, 0.46, 0.39, 97, 0.87, 0.93, 0.57),
    "Sm Sp u Dc": (2010, 0.73, 0.980, 0.867, 0.56, 0.73, 78, 0.94, 0.94, 0.62),
    "Sm Sp b Dc": (2026, 0.80, 0.979, 0.867, 0.52, 0.89, 111, 0.81, 0.96, 0.83),
}
COLUMNS = ["P", "B", "S_Phi", "S_Theta", "con", "pur", "ker", "C_ker", "C_10", "C_100"]


def load_corpus(args):
    if args.corpus:
        return tj.Corpus.from_uci(args.corpus), args.corpus
    if args.quick:
        rng = np.random.default_rng(args.seed)
        phi = rng.dirichlet(np.full(300, 0.05), size=12).T
        phi = 0.9 * phi + 0.1 * rng.dirichlet(np.ones(300))[:, None]  # common words: a background
        corpus, _, _ = tj.datasets.sample_lda_corpus(phi, 300, doc_length=(40, 120), alpha=0.3, seed=args.seed)
        return corpus, "synthetic LDA corpus (300 documents, 300 words)"
    return tj.datasets.load_kos(), str(tj.datasets.shared_data_dir() / "kos")


def regularizer_union(sparse_start):
    """One regularizer list for all rows: the union of the rows' regularizers.  Sparsing has the
    paper's trajectory (a Step schedule switching the rate control on); the others are constants
    set per row by the grid."""
    on = Step(sparse_start, 1.0)
    return [
        (R.smooth_phi(), 0.0),                                                # 0 LDA β (all topics)
        (R.smooth_theta(), 0.0),                                              # 1 LDA α
        (R.smooth_phi(topics="background"), 0.0),                             # 2 Sm β = 0.1
        (R.smooth_theta(topics="background"), 0.0),                           # 3 Sm α = 0.8
        (R.sparse_phi(beta="uniform", topics="specific", rate=0.10), on),     # 4 Sp u
        (R.sparse_phi(beta="background", topics="specific", rate=0.10), on),  # 5 Sp b
        (R.sparse_theta(topics="specific", rate=0.08), on),                   # 6 Sp (Θ)
        (R.decorrelate(topics="specific"), 0.0),                              # 7 Dc
    ]


def grid_row(sm, sp, dc, lda, gamma):
    """Coefficients of one row (nan: the regularizer's own schedule, i.e. sparsing switched on)."""
    row = np.zeros(8)
    if lda:
        row[0], row[1] = 0.01, 0.5
    if sm:
        row[2], row[3] = 0.1, 0.8
    if sp == "u":
        row[4], row[6] = np.nan, np.nan
    if sp == "b":
        row[5], row[6] = np.nan, np.nan
    if dc:
        row[7] = gamma
    return row


def heldout_perplexity(phi, theta, heldout, unigram):
    """exp(-Σ n'_dw ln p(w|d) / n') over the held-out halves; p(w|d) = Σ_t φ_wt θ_td, or the
    training unigram n_w/n where the model gives exactly 0.  Returns (perplexity, share of
    held-out tokens that needed the unigram)."""
    phi = np.asarray(phi, np.float64)
    theta = np.asarray(theta, np.float64)
    ll, fallback, total = 0.0, 0, 0
    for s in range(0, heldout.nnz, 1 << 16):
        e = min(s + (1 << 16), heldout.nnz)
        w, d, n = heldout.word_ids[s:e], heldout.doc_ids[s:e], heldout.counts[s:e]
        seen = unigram[w] > 0  # words absent from the training part are ignored (sec. 5)
        w, d, n = w[seen], d[seen], n[seen]
        total += int(n.sum())
        p = np.einsum("nt,tn->n", phi[w], theta[:, d])
        zero = p <= 0
        fallback += int(n[zero].sum())
        p = np.where(zero, unigram[w], p)
        ll += float(np.sum(n * np.log(p)))
    return float(np.exp(-ll / total)), fallback / total


def evaluate(model, train, observed, heldout, background):
    T = model.n_components
    bg = np.asarray(background, np.int64)
    spec = np.setdiff1d(np.arange(T), bg)
    spec = spec[model.topic_alive_[spec] > 0]
    phi, theta = model.phi_, model.theta_
    theta_obs = model.transform(observed).T
    unigram = train.word_counts / train.n_tokens
    ppl, fallback = heldout_perplexity(phi, theta_obs, heldout, unigram)
    n_t = theta @ train.doc_lengths
    ks = metrics.kernel_scores(phi, n_t, delta=0.25)
    coh = lambda **kw: float(np.nanmean(metrics.coherence(phi, train, topics=spec, topic_weights=n_t, **kw)))  # noqa: E731
    return {
        "P": ppl,
        "P0": fallback,
        "B": metrics.background_ratio(phi, theta, train, bg) if bg.size else 0.0,
        "S_Phi": metrics.sparsity(phi, columns=spec, axis=1),
        "S_Theta": metrics.sparsity(theta, columns=spec, axis=0),
        "con": float(np.mean(ks["contrast"][spec])),
        "pur": float(np.mean(ks["purity"][spec])),
        "ker": float(np.mean(ks["size"][spec])),
        "C_ker": coh(k=None, kernel=True),
        "C_10": coh(k=10),
        "C_100": coh(k=min(100, phi.shape[0])),
    }


def fmt_row(label, sm, sp, dc, vals):
    cells = ["+" if sm else "-", sp or "-", "+" if dc else "-"]
    cells += [f"{vals['P']:.0f}", f"{100 * vals['P0']:.3f}", f"{vals['B']:.2f}", f"{vals['S_Phi']:.3f}", f"{vals['S_Theta']:.3f}",
              f"{vals['con']:.2f}", f"{vals['pur']:.2f}", f"{vals['ker']:.0f}", f"{vals['C_ker']:.2f}",
              f"{vals['C_10']:.2f}", f"{vals['C_100']:.2f}"]
    return f"| {label} | " + " | ".join(cells) + " |"


def trend_checks(res):
    """The paper's conclusions, checked on our numbers (True/False with the figures)."""
    out = []
    sp_rows = [r for r in res if "Sp" in r]
    s_phi = min(res[r]["S_Phi"] for r in sp_rows)
    s_theta = min(res[r]["S_Theta"] for r in sp_rows)
    out.append((f"sparsing gives >= 90% zeros in Phi (min over Sp rows: {s_phi:.3f})", s_phi >= 0.90))
    out.append((f"sparsing gives >= 80% zeros in Theta (min over Sp rows: {s_theta:.3f})", s_theta >= 0.80))
    for base, dc in (("PLSA", "Dc"), ("Sm Sp u", "Sm Sp u Dc"), ("Sm Sp b", "Sm Sp b Dc")):
        a, b = res[base], res[dc]
        out.append((f"decorrelation raises purity: {base} {a['pur']:.2f} -> {dc} {b['pur']:.2f}", b["pur"] > a["pur"]))
        out.append((f"decorrelation raises top-10 coherence: {base} {a['C_10']:.2f} -> {dc} {b['C_10']:.2f}",
                    b["C_10"] > a["C_10"]))
    best = res["Sm Sp b Dc"]
    for base in ("PLSA", "LDA"):
        ref = res[base]
        better = [c for c in ("pur", "con", "C_ker", "C_10", "C_100", "S_Phi", "S_Theta", "B") if best[c] > ref[c]]
        loss = best["P"] / ref["P"] - 1
        out.append((f"the full combination (Sm Sp b Dc) improves several measures over {base} ({', '.join(better)}) "
                    f"with a hold-out perplexity change of {100 * loss:+.1f}% (small: < 10%)",
                    len(better) >= 4 and loss < 0.10))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", help="UCI bag-of-words docword file or folder (default: the shared KOS corpus)")
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--background", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--sparse-start", type=int, default=10)
    ap.add_argument("--gamma", type=float, default=None, help="decorrelation coefficient (default: rescaled 2e5)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="a smoke run of a few seconds (synthetic corpus, 12 topics)")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "artm_table1.md"))
    ap.add_argument("--charts", default=None, help="also save convergence charts (Figs. 4-6 style) to this PNG")
    args = ap.parse_args(argv)
    if args.quick:
        args.topics, args.background, args.iterations, args.sparse_start = 12, 2, 14, 5
        if args.out == str(ROOT / "experiments" / "results" / "artm_table1.md"):
            args.out = str(ROOT / "experiments" / "results" / "artm_table1_quick.md")

    t0 = time.perf_counter()
    corpus, source = load_corpus(args)
    train, test = corpus.train_test_split(0.1, seed=args.seed)
    # words absent from the training part are dropped (sec. 5), documents left empty are dropped
    test = test.with_vocab(train.vocab, empty_docs="drop") if test.vocab != train.vocab else test
    keep = test.doc_lengths >= 2
    test = test.subset(np.flatnonzero(keep))
    observed, heldout = test.completion_split("tokens", seed=args.seed)

    n = train.n_tokens
    gamma = args.gamma if args.gamma is not None else 2e5 * (n * train.n_words) / (2.3e6 * 1.3e4)
    print(f"corpus: {source}: train {train}, test {test.n_docs} documents; gamma = {gamma:.4g}", flush=True)

    union = regularizer_union(args.sparse_start)
    grid = np.stack([grid_row(sm, sp, dc, lda, gamma) for _, sm, sp, dc, lda in ROWS])
    base = ARTM(args.topics, background_topics=args.background, regularizers=union, max_iter=args.iterations,
                random_state=args.seed, scores=(), progress=False, transform_iter=30)
    t_fit = time.perf_counter()
    models = base.fit_grid(train, taus=grid)
    fit_s = time.perf_counter() - t_fit
    print(f"fit_grid: {len(models)} models x {args.iterations} iterations in {fit_s:.1f} s "
          f"({fit_s / len(models) / args.iterations:.3f} s per model-iteration, compilation included)", flush=True)

    res = {}
    for (label, sm, sp, dc, lda), m in zip(ROWS, models):
        nominal_bg = list(range(args.topics - args.background, args.topics)) if (sm or sp or dc) else []
        res[label] = evaluate(m, train, observed, heldout, nominal_bg)
        print(fmt_row(label, sm, sp, dc, res[label]), flush=True)

    if args.charts:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from topicjax.evaluation.scores import HeldoutPerplexity, plot_scores

        fig, axes = plt.subplots(3, 3, figsize=(16, 11))
        sc = ("perplexity", "sparsity", "background_ratio", "kernel", "coherence", "coherence_100",
              "kernel_coherence", HeldoutPerplexity(observed, heldout, n_iter=15))
        sm_sp = [(union[2][0], 0.1), (union[3][0], 0.8), union[5], union[6]]
        for row, (label, regs, B) in enumerate([
            ("PLSA (Fig. 4)", [], 0),
            ("Sm + Sp b (Fig. 5)", sm_sp, args.background),
            ("Sm + Sp b + Dc (Fig. 6)", sm_sp + [(union[7][0], gamma)], args.background),
        ]):
            m = ARTM(args.topics, background_topics=B, regularizers=regs, max_iter=args.iterations,
                     random_state=args.seed, scores=sc, score_every=max(1, args.iterations // 10),
                     progress=False).fit(train)
            plot_scores(m.scores_, axes=axes[row])
            axes[row][0].set_title(label)
        fig.savefig(args.charts, dpi=90)
        print(f"charts: {args.charts}")

    total = time.perf_counter() - t0
    cmd = "python " + " ".join(shlex.quote(a) for a in [str(Path(sys.argv[0]).as_posix())] + (argv or sys.argv[1:]))
    lines = [
        "# ARTM Table 1 reproduction" + (" (quick smoke run)" if args.quick else ""),
        "",
        f"Command: `{cmd}`",
        "",
        f"Corpus: {source}; training part {train.n_docs} documents, {train.n_words} words, {n} tokens; "
        f"hold-out {test.n_docs} documents split into halves of their tokens.",
        f"Models: {args.topics} topics ({args.background} background for the regularized rows), "
        f"{args.iterations} iterations, seed {args.seed}; sparsing from iteration {args.sparse_start} "
        f"(10%/8% of non-zeros per iteration), background smoothing α = 0.8, β = 0.1, LDA α = 0.5, β = 0.01, "
        f"decorrelation γ = {gamma:.4g}.",
        f"All {len(ROWS)} models trained in one compiled `ARTM.fit_grid` call: {fit_s:.1f} s "
        f"({fit_s / len(models) / args.iterations:.3f} s per model-iteration, compilation included); "
        f"whole script {total:.0f} s.",
        "P0 %: share of held-out tokens to which the model gives probability 0, scored by the training "
        "unigram n_w/n (BigARTM's convention); "
        + ("no held-out token needed it in this run (held-out words absent from the training part are ignored, "
           "sec. 5)." if all(r["P0"] == 0 for r in res.values())
           else "without it those models' perplexity would be infinite."),
        "",
        "| model | Sm | Sp | Dc | P | P0 % | B | S_Φ | S_Θ | con | pur | ker | C_ker | C_10 | C_100 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [fmt_row(label, sm, sp, dc, res[label]) for label, sm, sp, dc, _ in ROWS]
    lines += ["", "Trends of the paper, checked on these numbers:", ""]
    lines += [f"- [{'x' if ok else ' '}] {text}" for text, ok in trend_checks(res)]
    lines += ["", "The paper's Table 1 (NIPS, 1,566 documents, |W| ≈ 13k), for reference:", "",
              "| model | P | B | S_Φ | S_Θ | con | pur | ker | C_ker | C_10 | C_100 |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {k} | " + " | ".join(str(x) for x in v) + " |" for k, v in PAPER.items()]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({total:.0f} s)")
    return res


if __name__ == "__main__":
    main()
