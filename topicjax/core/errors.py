"""The error types that core raises and the layers above it share.

* :class:`NumericalError` -- a fit stopped on non-finite values or a collapse;
* :class:`CorpusError` -- invalid corpus content.  Core owns it because core itself raises it (a
  :class:`~topicjax.core.sharding.RangeCorpus` whose totals disagree with its sizes) and nothing
  in core may import :mod:`topicjax.data`; ``topicjax.data.CorpusError`` and
  ``topicjax.CorpusError`` are this same class.
"""

from __future__ import annotations

__all__ = ["NumericalError", "CorpusError"]


class CorpusError(ValueError):
    """Invalid corpus content; the message names the document, line or value that is wrong."""


class NumericalError(FloatingPointError):
    """A fit stopped because it would produce non-finite values, or remove every topic or every
    document (a collapse).  Raised instead of returning NaN or an empty model silently.

    Attributes: ``iteration`` (the failing iteration, 1-based), ``reason`` (``"nonfinite"`` or
    ``"collapse"``), ``blame`` (the regularizer held responsible and its coefficient, when one is),
    and ``state``: the last good state (before the failing iteration), kept for inspection.
    """

    def __init__(self, message: str, *, iteration: int | None = None, reason: str | None = None,
                 blame: str | None = None, state=None):
        super().__init__(message)
        self.iteration = iteration
        self.reason = reason
        self.blame = blame
        self.state = state
