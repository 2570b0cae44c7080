"""``fit``, ``select-order``, ``topics`` and ``evaluate``.

A fit saves the model first (when ``--out`` is given), then prints what can be computed; a step
that fails after the save loses nothing and is reported on one line (exit code 1).
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import time
from pathlib import Path

import numpy as np

from topicjax.cli.families import build_model, option_for
from topicjax.cli.inputs import DATASETS, parse_dataset, read_corpus_args
from topicjax.core.plain import jsonable
from topicjax.core.random import check_random_state
from topicjax.data import datasets
from topicjax.evaluation import metrics
from topicjax._outputs import OutputRefusedError, check_not_input
from topicjax.persistence import SaveRefusedError, check_save_target, describing_file, load, record_describing
from topicjax.ptm import PTM, select_order
from topicjax.scale.distributed import make_mesh

__all__ = ["check_seed", "check_out", "cmd_fit", "cmd_select_order", "cmd_topics", "cmd_evaluate", "load_model",
           "print_topics", "completion_perplexity", "save_model", "SUMMARY_FILE", "ORDER_FILE", "Steps"]

#: written beside a saved model: what ``fit`` printed about it (read by ``topicjax report``)
SUMMARY_FILE = "fit_summary.json"
#: written beside the best model of ``select-order``: the BIC curve
ORDER_FILE = "order_selection.json"


class Steps:
    """Report steps after a fit: each runs on its own; a failure prints one line and is counted."""

    def __init__(self, saved_to: str | None):
        self.failed = 0
        self.saved_to = saved_to
        self.summary: dict = {}

    def run(self, what: str, fn):
        import sys

        try:
            return fn()
        except (BrokenPipeError, KeyboardInterrupt):
            raise
        except Exception as e:
            self.failed += 1
            kept = f"; the model is saved in {self.saved_to}" if self.saved_to else ""
            msg = " ".join(str(e).split()) or type(e).__name__
            print(f"topicjax: error: {what}: {msg}{kept}", file=sys.stderr)
            return None


def load_model(path):
    return load(path)


#: a topic is near-empty when its share of the documents' topic mass (Θ's row sums) is below
#: this fraction of an even share (1/T): 1% of it
NEAR_EMPTY = 0.01


def topic_marks(model) -> list[str]:
    """A mark per topic of a fitted model for the lists that show topics: ``"background"`` (ARTM's
    background topics, ``background_``), ``"empty"`` (no mass: a zero column of Φ, a zero row of
    Θ, or not live by the model's ``topic_live_`` / ``empty_topics_`` / ``topic_alive_``), ``"near-empty: X%"`` (a
    share of Θ's mass below :data:`NEAR_EMPTY` of an even share), else ``""``."""
    phi = np.asarray(model.phi_, np.float64)
    T = phi.shape[1]
    empty = ~(phi.sum(0) > 0)
    alive = getattr(model, "topic_alive_", None)
    if alive is not None and np.shape(alive) == (T,):
        empty |= np.asarray(alive) <= 0
    live = getattr(model, "topic_live_", None)  # every estimator's own verdict (estimator.py)
    if live is not None and np.shape(live) == (T,):
        empty |= ~np.asarray(live, bool)
    names = list(getattr(model, "topic_names_", None) or [])
    try:
        listed = getattr(model, "empty_topics_", None) or []
    except Exception:  # a property that needs what this model does not have
        listed = []
    for name in listed:
        if name in names:
            empty[names.index(name)] = True
        elif isinstance(name, (int, np.integer)) and 0 <= name < T:
            empty[int(name)] = True
    share = None
    theta = getattr(model, "theta_", None)
    if theta is not None and np.ndim(theta) == 2 and np.shape(theta)[0] == T and np.shape(theta)[1]:
        mass = np.asarray(theta, np.float64).sum(1)
        if mass.sum() > 0:
            share = mass / mass.sum()
            empty |= ~(share > 0)
    background = {int(b) for b in (getattr(model, "background_", None) or [])}
    marks = []
    for t in range(T):
        if empty[t]:
            marks.append("empty")
        elif share is not None and share[t] < NEAR_EMPTY / T:
            marks.append(f"near-empty: {100 * share[t]:.2g}% of the mass")
        else:
            marks.append("")
        if t in background:
            marks[t] = "background" + (f", {marks[t]}" if marks[t] else "")
    return marks


def _is_empty(mark: str) -> bool:
    return mark == "empty" or mark.endswith(", empty")


def _count_marks(marks) -> str:
    """``" (1 background, 2 empty)"`` for the heading of a topic list; ``""`` when none is marked."""
    counts = [(sum(m.startswith("background") for m in marks), "background"),
              (sum(_is_empty(m) for m in marks), "empty"),
              (sum("near-empty" in m for m in marks), "near-empty")]
    said = [f"{k} {what}" for k, what in counts if k]
    return f" ({', '.join(said)})" if said else ""


def print_topics(phi, vocab, n: int = 10, marks=None) -> list[list[str]]:
    """Print the top ``n`` words of each topic; a topic with a mark (:func:`topic_marks`) shows it
    in brackets, and an empty topic shows no words (it has none: its words would be arbitrary)."""
    words = metrics.top_words(np.asarray(phi), vocab, n)
    for t, ws in enumerate(words):
        mark = marks[t] if marks is not None else ""
        shown = "(no words: the topic has no mass)" if _is_empty(mark) else " ".join(ws)
        print(f"  topic {t:3d}{f' [{mark}]' if mark else ''}: {shown}", flush=True)
    return words


def _live_topics(marks) -> str:
    """``"topics"``, or ``"the 4 topics that are not empty"`` when some are."""
    empty = sum(_is_empty(m) for m in marks)
    return f"the {len(marks) - empty} topics that are not empty" if empty else "topics"


def _mean_over_live_topics(values, marks) -> float:
    """The mean of a per-topic score over the topics that are not empty (an empty topic's top words
    are arbitrary, its score says nothing)."""
    values = np.asarray(values, np.float64)
    live = np.array([not _is_empty(m) for m in marks], bool)
    return float(np.nanmean(values[live])) if live.any() else float("nan")


def completion_perplexity(phi, corpus, seed: int) -> tuple[float, int, int]:
    """Hold-out perplexity by document completion (ARTM sec. 5) on the documents of ``corpus``
    that can be split (2 tokens or more); ``(perplexity, documents used, documents skipped)``."""
    lengths = np.asarray(corpus.doc_lengths)
    usable = np.flatnonzero(lengths >= 2)
    skipped = corpus.n_docs - usable.size
    if usable.size == 0:
        raise ValueError(f"none of the {corpus.n_docs} documents has 2 tokens or more; document completion needs "
                         "a token on each side")
    obs, held = corpus.subset(usable).completion_split("tokens", seed=seed)
    return metrics.heldout_perplexity(np.asarray(phi), obs, held), int(usable.size), int(skipped)


def _theta(model, corpus) -> np.ndarray:
    """Θ (T x D) of the training documents: the fitted one when it is there, else ``transform``."""
    theta = getattr(model, "theta_", None)
    phi = np.asarray(model.phi_)
    if theta is not None and np.shape(theta) == (phi.shape[1], corpus.n_docs):
        return np.asarray(theta)
    return np.asarray(model.transform(corpus)).T


def _with_option(e: ValueError) -> ValueError:
    """An estimator's parameter message with the command-line option that sets it."""
    msg = str(e)
    param = msg.split(" ", 1)[0]
    opt = option_for(param)
    return ValueError(f"{msg} (option {opt})") if opt and not msg.endswith(")") else e


def check_seed(seed) -> int:
    """``--seed`` checked as the estimators check ``random_state`` (it also splits the corpus)."""
    try:
        return check_random_state(seed)
    except ValueError as e:
        raise _with_option(e) from None


# ------------------------------------------------------------------------------------- fit
def _bars_report(phi, true_phi, steps: Steps) -> None:
    rec = metrics.topic_recovery(phi, true_phi)
    order = [int(m) for m in rec["matching"] if m >= 0]
    order += [t for t in range(phi.shape[1]) if t not in order]
    print("topics (5x5 pictures, darker = more probable), in the order of the true bars they match:")
    pics = [datasets.bars_picture(phi[:, t]) for t in order]
    for row in range(0, len(pics), 5):
        group = pics[row: row + 5]
        print("   ".join(f"topic {order[row + i]:<4d}" for i in range(len(group))))
        for line in range(len(group[0])):
            print("   ".join(p[line] for p in group))
        print()
    print(f"recovery of the true bars: mean Hellinger distance {rec['distance']:.3f} "
          f"(0 = perfect, 1 = disjoint); worst topic {np.nanmax(rec['per_topic']):.3f}")
    steps.summary["recovery_distance"] = float(rec["distance"])


def _fit_model(model, train, args):
    """``model.fit(train)``, sharded over ``--devices`` local devices when asked."""
    if args.devices is None:
        return model.fit(train)
    import jax

    if args.model not in ("plsa", "artm"):
        raise ValueError(f"--devices (a sharded fit) is for --model plsa and artm, not {args.model}")
    if args.devices < 1:
        raise ValueError(f"--devices must be an integer >= 1, got {args.devices}")
    devices = jax.local_devices()
    if args.devices > len(devices):
        raise ValueError(f"--devices {args.devices}: JAX sees {len(devices)} local {devices[0].platform} device(s); on "
                         "CPU the command line asks XLA for host devices only when it starts JAX itself (run it as "
                         "a new process)")
    print(f"sharding the documents over {args.devices} {devices[0].platform} device(s)")
    return model.fit(train, mesh=make_mesh(devices[: args.devices]))


def check_out(out, *inputs) -> None:
    """Refuse ``--out`` before any work (nothing written): ``.``, a file, a folder that holds
    something other than a topicjax model, or a folder that is, holds or lies inside one of
    ``inputs`` (the corpus read, its vocabulary, a batch store), which a save would overwrite or
    mix the model into."""
    if not out:
        return
    try:
        check_not_input(out, inputs, "--out")
    except OutputRefusedError as e:
        raise SaveRefusedError(str(e)) from None
    try:
        check_save_target(out)
    except SaveRefusedError as e:
        raise SaveRefusedError(f"--out: {e}") from None
    _probe_writable(out)


def _probe_writable(out) -> Path:
    """The folder a save to ``out`` writes into -- ``out`` itself when it exists, else its nearest
    existing parent, where the save creates it -- after creating and removing a hidden file there:
    a folder that cannot be written (read-only, not ours, a full disk) or a file in the way is one
    line naming the path before the fit, not an error after it that loses the model."""
    target = Path(out).absolute()
    folder = target
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise SaveRefusedError(f"--out {out}: {folder} is a file, not a folder, so the model cannot be saved under it; "
                               "choose another folder")
    probe = folder / f".topicjax-write-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        with open(probe, "xb") as fh:
            fh.write(b"0" * 4096)  # a block: a full disk refuses it
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as e:
        raise SaveRefusedError(f"--out {out}: cannot write in {folder} ({e.strerror or e}); the model would be lost "
                               "after the fit: choose a folder you can write to") from None
    finally:
        probe.unlink(missing_ok=True)
    return folder


def _check_out_space(out, need: int) -> None:
    """Refuse ``--out`` before the fit when the disk under it has less free space than ``need``
    bytes, a lower bound of the saved model (Φ and Θ in float32)."""
    if not out:
        return
    folder = Path(out).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < need:
        raise SaveRefusedError(f"--out {out}: the disk of {folder} has {free / 2**20:.1f} MiB free, and the model "
                               f"(Φ and Θ in float32) needs at least {need / 2**20:.1f} MiB: free some space or "
                               "choose a folder on another disk")


def _save_or_say(model, out, steps: Steps) -> None:
    """:func:`save_model`, a failure of the disk (no space, read-only, a quota) as one line
    naming ``--out``'s path and the reason."""
    try:
        save_model(model, out, steps)
    except SaveRefusedError:
        raise
    except OSError as e:
        what = e.strerror or str(e)
        full = e.errno in (errno.ENOSPC, errno.EDQUOT)
        hint = " (free some space or choose a folder on another disk)" if full else ""
        raise OSError(f"--out {out}: the model could not be saved to {Path(out).absolute()}: {what}{hint}; the "
                      "folder is as it was before the save") from None


def save_model(model, out, steps: Steps) -> None:
    """Save to ``--out`` (a model there is replaced, other files kept; see :func:`check_out`); the
    files topicjax wrote to describe the replaced model (``fit_summary.json``, ``order_selection.json``,
    the report) go with it (:func:`topicjax.persistence.drop_describing`)."""
    if out:
        model.save(out)
        steps.saved_to = out
        print(f"model saved to {out}", flush=True)
    else:
        print("note: the model is not saved (pass --out DIR to keep it)", flush=True)


def write_describing(out, name: str, data) -> None:
    """Write JSON ``data`` as file ``name`` beside the model saved in ``out``, listed as describing
    it (replaced with the model; a file of the user's with that name is refused, never overwritten)."""
    file = describing_file(out, name, name)
    file.write_text(json.dumps(jsonable(data), indent=1), encoding="utf-8")
    record_describing(out, [name])


def _write_summary(out, summary: dict) -> None:
    if out:
        write_describing(out, SUMMARY_FILE, summary)


def _inputs(corpus, vocab=None) -> list:
    """The paths a corpus argument reads (for the ``--out`` check): a shared corpus's folder when
    it is there (a missing one is reported when the corpus is read, after the parameters)."""
    dataset = parse_dataset(corpus)
    if dataset is None:
        return [corpus, vocab]
    try:
        return [datasets.shared_data_dir() / DATASETS[dataset[0]].folder, vocab]
    except FileNotFoundError:
        return [vocab]


def _validated(model):
    """``model`` with every parameter checked as ``fit`` checks them (messages naming the option),
    before any corpus is read."""
    try:
        model._validate_params()
    except ValueError as e:
        raise _with_option(e) from None
    return model


def cmd_fit(args) -> int:
    t0 = time.perf_counter()
    # every parameter first: a mistyped option is reported before a corpus is opened or read
    check_seed(args.random_state)
    check_out(args.out, *_inputs(args.corpus, args.vocab))
    bundled = args.corpus is None
    topics = args.n_components if args.n_components is not None else (10 if bundled else 20)
    asked = args.max_iter
    iterations = asked
    if iterations is None and args.model in ("plsa", "artm"):
        iterations = 300 if bundled else 100
    model = _validated(build_model(args, topics=topics, iterations=iterations, progress=not args.quiet))
    iterations = int(model.get_params()["max_iter"])  # the family's own default when none was asked
    if bundled:
        corpus, true_phi, _ = datasets.make_bars(n_docs=args.docs, seed=args.random_state)
        print(f"bundled corpus: 'bars' of Griffiths & Steyvers (2004), {corpus!r}; true topics: 10 bars on a 5x5 grid")
    else:
        corpus = read_corpus_args(args, args.corpus)
        print(f"corpus {args.corpus}: {corpus!r}")
    split = corpus.n_docs >= 20 and args.heldout > 0
    train, test = corpus.train_test_split(args.heldout, seed=args.random_state) if split else (corpus, None)
    _check_out_space(args.out, 4 * (train.n_words + train.n_docs) * int(topics))
    origin = "--iterations" if asked is not None else ("the command line's default" if args.model in ("plsa", "artm")
                                                         else f"{type(model).__name__}'s default")
    print(f"fitting {type(model).__name__} with {topics} topics, at most {iterations} iterations ({origin}), seed "
          f"{args.random_state} on {train.n_docs} documents ...", flush=True)
    t_fit = time.perf_counter()
    try:
        _fit_model(model, train, args)
    except ValueError as e:
        raise _with_option(e) from None
    t_fit = time.perf_counter() - t_fit
    ran = getattr(model, "n_iter_", None)
    ran = int(ran) if ran is not None else None
    print(f"fitted in {t_fit:.1f} s" + (f", {ran} iterations run" if ran is not None else ""), flush=True)

    steps = Steps(None)
    _save_or_say(model, args.out, steps)  # first: nothing after this can lose the model
    s = steps.summary
    s.update(command="fit", corpus=args.corpus or f"bars ({args.docs} documents)", model=type(model).__name__,
             topics=topics, iterations=iterations, iterations_from=origin, iterations_run=ran,
             seed=args.random_state, train_docs=train.n_docs, fit_seconds=t_fit)
    phi = np.asarray(model.phi_)
    marks = steps.run("topic marks", lambda: topic_marks(model)) or [""] * phi.shape[1]
    if any(marks):
        s["marked_topics"] = {str(t): m for t, m in enumerate(marks) if m}
    if bundled:
        steps.run("topic pictures", lambda: _bars_report(phi, true_phi, steps))
    else:
        print(f"top words{_count_marks(marks)}:")
        steps.run("top words", lambda: print_topics(phi, train.vocab, args.top, marks))
    theta = steps.run("training Θ", lambda: _theta(model, train))
    if theta is not None:
        def train_scores():
            s["perplexity_train"] = metrics.perplexity(phi, theta, train)
            print(f"perplexity (training, ARTM eq. 56): {s['perplexity_train']:.3f}")
            s["sparsity_phi"] = metrics.sparsity(phi, threshold=1e-8)
            s["sparsity_theta"] = metrics.sparsity(theta, threshold=1e-8)
            print(f"sparsity: Phi {s['sparsity_phi']:.3f}, Theta {s['sparsity_theta']:.3f}")

        steps.run("training perplexity", train_scores)
    if test is not None:
        def heldout():
            ppl, used, skipped = completion_perplexity(phi, test, args.random_state)
            s.update(perplexity_heldout=ppl, heldout_docs=used, heldout_skipped=skipped)
            note = f"; {skipped} with fewer than 2 tokens skipped" if skipped else ""
            print(f"hold-out perplexity (document completion on {used} test documents{note}): {ppl:.3f}")

        steps.run("hold-out perplexity", heldout)
    else:
        print("hold-out perplexity: not measured (fewer than 20 documents, or --heldout 0)")
    if not bundled:
        def coherence():
            s["coherence_npmi"] = _mean_over_live_topics(metrics.coherence(phi, train, k=10, measure="npmi"), marks)
            print(f"coherence (NPMI of document co-occurrence, top-10, mean over {_live_topics(marks)}): "
                  f"{s['coherence_npmi']:.4f}")

        steps.run("coherence", coherence)
    if args.out:
        steps.run("summary file", lambda: _write_summary(args.out, s))
    print(f"total time {time.perf_counter() - t0:.1f} s")
    return 1 if steps.failed else 0


# ----------------------------------------------------------------------------- select-order
def _check_orders(args) -> None:
    """``--max-topics``, ``--min-topics`` and ``--step`` together (each alone is checked by
    :func:`topicjax.cli.app.check_options`), before the corpus is read."""
    if args.min_topics > args.max_topics:
        raise ValueError(f"--min-topics {args.min_topics} is larger than --max-topics {args.max_topics}")
    if (args.max_topics - args.min_topics) % args.step:
        raise ValueError(f"--step {args.step} from --max-topics {args.max_topics} skips past --min-topics "
                         f"{args.min_topics}; choose a step dividing {args.max_topics - args.min_topics}")


def cmd_select_order(args) -> int:
    check_seed(args.random_state)
    check_out(args.out, *_inputs(args.corpus, args.vocab))
    _check_orders(args)
    params = {"progress": not args.quiet}
    if args.max_iter is not None:
        params["max_iter"] = args.max_iter
    if args.tol is not None:
        params["tol"] = args.tol
    _validated(PTM(n_components=args.max_topics, bic=args.bic, random_state=args.random_state, **params))
    corpus = read_corpus_args(args, args.corpus)
    print(f"corpus {args.corpus}: {corpus!r}")
    _check_out_space(args.out, 4 * (corpus.n_words + corpus.n_docs) * int(args.min_topics))
    print(f"PTM order selection ({args.bic} BIC): orders {args.max_topics} down to {args.min_topics} by {args.step}",
          flush=True)
    rows = []

    def report(order, model, seconds):
        rows.append((order, model.bic_, seconds))
        print(f"  M = {order:4d}   BIC = {model.bic_:.6g}   ({seconds:.1f} s)", flush=True)

    try:
        result = select_order(corpus, args.max_topics, args.min_topics, args.step, bic=args.bic,
                              random_state=args.random_state, keep_models=False, callback=report, **params)
    except ValueError as e:
        raise _with_option(e) from None
    best = result.best_model
    print(f"best order: M = {result.best_order} (BIC {best.bic_:.6g})")
    steps = Steps(None)
    _save_or_say(best, args.out, steps)
    if args.out:
        curve = {"bic": args.bic, "orders": result.orders, "bics": result.bics, "seconds": result.seconds,
                 "best_order": result.best_order, "corpus": args.corpus}
        steps.run("BIC curve file", lambda: write_describing(args.out, ORDER_FILE, curve))
    marks = steps.run("topic marks", lambda: topic_marks(best)) or None
    print(f"top words of the best model{_count_marks(marks or [])}:")
    steps.run("top words", lambda: print_topics(best.phi_, corpus.vocab, args.top, marks))
    return 1 if steps.failed else 0


# ------------------------------------------------------------------------------ saved models
def cmd_topics(args) -> int:
    model = load_model(args.model_dir)
    phi = np.asarray(model.phi_)
    marks = topic_marks(model)
    print(f"{type(model).__name__} with {phi.shape[1]} topics{_count_marks(marks)} from {args.model_dir}", flush=True)
    print_topics(phi, model.vocab_, args.n, marks)
    return 0


def cmd_evaluate(args) -> int:
    if args.seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {args.seed}")
    parse_dataset(args.corpus)  # a wrong dataset name before the model is loaded
    model = load_model(args.model_dir)
    corpus = read_corpus_args(args, args.corpus, min_df=1)
    n_tokens, n_docs = corpus.n_tokens, corpus.n_docs
    if corpus.vocab != tuple(model.vocab_):
        corpus = corpus.with_vocab(model.vocab_, empty_docs="drop")
        if corpus.n_docs == 0:
            raise ValueError(f"{args.corpus}: no document shares words with the model's vocabulary")
    phi = np.asarray(model.phi_)
    print(f"{type(model).__name__} from {args.model_dir} on {args.corpus} ({n_docs} documents)")
    oov = n_tokens - corpus.n_tokens  # tokens of words outside the model's vocabulary, dropped
    print(f"out-of-vocabulary tokens dropped: {oov} of {n_tokens} ({100.0 * oov / n_tokens:.2f}%); "
          f"documents left without a known word: {n_docs - corpus.n_docs}", flush=True)
    ppl, used, skipped = completion_perplexity(phi, corpus, args.seed)
    note = f"; {skipped} with fewer than 2 known tokens skipped" if skipped else ""
    print(f"hold-out perplexity (document completion on {used} documents{note}): {ppl:.3f}")
    marks = topic_marks(model)
    for measure in ("pmi", "npmi", "umass"):
        value = _mean_over_live_topics(metrics.coherence(phi, corpus, k=10, measure=measure), marks)
        print(f"coherence {measure} top-10 (document co-occurrence, mean over {_live_topics(marks)}): {value:.4f}")
    return 0


