"""The parser of the ``topicjax`` command and its one error handler (see :mod:`topicjax.cli`).

The parser is built from plain data (the options of :mod:`topicjax.cli.families` and
:mod:`topicjax.cli.corpus_options`), so ``topicjax --help`` answers without importing JAX or a
model family: a command's module is imported when the command runs (:func:`_command`).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import warnings

from topicjax.cli.families import add_model_options, add_regularizer_options
from topicjax.cli.corpus_options import add_corpus_options, corpus_help
from topicjax.core import environment
from topicjax.core.validation import check_int, check_number

__all__ = ["build_parser", "main", "one_line"]

#: What the library's messages say to pass, as the command line's options.
_OPTION_HINTS = (
    ("pass empty_docs='drop' to remove them", "pass --empty-docs drop to remove them"),
    ("pass encoding='latin-1' (or the file's encoding)", "pass --encoding latin-1 (or the file's encoding)"),
    ("format='tsv' (topicjax: --format tsv)", "--format tsv"),
    ("format='texts' (--format texts)", "--format texts"),
    ("pass the vocabulary (vocab=..., or a file X.vocab beside the corpus)",
     "pass the vocabulary (--vocab FILE, or a file X.vocab beside the corpus)"),
)

#: exit status of a command whose output pipe was closed (128 + SIGPIPE, as the shell reports it)
EXIT_BROKEN_PIPE = 141


def one_line(e: BaseException) -> str:
    """The one-line message of an error, with the library's hints turned into options."""
    msg = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, KeyError):  # str(KeyError('x')) is "'x'"
        msg = f"KeyError: {msg}"
    for lib, cli in _OPTION_HINTS:
        msg = msg.replace(lib, cli)
    return msg


def _debug_parent() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the full traceback of an error")
    return p


def _quiet_option(p) -> None:
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (also off when stderr is not a terminal, so logs get no cursor codes)")


def _output_options(p, *, out=True, quiet=True, top=True):
    if out:
        p.add_argument("--out", help="folder to save the fitted model to (reopen it with topics, evaluate, report)")
    if quiet:
        _quiet_option(p)
    if top:
        p.add_argument("--top", type=int, default=10, help="top words printed per topic (default 10)")


#: The numeric options the command line uses itself (those passed to an estimator are checked by
#: it, with the option named): destination -> (option, smallest value, largest value, integer?).
#: A value outside is refused before any work, in one line naming the option (``--top -3`` would
#: print every word but the last 3; ``--docs 0`` failed inside numpy).
OPTION_RANGES = {
    "top": ("--top", 1, None, True),
    "n": ("-n", 1, None, True),
    "docs": ("--docs", 1, None, True),
    "devices": ("--devices", 1, None, True),
    "max_topics": ("--max-topics", 1, None, True),
    "min_topics": ("--min-topics", 1, None, True),
    "step": ("--step", 1, None, True),
    "batch_size": ("--batch-size", 1, None, True),
    "tokens_per_block": ("--tokens-per-block", 1, None, True),
    "passes": ("--passes", 1, None, True),
    "update_every": ("--update-every", 1, None, True),
    "doc_passes": ("--doc-passes", 1, None, True),
    "sparse_start": ("--sparse-start", 0, None, True),
    "min_df": ("--min-df", 1, None, True),
    "learning_offset": ("--learning-offset", 1.0, None, False),
    "learning_decay": ("--learning-decay", 0.0, 1.0, False),
    "decorrelation": ("--decorrelation", 0.0, None, False),
}


def check_options(args) -> None:
    """The numeric options of :data:`OPTION_RANGES` that were given, ``--heldout`` (a share in
    [0, 1)) and ``--encoding``: a ``ValueError`` in the estimators' message shape, naming the
    option."""
    for dest, (flag, low, high, integer) in OPTION_RANGES.items():
        value = getattr(args, dest, None)
        if value is not None:
            (check_int if integer else check_number)(value, flag, low, high)
    heldout = getattr(args, "heldout", None)
    if heldout is not None and not 0.0 <= heldout < 1.0:  # NaN too
        raise ValueError(f"--heldout must be a share of the documents in [0, 1), got {heldout}")
    encoding = getattr(args, "encoding", None)
    if encoding is not None:
        import codecs

        try:
            codecs.lookup(encoding)
        except LookupError:  # else "unknown encoding: utf9", naming no option, once a file is read
            raise ValueError(f"--encoding must be an encoding Python knows (utf-8, latin-1, cp1252...), got "
                             f"{encoding!r}") from None


def build_parser() -> argparse.ArgumentParser:
    """The ``topicjax`` argument parser: every command and its options (what ``--help`` prints)."""
    debug = _debug_parent()
    p = argparse.ArgumentParser(prog="topicjax", description="Topic models in JAX.")
    p.add_argument("--debug", dest="debug_all", action="store_true", help="show the full traceback of an error")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    f = sub.add_parser("fit", parents=[debug], help="fit a model (the bundled bars corpus without CORPUS)",
                       description="Fit a model, save it (--out), then print its topics, perplexity (training and "
                                   "hold-out by document completion), sparsity and coherence.")
    f.add_argument("corpus", nargs="?", help=corpus_help("the corpus to fit (default: the bundled bars corpus)"))
    add_model_options(f)
    f.add_argument("--docs", type=int, default=2000, help="documents of the bundled bars corpus")
    f.add_argument("--heldout", type=float, default=0.1,
                   help="share of documents held out for document completion (0: none; default 0.1)")
    f.add_argument("--devices", type=int, default=None,
                   help="PLSA/ARTM: shard the documents over N local devices (on CPU, N host devices are made)")
    _output_options(f)
    add_corpus_options(f)
    f.set_defaults(func="fit")

    s = sub.add_parser("select-order", parents=[debug], help="PTM order selection: the BIC by number of topics",
                       description="Fit PTMs from --max-topics down to --min-topics (warm-started, removing the "
                                   "least massive topics), print the BIC curve, save the best model.")
    s.add_argument("corpus", help=corpus_help())
    s.add_argument("--max-topics", type=int, required=True, help="the largest order M")
    s.add_argument("--min-topics", type=int, default=2, help="the smallest order (default 2)")
    s.add_argument("--step", type=int, default=1, help="topics removed per step (default 1)")
    s.add_argument("--bic", default="2014", help="2014 (default), 2014-exact, 2020 or 2020-printed (eq. 16 as printed)")
    s.add_argument("--iterations", dest="max_iter", type=int, default=None, help="GEM iterations per order")
    s.add_argument("--tol", type=float, default=None, help="GEM stopping tolerance")
    s.add_argument("--seed", dest="random_state", type=int, default=0, help="random seed (default 0)")
    _output_options(s)
    add_corpus_options(s)
    s.set_defaults(func="select_order")

    t = sub.add_parser("topics", parents=[debug], help="print the top words of a saved model",
                       description="The top words of every topic of a saved model; background topics (ARTM) and "
                                   "empty or near-empty topics are marked, and counted on the first line.")
    t.add_argument("model_dir", help="folder of a saved model (fit --out, select-order --out, fit-online --out)")
    t.add_argument("-n", type=int, default=10, help="words per topic (default 10)")
    _quiet_option(t)
    t.set_defaults(func="topics")

    e = sub.add_parser("evaluate", parents=[debug], help="hold-out perplexity and coherence of a saved model",
                       description="Document completion and coherence of a saved model on a corpus; words outside "
                                   "the model's vocabulary are dropped and their share reported.")
    e.add_argument("model_dir", help="folder of a saved model")
    e.add_argument("corpus", help=corpus_help("the corpus to evaluate on"))
    e.add_argument("--seed", type=int, default=0, help="seed of the document-completion split (default 0)")
    _quiet_option(e)
    add_corpus_options(e)
    e.set_defaults(func="evaluate")

    r = sub.add_parser("report", parents=[debug], help="write a markdown (and HTML) page about a saved model",
                       description="Write DIR/report.md (and DIR/report.html with --html): parameters, what fit "
                                   "measured, topics, charts of the scores by iteration and of the BIC by order "
                                   "(PNG files beside it).")
    r.add_argument("model_dir", help="folder of a saved model; the report is written into it")
    r.add_argument("--html", action="store_true", help="also write report.html")
    r.add_argument("-n", type=int, default=10, help="words per topic (default 10)")
    _quiet_option(r)
    r.set_defaults(func="report")

    c = sub.add_parser("convert", parents=[debug], help="convert a corpus into a batch store for fit-online",
                       description="UCI and VW corpora are streamed (memory: one block); other formats are read in "
                                   "memory and written as a store.")
    c.add_argument("corpus", help=corpus_help("the corpus to convert"))
    c.add_argument("store", help="folder of the batch store to write")
    c.add_argument("--batch-size", type=int, default=1000, help="documents per batch (default 1000)")
    c.add_argument("--shuffle", action="store_true", help="store the documents in a random order, seeded by --seed "
                   "(for a corpus sorted by label: the online fit reads batches in the store's order)")
    c.add_argument("--seed", type=int, default=0, help="seed of --shuffle's order (default 0)")
    _quiet_option(c)
    add_corpus_options(c)
    c.set_defaults(func="convert")

    o = sub.add_parser("fit-online", parents=[debug], help="online ARTM over a batch store (BigARTM's fit_online)",
                       description="Online ARTM over a batch store written by convert, saved (--out) as an ARTM "
                                   "that topics, evaluate and report reopen.")
    o.add_argument("store", help="folder of a batch store written by topicjax convert")
    o.add_argument("--topics", dest="n_components", type=int, default=None, help="number of topics (default 20)")
    o.add_argument("--passes", type=int, default=1, help="passes over the store (default 1)")
    o.add_argument("--update-every", type=int, default=1, help="batches per update of Φ (default 1)")
    o.add_argument("--learning-offset", type=float, default=1024.0,
                   help="step size offset τ0 of ρ = (τ0 + t)^-κ, BigARTM's tau0 (default 1024)")
    o.add_argument("--learning-decay", type=float, default=0.7,
                   help="step size decay κ of ρ = (τ0 + t)^-κ, BigARTM's kappa (default 0.7)")
    o.add_argument("--doc-passes", type=int, default=10, help="Θ iterations per batch (default 10)")
    o.add_argument("--seed", dest="random_state", type=int, default=0, help="random seed (default 0)")
    g = o.add_argument_group("regularizers")
    add_regularizer_options(g)
    _output_options(o)
    o.set_defaults(func="fit_online")

    d = sub.add_parser("datasets", parents=[debug], help="list the shared real corpora (corpus argument dataset:NAME)",
                       description="The shared corpora the bundled loaders of topicjax.data.datasets read (from "
                                   "$TOPICJAX_DATA or the shared data folder; nothing is downloaded), their subsets, "
                                   "and whether each is present here. Any command reading a corpus takes "
                                   "dataset:NAME or dataset:NAME:SUBSET as its corpus.")
    _quiet_option(d)
    d.set_defaults(func="datasets")
    return p


#: command -> (module, function): imported when the command runs, not when the parser is built
_COMMANDS = {
    "fit": ("topicjax.cli.commands", "cmd_fit"),
    "select_order": ("topicjax.cli.commands", "cmd_select_order"),
    "topics": ("topicjax.cli.commands", "cmd_topics"),
    "evaluate": ("topicjax.cli.commands", "cmd_evaluate"),
    "report": ("topicjax.cli.report", "cmd_report"),
    "convert": ("topicjax.cli.online", "cmd_convert"),
    "fit_online": ("topicjax.cli.online", "cmd_fit_online"),
    "datasets": ("topicjax.cli.inputs", "cmd_datasets"),
}


def _command(name: str):
    import importlib

    module, function = _COMMANDS[name]
    return getattr(importlib.import_module(module), function)


def _stderr_is_terminal() -> bool:
    """Whether progress bars may draw on stderr: a terminal only. In a log file or a pipe their
    carriage returns and (nested bars) cursor movements would garble every line."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        return False


def _ask_for_host_devices(n: int) -> None:
    """On CPU, N host devices exist only if XLA is told before JAX starts its backend (a count
    already in ``XLA_FLAGS`` is kept: ``--devices`` more than it is refused by the command)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if n > 1 and environment.host_device_count() is None:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so that the interpreter's last flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout replaced (tests) or already closed
        pass


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"topicjax: warning: {one_line(message) if isinstance(message, Exception) else ' '.join(str(message).split())}",
          file=sys.stderr)


def _check_platforms() -> None:
    """A ``JAX_PLATFORMS`` naming a platform this machine cannot start is one line naming it, not
    JAX's traceback at the first array (JAX starts here, once its flags are set)."""
    wanted = os.environ.get("JAX_PLATFORMS", "").strip()
    if not wanted:
        return
    import jax  # the command line starts JAX here, after the settings it reads from the environment

    try:
        jax.devices()
    except Exception as e:
        why = " ".join(str(e).split())[:200] or type(e).__name__
        raise ValueError(f"JAX_PLATFORMS={wanted}: JAX cannot start that platform on this machine ({why}); unset "
                         "JAX_PLATFORMS, or set it to one that is installed (cpu is always there)") from None


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 error, 2 usage, 141 broken pipe).

    Every error ends in one line ``topicjax: error: ...`` on stderr, never a traceback (``--debug``
    shows it); output piped into a command that stops reading (``| head``) ends quietly."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # usage errors and --help: argparse has printed what to say
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    args.debug = getattr(args, "debug", False) or args.debug_all
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            environment.check()  # TOPICJAX_* and XLA_FLAGS' device count: one line, before any work
            if getattr(args, "devices", None):
                _ask_for_host_devices(args.devices)
            _check_platforms()
            check_options(args)
            if not _stderr_is_terminal():
                args.quiet = True  # the bars' \r and cursor codes would garble a log; the commands' lines remain
            rc = _command(args.func)(args)
            sys.stdout.flush()
            return rc
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        except KeyboardInterrupt:
            print("topicjax: interrupted", file=sys.stderr)
            return 130
        except Exception as e:
            if isinstance(e, OSError) and e.errno == errno.EPIPE:
                _silence_stdout()
                return EXIT_BROKEN_PIPE
            if args.debug:
                import traceback

                traceback.print_exc()
            known = isinstance(e, (ValueError, OSError, ArithmeticError, MemoryError))
            hint = "" if known or args.debug else f" ({type(e).__name__}; run with --debug for the traceback)"
            print(f"topicjax: error: {one_line(e)}{hint}", file=sys.stderr)
            return 1
