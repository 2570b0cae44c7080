"""The ``topicjax`` command line: every model, its main options, online and sharded fits, reports.

Commands
--------
``topicjax fit [CORPUS]``
    Fit a model (``--model plsa|artm|ptm|ttmm|lida``), save it (``--out DIR``) *first*, then print
    its topics, perplexity (training, and hold-out by document completion on ``--heldout`` of the
    documents, skipping and counting those with fewer than 2 tokens), sparsity and coherence.
    Without CORPUS the bundled bars corpus is generated and every topic is drawn as a picture.
    Family options: ARTM ``--reg NAME=TAU@START,key=value`` (repeatable, any pool regularizer),
    ``--trajectory default|paper|none``, ``--background``, ``--label-weight``, ``--doc-passes``;
    PTM ``--bic``; TTMM ``--themes``, ``--solver``, ``--batch-size``; LIDA ``--variant``,
    ``--sampler``, ``--tokens-per-block``, ``--burn-in``; PLSA/ARTM ``--devices N`` (documents sharded over
    N local devices, :mod:`topicjax.scale.distributed`).
``topicjax select-order CORPUS --max-topics M``
    PTM model-order selection (:func:`topicjax.ptm.select_order`): the BIC of every order, the
    best model saved with the curve (``order_selection.json``) for ``report``.
``topicjax topics DIR`` / ``topicjax evaluate DIR CORPUS``
    The top words of any saved model; its hold-out perplexity and coherence on a corpus, with the
    share of out-of-vocabulary tokens dropped.
``topicjax report DIR [--html]``
    ``DIR/report.md`` (and ``report.html``): parameters, what ``fit`` measured, topics, charts of
    the scores by iteration and of the BIC by order (PNG beside it).
``topicjax convert CORPUS STORE`` / ``topicjax fit-online STORE``
    A batch store (UCI and VW streamed) and the online ARTM over it
    (:mod:`topicjax.scale.online`), saved as an ARTM that the commands above reopen.

``topicjax datasets``
    The shared corpora of :mod:`topicjax.data.datasets`; any corpus argument may be
    ``dataset:NAME[:SUBSET]`` (kos, 20newsgroups, bbc), and a 20 Newsgroups bydate folder is read
    as a corpus.

``topicjax --help`` and every command's ``--help`` answer without importing JAX. Topic lists mark
background, empty and near-empty topics. ``--quiet`` (every command) turns the progress bars
off, as does a stderr that is not a terminal.

Corpus options of every command that reads one: ``--format auto|uci|vw|ldac|texts|tsv`` (a
table such as OCTIS's ``corpus.tsv`` only when asked), ``--encoding`` (every format),
``--empty-docs error|drop``, ``--labels auto|yes|no`` (text folders, tables), ``--vocab``,
``--min-df``, ``--stop-words``.

Errors: one line ``topicjax: error: ...`` on stderr and exit status 1, never a traceback
(``--debug`` shows it); parameter values are checked by the estimators, whose messages name the
option (``--iterations 0``: ``max_iter must be an integer >= 1, got 0 (option --iterations)``);
output piped into a command that stops reading (``topicjax topics DIR | head -1``) ends quietly
with status 141; usage errors exit with 2.
"""

from topicjax.cli.app import build_parser, main

__all__ = ["main", "build_parser"]
