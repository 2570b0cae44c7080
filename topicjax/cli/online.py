"""``convert`` (a corpus into an on-disk batch store) and ``fit-online`` (online ARTM over a store).

The online fit (:func:`topicjax.scale.online.fit_online`) returns a fitted
:class:`~topicjax.artm.ARTM` (the model the online algorithm fits, with BigARTM's offline pass of
``doc_passes``), which the command saves, so that ``topics``, ``evaluate`` and ``report`` reopen
it like any other model.  It has no Θ of the training documents (the online fit never holds one).
"""

from __future__ import annotations

import time

import numpy as np

from topicjax.cli.commands import Steps, check_out, print_topics, save_model
from topicjax.cli.families import parse_regularizer
from topicjax.cli.inputs import is_20newsgroups_folder, parse_dataset, read_corpus_args
from topicjax.data.formats import corpus_kind
from topicjax.scale import convert, online, store as batch_store

__all__ = ["cmd_convert", "cmd_fit_online"]


def cmd_convert(args) -> int:
    # The store's folder first: never the corpus's own folder, nor a folder of other files.
    batch_store.check_store_target(args.store, [args.corpus, args.vocab])
    # a shared dataset or a 20 Newsgroups folder is read in memory by its loader (read_corpus_args)
    loader = parse_dataset(args.corpus) is not None or is_20newsgroups_folder(args.corpus)
    kind = corpus_kind(args.corpus) if args.format == "auto" and not loader else args.format
    t0 = time.perf_counter()
    shuffle = dict(shuffle=bool(args.shuffle), seed=args.seed)
    if kind == "uci":
        if args.empty_docs == "drop" or args.labels == "yes" or args.min_df is not None:
            raise ValueError("a UCI corpus is converted as it is (streamed); --empty-docs, --labels and --min-df "
                             "do not apply")
        store = convert.convert_uci(args.corpus, args.store, vocab_path=args.vocab, batch_size=args.batch_size,
                                   encoding=args.encoding, **shuffle)
        how = "streamed"
    elif kind == "vw":
        if args.empty_docs == "error" or args.labels == "yes" or args.min_df is not None:
            raise ValueError("a VW corpus is converted as it is (streamed; empty documents dropped, labels not "
                             "stored); --empty-docs error, --labels and --min-df do not apply")
        extra = {"vocab": args.vocab} if args.vocab is not None else {}
        store = convert.convert_vw(args.corpus, args.store, batch_size=args.batch_size, encoding=args.encoding,
                                  **extra, **shuffle)
        how = "streamed"
    else:
        args.format = kind
        corpus = read_corpus_args(args, args.corpus)
        store = batch_store.write_store([corpus], args.store, batch_size=args.batch_size, **shuffle)
        how = "read in memory"
    dropped = store.meta.get("dropped_docs", 0)
    note = f", {dropped} empty document(s) dropped" if dropped else ""
    print(f"batch store {args.store}: {store.n_docs} documents, {store.n_words} words, {store.n_tokens} tokens in "
          f"{store.n_batches} batch(es) of {store.batch_size} ({kind} corpus {how}{note}"
          f"{f', shuffled with seed {args.seed}' if args.shuffle else ''}; "
          f"{time.perf_counter() - t0:.1f} s)")
    return 0


def cmd_fit_online(args) -> int:
    check_out(args.out, args.store)
    store = batch_store.BatchStore(args.store)
    print(f"batch store {args.store}: {store.n_docs} documents, {store.n_words} words in {store.n_batches} "
          f"batch(es) of {store.batch_size}")
    topics = args.n_components if args.n_components is not None else 20
    regs = [parse_regularizer(spec) for spec in args.reg or []]
    print(f"online fit: {topics} topics, {args.passes} pass(es), τ0 {args.learning_offset:g}, κ {args.learning_decay:g}, "
          f"{args.doc_passes} document passes, seed {args.random_state} ...", flush=True)
    t0 = time.perf_counter()
    model = online.fit_online(store, topics, passes=args.passes, update_every=args.update_every,
                                     learning_offset=args.learning_offset, learning_decay=args.learning_decay, doc_passes=args.doc_passes,
                                     regularizers=regs or None, random_state=args.random_state,
                                     progress=not args.quiet)
    print(f"fitted in {time.perf_counter() - t0:.1f} s", flush=True)
    steps = Steps(None)
    save_model(model, args.out, steps)
    print("top words:")
    steps.run("top words", lambda: print_topics(model.phi_, model.vocab_, args.top))
    last = [h for h in model.history_ if h["pass"] == args.passes]
    if last and len(last) == store.n_batches and store.n_tokens:
        ppl = float(np.exp(-sum(h["objective"] for h in last) / store.n_tokens))
        print(f"perplexity of the last pass (every batch under the Φ before its update): {ppl:.3f}")
    return 1 if steps.failed else 0
