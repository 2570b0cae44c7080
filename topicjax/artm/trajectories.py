"""Ready-made regularization trajectories of ARTM sec. 5 (Table 1)."""

from __future__ import annotations

from topicjax import regularizers as regs
from topicjax.regularizers.schedules import Step

__all__ = ["paper_trajectory", "table1_regularizers"]


def paper_trajectory(*, sparse_start: int = 10, phi_rate: float = 0.10, theta_rate: float = 0.08,
                     beta: str = "uniform", smooth_phi: float = 0.1, smooth_theta: float = 0.8,
                     decorrelation: float | None = None, sparse: bool = True, smooth: bool = True) -> list:
    """The regularization trajectory of ARTM sec. 5 (use with ``background_topics``).

    * smoothing of the background topics from the first iteration with constant coefficients
      (β = ``smooth_phi``, α = ``smooth_theta``; the paper's 0.1 and 0.8), eq. 53-55;
    * sparsing of the specific topics switched on at iteration ``sparse_start`` with coefficients
      adjusted at every iteration so that about ``phi_rate`` (10 %) of the non-zeros of each φ_t
      and ``theta_rate`` (8 %) of each θ_d become zero per iteration (never the last non-zero of
      a column); sparsing of Φ is relative to ``beta`` = ``"uniform"`` (β_w = 1/|W|) or
      ``"background"`` (β_w = n_w / n);
    * decorrelation of the specific topics from the first iteration with τ = ``decorrelation``
      (the paper's γ; omitted when ``None``).
    """
    out = []
    if smooth:
        out += [(regs.smooth_phi(topics="background"), smooth_phi),
                (regs.smooth_theta(topics="background"), smooth_theta)]
    if sparse:
        out += [(regs.sparse_phi(beta=beta, topics="specific", rate=phi_rate), Step(sparse_start, 1.0)),
                (regs.sparse_theta(topics="specific", rate=theta_rate), Step(sparse_start, 1.0))]
    if decorrelation is not None:
        out.append((regs.decorrelate(topics="specific"), float(decorrelation)))
    return out


def table1_regularizers(sm: bool, sp: str | None, dc: bool, *, gamma: float, sparse_start: int = 10) -> list:
    """The regularizers of one row of ARTM Table 1: smoothing of background topics (``sm``),
    sparsing of specific topics relative to the uniform (``sp="u"``) or background (``"b"``)
    distribution, decorrelation with coefficient ``gamma`` (``dc``)."""
    return paper_trajectory(sparse_start=sparse_start, beta={"u": "uniform", "b": "background"}.get(sp, "uniform"),
                            decorrelation=gamma if dc else None, sparse=sp is not None, smooth=sm)
