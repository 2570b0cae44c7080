"""One module per file format (:mod:`~topicjax.data.readers.uci`, :mod:`~topicjax.data.readers.vw`,
:mod:`~topicjax.data.readers.ldac`, :mod:`~topicjax.data.readers.texts`) over what they share
(:mod:`~topicjax.data.readers.common`).  Use them through :mod:`topicjax.data.formats`, which
documents the formats, names every reader and writer, and chooses one from a path."""
