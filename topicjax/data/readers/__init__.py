"""One module per file format (:mod:`~topicjax.data.readers.uci`, :mod:`~topicjax.data.readers.vw`,
:mod:`~topicjax.data.readers.ldac`, :mod:`~topicjax.data.readers.texts`) over what they share
(:mod:`~topicjax.data.readers.common`, :mod:`~topicjax.data.readers.dispatch`: which reader reads a
path).  Each reader parses its format into :class:`~topicjax.data.entries.Entries` (coordinate
entries and the keywords of ``Corpus.from_entries``), not a Corpus, so that they sit below
:mod:`topicjax.data.corpus`, whose ``Corpus.from_uci`` and siblings call them.  Use them through
those constructors or :mod:`topicjax.data.formats`, which documents the formats, names every reader
and writer, and chooses one from a path."""

# no public names: the readers are called through topicjax.data.formats
__all__: list[str] = []
