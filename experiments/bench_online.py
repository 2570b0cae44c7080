"""Online ARTM at NYTimes and PubMed size (issue 28, items 2 and 4): one process per system, wall
time, peak resident memory and held-out perplexity, BigARTM's ``fit_online`` beside ours.

The corpus is the generator's (:func:`topicjax.datasets.lda_corpus_parts`, ``preset="nytimes"``
or ``"pubmed"``, T = 100 planted topics, seed 0) written *straight into an on-disk batch store*
(:func:`topicjax.scale.store.write_store`, batches of ``--batch`` documents) by a child process
of its own, whose time and peak are reported: at PubMed size (8.2 M documents, ~480 M non-zeros,
~730 M tokens) the corpus is never in memory.  ``--heldout`` further documents of the same
generator (same Φ, documents after the training ones) are kept in memory for the perplexity.

Systems (each a fresh process under ``/usr/bin/time -v``; ``--systems`` picks them):

* ``ours-api``: :func:`topicjax.scale.online.fit_online`, one update per batch, τ0 = 1024,
  κ = 0.7, ``--doc-passes`` Θ passes per batch; with ``--passes`` P > 1, the fit after one pass is
  saved and then resumed (``state=``, the step counter continues) for the remaining P - 1;
* ``ours-cli``: ``python -m topicjax.cli fit-online STORE ...`` (the ``topicjax`` command) with the same settings, the model
  saved and reloaded for the perplexity (one pass only);
* ``ours-partial``: ``ARTM.partial_fit`` called on every batch of the store in order (what a user
  with their own batch source writes; one pass only);
* ``ours-convert``: :func:`topicjax.scale.convert.convert_uci` of the UCI file below (timed; the
  store it writes is deleted);
* ``bigartm-convert``: the store written out as a UCI docword file (once, untimed, streamed batch
  by batch), then BigARTM's own ``BatchVectorizer`` (timed) into batches of the same size;
* ``bigartm``: ``fit_online`` with the same regularizers, τ0, κ, document passes and 2
  processors, P times (BigARTM continues its step counter across calls), on the batches
  ``bigartm-convert`` left (or converting first, timed as a stage of its own).

All systems fit ARTM with smoothing of Φ (τ = ``SMOOTH``), sparsing of Θ (τ = ``SPARSE``) and
decorrelation of Φ (τ = ``DECOR_SHARE`` x the tokens per batch and topic), with BigARTM's conventions, which ours follow: smoothing adds
τ to every n_wt, sparsing subtracts τ from every n_td, decorrelation is eq. 31 with BigARTM's γ.
BigARTM takes its batches in file-system order; the generator's documents are exchangeable, so
the order of batches does not favour either system.

Perplexity: :func:`bench_scale.completion_perplexity` (one numpy evaluator for every system,
checked there against the true Φ) on the held-out documents.  Results accumulate in
``--workdir`` (one JSON per size, system and number of passes), so that runs at different sizes
or of different systems make one table, written with ``--write`` between this script's markers
in ``experiments/results/bench_scale.md``.  Timings mean something only on a quiet machine:
``--write`` refuses when the 1-minute load at the start is >= 1 (``--force`` overrides).

    python experiments/bench_online.py --size nytimes --systems ours-api bigartm --passes 3
    python experiments/bench_online.py --size pubmed --systems ours-api ours-cli ours-partial bigartm --write
    python experiments/bench_online.py --quick          # a small corpus, every system found, a minute
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(ROOT)]
import bench_scale as bs  # noqa: E402 - the shared evaluator, child runner and report helpers

SYSTEMS = ("ours-api", "ours-cli", "ours-partial", "ours-convert", "bigartm-convert", "bigartm")
SIZES = {"nytimes": dict(preset="nytimes"), "pubmed": dict(preset="pubmed"),
         "quick": dict(preset=None, n_docs=4_000, n_words=3_000, mean_length=80.0)}
SMOOTH, SPARSE = 0.01, 0.1
# decorrelation's τ against the counts it competes with: a share of the tokens a topic gets in one
# batch (a fixed τ that is mild at NYTimes size wipes Φ out on a small corpus, for both systems)
DECOR_SHARE = 0.01
TAU0, KAPPA = 1024.0, 0.7
BEGIN, END = "<!-- bench_online.py: begin -->", "<!-- bench_online.py: end -->"


# ============================================================================ the store
def generator_args(a) -> dict:
    from topicjax.data.synthetic import PRESETS

    kw = dict(SIZES[a.size])
    preset = kw.pop("preset")
    if preset is not None:
        kw = dict(PRESETS[preset])
    return dict(kw, n_topics=a.topics, seed=a.seed)


def child_store(cfg, st):
    """Write the training documents into the store, straight from the generator; keep the held-out
    documents (the next ``heldout`` documents of the same generator) and the training words."""
    from topicjax import datasets
    from topicjax.data.synthetic import LDAGenerator
    from topicjax.scale.store import write_store

    g = cfg["generator"]
    known = np.zeros(g["n_words"], bool)

    def tap(parts):
        for part in parts:
            known[part.word_ids] = True
            yield part

    before = bs._rss()
    t0 = time.perf_counter()
    parts, phi = datasets.lda_corpus_parts(**g, chunk_docs=cfg["chunk_docs"])
    store = write_store(tap(parts), cfg["store"], batch_size=cfg["batch"])
    st.add("lda_corpus_parts -> write_store", time.perf_counter() - t0,
           note=f"{store.n_docs:,} documents, {store.nnz:,} non-zeros, {store.n_tokens:,} tokens, "
                f"{store.n_batches} batches", rss_before=before)
    # the held-out documents: the same generator with ``heldout`` more documents, from the first
    # document after the training ones (a chunk's draws depend on its bounds only)
    gen = LDAGenerator(**dict(g, n_docs=g["n_docs"] + cfg["heldout"]))
    chunk = next(gen.chunks(cfg["heldout"], start=g["n_docs"]))
    np.savez(cfg["held"], indptr=chunk.offsets, indices=chunk.word_ids, data=chunk.counts, known=known,
             phi_true=phi.astype(np.float32), stats=np.array([store.n_docs, store.nnz, store.n_tokens]))


# ============================================================================ the systems
def _regularizers(cfg):
    from topicjax import regularizers as R

    return [(R.smooth_phi(), SMOOTH), (R.sparse_theta(), SPARSE), (R.decorrelate(), cfg["decor"])]


def _save(cfg, model, passes):
    np.save(cfg["phi"].replace(".npy", f"_p{passes}.npy"), np.ascontiguousarray(model.phi_, np.float32))


def child_ours_api(cfg, st):
    from topicjax.scale.online import fit_online
    from topicjax.scale.store import BatchStore

    store = BatchStore(cfg["store"])
    kw = dict(update_every=1, learning_offset=TAU0, learning_decay=KAPPA, doc_passes=cfg["doc_passes"],
              regularizers=_regularizers(cfg), random_state=0, progress=False)
    before = bs._rss()
    t0 = time.perf_counter()
    model = fit_online(store, cfg["topics"], passes=1, **kw)
    wall = time.perf_counter() - t0
    secs = [h["seconds"] for h in model.history_ if "seconds" in h]
    st.add("1 pass (compilation included)", wall, note=f"median batch {np.median(secs):.3f} s" if secs else "",
           rss_before=before)
    _save(cfg, model, 1)
    if cfg["passes"] > 1:
        before = bs._rss()
        t0 = time.perf_counter()
        model = fit_online(store, cfg["topics"], passes=cfg["passes"] - 1, state=model.online_state_, **kw)
        wall = time.perf_counter() - t0
        st.add(f"passes 2-{cfg['passes']} (resumed)", wall, wall / (cfg["passes"] - 1), rss_before=before)
        _save(cfg, model, cfg["passes"])


def child_ours_partial(cfg, st):
    import scipy.sparse as sp

    import topicjax as tj
    from topicjax.scale.store import BatchStore

    store = BatchStore(cfg["store"])
    model = tj.ARTM(cfg["topics"], regularizers=_regularizers(cfg), learning_offset=TAU0, learning_decay=KAPPA,
                    doc_passes=cfg["doc_passes"], random_state=0, overregularized="keep")
    before = bs._rss()
    t0 = time.perf_counter()
    for i in range(store.n_batches):
        b = store.batch(i)
        model.partial_fit(sp.csr_matrix((b.counts, b.words, b.offsets), shape=(b.n_docs, store.n_words)))
    st.add("1 pass of partial_fit over the batches", time.perf_counter() - t0, rss_before=before)
    _save(cfg, model, 1)


def child_ours_convert(cfg, st):
    """Our streaming converter of the same UCI file into a store (the target: at least as fast as
    BigARTM's BatchVectorizer, memory bounded)."""
    from topicjax.scale.convert import convert_uci

    target = Path(cfg["workdir"]) / "store_from_uci"
    shutil.rmtree(target, ignore_errors=True)
    before = bs._rss()
    t0 = time.perf_counter()
    store = convert_uci(cfg["uci"], target, vocab_path=str(Path(cfg["uci"]).with_name("vocab.train.txt")),
                        batch_size=cfg["batch"])
    st.add("convert_uci (UCI -> store)", time.perf_counter() - t0, note=f"{store.nnz:,} non-zeros", rss_before=before)
    shutil.rmtree(target, ignore_errors=True)


def _bigartm_convert(cfg, st):
    """BigARTM's own ``BatchVectorizer`` of the UCI file into batches of ``batch`` documents."""
    import artm

    target = Path(cfg["workdir"]) / "bigartm_batches"
    shutil.rmtree(target, ignore_errors=True)
    before = bs._rss()
    t0 = time.perf_counter()
    bv = artm.BatchVectorizer(data_path=str(Path(cfg["uci"]).parent), data_format="bow_uci", collection_name="train",
                              target_folder=str(target), batch_size=cfg["batch"])
    st.add("BatchVectorizer (UCI -> batches)", time.perf_counter() - t0, note=f"batches of {cfg['batch']} documents",
           rss_before=before)
    bv.dictionary.save(str(target / "dictionary"))
    (target / "COMPLETE").write_text("converted\n")
    return bv, bv.dictionary


def child_bigartm_convert(cfg, st):
    _bigartm_convert(cfg, st)


def child_bigartm(cfg, st):
    """BigARTM's ``fit_online``; its batches are converted first unless ``bigartm-convert`` left
    them complete (then ``BatchVectorizer`` only reads them and gathers the dictionary)."""
    import artm

    target = Path(cfg["workdir"]) / "bigartm_batches"
    if (target / "COMPLETE").exists():
        before = bs._rss()
        t0 = time.perf_counter()
        bv = artm.BatchVectorizer(data_path=str(target), data_format="batches")
        dictionary = artm.Dictionary()
        dictionary.load(dictionary_path=str(target / "dictionary.dict"))
        st.add("BatchVectorizer and Dictionary of bigartm-convert's batches", time.perf_counter() - t0,
               rss_before=before)
    else:
        bv, dictionary = _bigartm_convert(cfg, st)
    regs = [artm.SmoothSparsePhiRegularizer(name="smooth", tau=SMOOTH),
            artm.SmoothSparseThetaRegularizer(name="sparse", tau=-SPARSE),
            artm.DecorrelatorPhiRegularizer(name="decor", tau=cfg["decor"])]
    model = artm.ARTM(num_topics=cfg["topics"], dictionary=dictionary, num_document_passes=cfg["doc_passes"],
                      num_processors=cfg["threads"], seed=1, regularizers=regs)
    W = int(cfg["n_words"])
    for p in range(1, cfg["passes"] + 1):
        before = bs._rss()
        t0 = time.perf_counter()
        model.fit_online(batch_vectorizer=bv, tau0=TAU0, kappa=KAPPA, update_every=1)
        st.add(f"pass {p}", time.perf_counter() - t0, rss_before=before)
        if p in (1, cfg["passes"]):
            np.save(cfg["phi"].replace(".npy", f"_p{p}.npy"), bs._bigartm_phi(model, W))


CHILDREN = {"store": child_store, "ours-api": child_ours_api, "ours-partial": child_ours_partial,
            "ours-convert": child_ours_convert, "bigartm-convert": child_bigartm_convert, "bigartm": child_bigartm}


def child_main(cfg_json: str):
    cfg = json.loads(cfg_json)
    st = bs.Stages()
    try:
        CHILDREN[cfg["system"]](cfg, st)
    finally:
        Path(cfg["result"]).write_text(json.dumps({"system": cfg["system"], "stages": st.rows}))


# ============================================================================ the parent
def write_uci(store_path: Path, folder: Path) -> Path:
    """The store as UCI files (``docword.train.txt``, ``vocab.train.txt``), streamed batch by
    batch; kept once complete."""
    from topicjax.scale.store import BatchStore

    docword = folder / "docword.train.txt"
    if docword.exists():
        return docword
    store = BatchStore(store_path)
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    (folder / "vocab.train.txt").write_text("".join(f"{w}\n" for w in store.vocab()), encoding="utf-8")
    tmp = folder / "docword.train.txt.tmp"
    with open(tmp, "w", encoding="ascii") as fh:
        fh.write(f"{store.n_docs}\n{store.n_words}\n{store.nnz}\n")
        for b in store:
            docs = np.repeat(np.arange(b.first + 1, b.first + 1 + b.n_docs), np.diff(b.offsets))
            fh.write("".join(f"{d} {w} {c}\n" for d, w, c in
                             zip(docs.tolist(), (b.words + 1).tolist(), b.counts.tolist())))
    os.replace(tmp, docword)
    print(f"UCI file written in {time.perf_counter() - t0:.1f} s: {docword}", flush=True)
    return docword


def run_cli(cfg, workdir: Path, timeout):
    """``topicjax fit-online`` as a process of its own, under ``/usr/bin/time -v``."""
    out = workdir / "cli_model"
    shutil.rmtree(out, ignore_errors=True)
    regs = [f"smooth_phi={SMOOTH}", f"sparse_theta={SPARSE}", f"decorrelate={cfg['decor']!r}"]
    cmd = [sys.executable, "-m", "topicjax.cli", "fit-online", cfg["store"], "--topics", str(cfg["topics"]),
           "--passes", "1", "--doc-passes", str(cfg["doc_passes"]), "--learning-offset", str(TAU0),
           "--learning-decay", str(KAPPA), "--out", str(out), "--quiet", "--top", "1"]
    for r in regs:
        cmd += ["--reg", r]
    tv = workdir / "time_ours-cli.txt"
    if Path("/usr/bin/time").exists():
        cmd = ["/usr/bin/time", "-v", "-o", str(tv)] + cmd
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               TOPICJAX_THREADS=str(cfg["threads"]))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    wall = time.perf_counter() - t0
    res = {"system": "ours-cli", "process_s": wall, "time_v_peak": bs._time_v_peak(tv), "stages": [],
           "output": proc.stdout + proc.stderr}
    if proc.returncode != 0:
        res["failed"] = f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}"
        return res
    fitted = [l for l in proc.stdout.splitlines() if l.startswith("fitted in")]
    res["stages"].append(dict(stage="topicjax fit-online (1 pass)", wall_s=float(fitted[0].split()[2]) if fitted else wall,
                              per_iter_s=None, peak=None, rss_before=None,
                              note=f"whole process {wall:.1f} s (imports, save)"))
    import topicjax as tj

    np.save(cfg["phi"].replace(".npy", "_p1.npy"), np.asarray(tj.persistence.load(out).phi_, np.float32))
    return res


def run_system(system, cfg, workdir: Path, timeout):
    cfg = dict(cfg, system=system, result=str(workdir / f"result_{system}.json"),
               phi=str(workdir / f"phi_{system}.npy"))
    for p in workdir.glob(f"phi_{system}_p*.npy"):
        p.unlink()
    if system == "ours-cli":
        res = run_cli(cfg, workdir, timeout)
    else:
        res = _child(cfg, workdir, timeout)
    res["phis"] = {int(p.stem.rsplit("_p", 1)[1]): str(p) for p in workdir.glob(f"phi_{system}_p*.npy")}
    return res


def _child(cfg, workdir, timeout):
    # bench_scale's runner starts this file's children (--child), with /usr/bin/time -v
    return bs.run_child(cfg["system"], cfg, workdir, timeout, script=Path(__file__).resolve())


def tag(a) -> str:
    g = generator_args(a)
    return f"{a.size}_D{g['n_docs']}_W{g['n_words']}_T{a.topics}_s{a.seed}_b{a.batch}_h{a.heldout}"


def _gib(x) -> str:
    return "—" if not x else f"{x / bs.GIB:.2f} GiB"


def _secs(x) -> str:
    return "—" if x is None else f"{x:.1f} s"


def render(results: list[dict], header: list[str]) -> str:
    lines = header + ["", "| corpus | system | stage | wall | per pass | peak RSS (whole process) | perplexity after "
                          "1 / P passes | load (1 min) before / after |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        ppl = " / ".join(f"{v:,.1f} ({k})" for k, v in sorted(r.get("perplexity", {}).items(), key=lambda kv: int(kv[0])))
        peak = _gib(r.get("time_v_peak"))
        # each system's own load: the table gathers runs of different times, and a wall time taken
        # at a load >= 1 is not a result (rows from before the load was recorded say so)
        load = r.get("load")
        load = load if isinstance(load, str) else f"{load[0]:.2f} / {load[1]:.2f}" if load else "not recorded"
        if r.get("failed"):
            lines.append(f"| {r['corpus']} | {r['system']} | failed: {r['failed']} | | | {peak} | | {load} |")
            continue
        for i, s in enumerate(r["stages"]):
            note = f" ({s['note']})" if s.get("note") else ""
            lines.append(f"| {r['corpus'] if i == 0 else ''} | {r['system'] if i == 0 else ''} | {s['stage']}{note} | "
                         f"{s['wall_s']:.1f} s | {_secs(s.get('per_iter_s'))} | "
                         f"{peak if i == 0 else ''} | {ppl if i == 0 else ''} | {load if i == 0 else ''} |")
    return "\n".join(lines) + "\n"


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=tuple(SIZES), default="nytimes")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    ap.add_argument("--passes", type=int, default=1, help="passes of ours-api and bigartm (others: 1)")
    ap.add_argument("--doc-passes", type=int, default=1, help="Θ passes per batch (BigARTM's num_document_passes)")
    ap.add_argument("--batch", type=int, default=10_000, help="documents per batch (both systems)")
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--heldout", type=int, default=2000)
    ap.add_argument("--fold-in-iter", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=4 * 3600.0)
    ap.add_argument("--workdir", default="/tmp/topicjax-bench-online")
    ap.add_argument("--prepare", action="store_true", help="only write the store (and the UCI file for bigartm)")
    ap.add_argument("--quick", action="store_true", help="--size quick, T = 20, batches of 500 (a smoke test)")
    ap.add_argument("--write", action="store_true", help="write the table into experiments/results/bench_scale.md")
    ap.add_argument("--out", default=None, help="write the table here instead")
    ap.add_argument("--force", action="store_true", help="write even when the machine is loaded")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.quick:
        a.size, a.topics, a.batch, a.heldout = "quick", 20, 500, 200
    return a


def main(argv=None):
    a = parse(argv)
    if a.child is not None:
        return child_main(a.child)
    load0 = os.getloadavg()[0]
    root = Path(a.workdir) / tag(a)
    root.mkdir(parents=True, exist_ok=True)
    cfg = dict(workdir=str(root), store=str(root / "store"), held=str(root / "held.npz"), batch=a.batch,
               heldout=a.heldout, generator=generator_args(a), topics=a.topics, threads=a.threads,
               doc_passes=a.doc_passes, passes=a.passes, chunk_docs=20_000, uci=str(root / "uci" / "docword.train.txt"))
    if not (root / "held.npz").exists():
        shutil.rmtree(root / "store", ignore_errors=True)
        res = _child(dict(cfg, system="store", result=str(root / "result_store.json"), phi=str(root / "phi_store.npy")), root, a.timeout)
        if res.get("failed"):
            raise SystemExit(f"writing the store failed: {res['failed']}\n{res.get('output', '')[-2000:]}")
        res.update(corpus=a.size, passes=0, load=[load0, os.getloadavg()[0]])
        (root / "summary_store.json").write_text(json.dumps(res))
    held = np.load(root / "held.npz")
    cfg["n_words"] = int(held["known"].size)
    n_docs, _, n_tokens = (int(x) for x in held["stats"])
    cfg["decor"] = round(DECOR_SHARE * n_tokens / -(-n_docs // a.batch) / a.topics, 1)
    if {"bigartm", "bigartm-convert", "ours-convert"} & set(a.systems):
        write_uci(root / "store", root / "uci")
    if a.prepare:
        return 0
    hv = {k: held[k] for k in ("indptr", "indices", "data")}
    for system in a.systems:
        print(f"== {system} ({a.size}) ...", flush=True)
        load_start = os.getloadavg()[0]
        res = run_system(system, cfg, root, a.timeout)
        res.update(corpus=a.size, passes=a.passes if system in ("ours-api", "bigartm") else 1,
                   load=[load_start, os.getloadavg()[0]])
        res["perplexity"] = {p: bs.completion_perplexity(np.load(path), *hv.values(), held["known"],
                                                         n_iter=a.fold_in_iter, seed=a.seed)[0]
                             for p, path in res.pop("phis").items()}
        (root / f"summary_{system}_P{res['passes']}.json").write_text(json.dumps(res))
        print(f"   {res.get('failed') or ''} peak {_gib(res.get('time_v_peak'))}"
              f" perplexity {res['perplexity']}", flush=True)
    true_ppl = bs.completion_perplexity(held["phi_true"], *hv.values(), held["known"], n_iter=a.fold_in_iter,
                                        seed=a.seed)[0]
    load1 = os.getloadavg()[0]
    results = []
    for d in sorted(Path(a.workdir).iterdir()):  # every size and system run so far, stores first
        for p in sorted(d.glob("summary_*.json"), key=lambda p: (not p.name.startswith("summary_store"), p.name)):
            results.append(json.loads(p.read_text()))
    header = [f"Command: `python experiments/{Path(__file__).name} {shlex.join(argv if argv is not None else sys.argv[1:])}`"
              f" (the table gathers every run in `{a.workdir}`); {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.",
              f"Load average (1 min) at the start {load0:.2f}, at the end {load1:.2f}. Machine: {bs.machine()}.",
              f"Versions: {bs.versions()}.",
              f"T = {a.topics}, batches of {a.batch} documents, τ0 = {TAU0:g}, κ = {KAPPA}, document passes "
              f"{a.doc_passes}, regularizers smooth Φ {SMOOTH}, sparse Θ {SPARSE}, decorrelate {cfg['decor']:g}; "
              f"perplexity of the true Φ on these held-out documents ({a.size}): {true_ppl:,.1f}."]
    text = render(results, header)
    print(text)
    out = Path(a.out) if a.out else (bs.DEFAULT_OUT if a.write else None)
    if out is not None:
        if load0 >= 1 and not a.force:
            print(f"not written: the load at the start was {load0:.2f} (>= 1); --force to write anyway")
            return 1
        bs.write_section(out, text, BEGIN, END)
        print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
