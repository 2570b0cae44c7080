"""The one error type for numerical failures of a fit."""

from __future__ import annotations

__all__ = ["NumericalError"]


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
