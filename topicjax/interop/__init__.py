"""Bridges to the tools researchers already use; each library is an optional extra
(``pip install topicjax[interop]``) imported only by the bridge that needs it.

* :mod:`topicjax.interop.gensim`: ``Dictionary`` + bag-of-words corpora both ways, topics and a
  ``get_topics()`` adapter for ``CoherenceModel``;
* :mod:`topicjax.interop.pyldavis`: the arguments of ``pyLDAvis.prepare``;
* :mod:`topicjax.interop.octis`: OCTIS's model-output dict and a model wrapper.

The bridges read fitted models duck-typed (``phi_``, ``theta_``, ``vocab_``, ``transform``;
``get_topics()`` when present), see :mod:`topicjax.interop.common`.
"""

from topicjax.interop.common import fitted_doc_topics, model_vocab, topic_word_matrix

__all__ = ["topic_word_matrix", "model_vocab", "fitted_doc_topics"]
