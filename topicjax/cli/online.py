"""``convert`` (a corpus into an on-disk batch store) and ``fit-online`` (online ARTM over a store).

The online fit (:func:`topicjax.scale.online.fit_online`) returns Φ and a history; the command
line keeps it as an :class:`~topicjax.artm.ARTM` (the model the online algorithm fits, with
BigARTM's offline pass of ``doc_passes``), so that ``topics``, ``evaluate`` and ``report`` reopen
it like any other model.  It has no Θ of the training documents (the online fit never holds one).
"""

from __future__ import annotations

import time

import numpy as np

from topicjax.cli.commands import Steps, check_out, print_topics, save_model
from topicjax.cli.families import parse_regularizer
from topicjax.cli.inputs import read_corpus_args

__all__ = ["cmd_convert", "cmd_fit_online", "online_model"]


def cmd_convert(args) -> int:
    from topicjax.data.formats import corpus_kind
    from topicjax.scale import online

    kind = corpus_kind(args.corpus) if args.format == "auto" else args.format
    t0 = time.perf_counter()
    if kind == "uci":
        if args.empty_docs == "drop" or args.labels == "yes" or args.min_df is not None:
            raise ValueError("a UCI corpus is converted as it is (streamed); --empty-docs, --labels and --min-df "
                             "do not apply")
        store = online.convert_uci(args.corpus, args.store, vocab_path=args.vocab, batch_size=args.batch_size,
                                   encoding=args.encoding)
        how = "streamed"
    elif kind == "vw":
        if args.empty_docs == "error" or args.labels == "yes" or args.min_df is not None:
            raise ValueError("a VW corpus is converted as it is (streamed; empty documents dropped, labels not "
                             "stored); --empty-docs error, --labels and --min-df do not apply")
        extra = {"vocab": args.vocab} if args.vocab is not None else {}
        store = online.convert_vw(args.corpus, args.store, batch_size=args.batch_size, encoding=args.encoding,
                                  **extra)
        how = "streamed"
    else:
        args.format = kind
        corpus = read_corpus_args(args, args.corpus)
        store = online.write_store([corpus], args.store, batch_size=args.batch_size)
        how = "read in memory"
    dropped = store.meta.get("dropped_docs", 0)
    note = f", {dropped} empty document(s) dropped" if dropped else ""
    print(f"batch store {args.store}: {store.n_docs} documents, {store.n_words} words, {store.n_tokens} tokens in "
          f"{store.n_batches} batch(es) of {store.batch_size} ({kind} corpus {how}{note}; "
          f"{time.perf_counter() - t0:.1f} s)")
    return 0


def online_model(phi, vocab, history, *, regularizers, doc_passes: int, seed: int):
    """An :class:`~topicjax.artm.ARTM` holding the result of an online fit (Φ, history, the
    regularizers and their last coefficients), saved and reopened like a fitted one."""
    from topicjax.artm import ARTM
    from topicjax.artm.setup import topic_structure

    phi = np.asarray(phi)
    W, T = phi.shape
    model = ARTM(T, regularizers=regularizers, max_iter=max(1, len(history)), random_state=seed,
                 doc_passes=doc_passes, scores=(), progress=False)
    reg = model.regularizer()
    names, _ = topic_structure(T, 0, None)
    alive = (phi.sum(0) > 0).astype(np.float32)
    n = max(1, len(history))
    fitted = dict(
        vocab_=list(vocab), n_features_in_=W, phi_=phi, psi_=None, scores_=history, history_=history,
        n_iter_=len(history), topic_names_=list(names), background_=[], topic_alive_=alive,
        removed_topics_=[names[j] for j in np.flatnonzero(alive == 0)], removed_docs_=[], classes_=[],
        final_taus_=[float(np.asarray(t.coef(n))) for t in reg.terms], modality_names_=["words"],
        row_modality_=np.zeros(W, np.int32), row_weights_=[1.0], regularizer_names_=list(reg.names),
        learned_params_=[{} for _ in reg.terms], components_=np.ascontiguousarray(phi.T),
    )
    for k, v in fitted.items():
        setattr(model, k, v)
    return model


def cmd_fit_online(args) -> int:
    from topicjax.scale import online

    check_out(args.out, args.store)
    store = online.BatchStore(args.store)
    print(f"batch store {args.store}: {store.n_docs} documents, {store.n_words} words in {store.n_batches} "
          f"batch(es) of {store.batch_size}")
    topics = args.n_components if args.n_components is not None else 20
    regs = [parse_regularizer(spec) for spec in args.reg or []]
    print(f"online fit: {topics} topics, {args.passes} pass(es), τ0 {args.tau0:g}, κ {args.kappa:g}, "
          f"{args.doc_passes} document passes, seed {args.random_state} ...", flush=True)
    t0 = time.perf_counter()
    phi, history = online.fit_online(store, topics, passes=args.passes, update_every=args.update_every,
                                     tau0=args.tau0, kappa=args.kappa, doc_passes=args.doc_passes,
                                     regularizers=regs or None, random_state=args.random_state,
                                     progress=not args.quiet)
    print(f"fitted in {time.perf_counter() - t0:.1f} s", flush=True)
    steps = Steps(None)
    model = online_model(phi, store.vocab(), history, regularizers=regs or None, doc_passes=args.doc_passes,
                         seed=args.random_state)
    save_model(model, args.out, steps)
    print("top words:")
    steps.run("top words", lambda: print_topics(phi, model.vocab_, args.top))
    last = [h for h in history if h["pass"] == args.passes]
    if last and len(last) == store.n_batches and store.n_tokens:
        ppl = float(np.exp(-sum(h["objective"] for h in last) / store.n_tokens))
        print(f"perplexity of the last pass (every batch under the Φ before its update): {ppl:.3f}")
    return 1 if steps.failed else 0
