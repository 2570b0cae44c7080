"""Issue 43 item 4: one driver loop and one stopping rule.

* the relative-change rule (``driver.relative_change_converged``) and the three algorithms that
  apply it (the driver's default on scalars, TTMM's double-float log-likelihood, PTM's BIC from
  per-piece differences) against the inequality written out by hand;
* ``driver.run`` (compiled blocks) and ``driver.run_host`` (one host step per iteration) running
  the same toy algorithm give the same history, progress bar, ``NumericalError`` and checkpoint
  saves: they share one loop.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tqdm.auto

from topicjax.core import checkpoint as ck
from topicjax.core import driver
from topicjax.core.errors import NumericalError
from topicjax.ptm import gem
from topicjax.ttmm import em as ttmm_em


def _hand_rule(change: float, scale: float, tol: float) -> bool:
    """The stopping rule as the driver's docstring prints it: |Δm| <= tol · max(|m|, 1e-30)."""
    return abs(change) <= tol * max(abs(scale), 1e-30)


# ----------------------------------------------------------------------------- (b) the stopping rule
CASES = [  # (change, scale, tol): exact in float32, on both sides of the threshold
    (1.0, 1000.0, 1e-3), (1.0, 1000.0, 0.5e-3), (-1.0, -1000.0, 1e-3), (-1.0, -1000.0, 0.5e-3),
    (0.0, 0.0, 0.0), (0.5, 0.0, 1e-3), (0.0, 5.0, 0.0), (2.0, -4.0, 0.5), (2.0, -4.0, 0.25),
    (1e-31, 0.0, 1.0), (3.0, 1e6, 1e-6), (3.0, 1e6, 4e-6),
]


@pytest.mark.parametrize("change,scale,tol", CASES)
def test_the_rule_is_the_printed_inequality(change, scale, tol):
    f32 = np.float32
    got = bool(driver.relative_change_converged(jnp.float32(change), jnp.float32(scale), jnp.float32(tol)))
    assert got == _hand_rule(float(f32(change)), float(f32(scale)), float(f32(tol)))


@pytest.mark.parametrize("prev,new,tol", [(1000.0, 999.0, 1e-3), (1000.0, 999.0, 0.5e-3), (-8.0, -6.0, 0.25),
                                          (-8.0, -6.0, 0.5), (0.0, 0.0, 0.0)])
def test_the_three_users_of_the_rule_agree_with_the_hand_written_change(prev, new, tol):
    tol32 = float(np.float32(tol))
    expected = _hand_rule(new - prev, new, tol32)
    # the driver's default rule on a scalar measure
    assert bool(driver._relative_change(jnp.float32(prev), jnp.float32(new), jnp.float32(tol))) == expected
    # TTMM: L as a double-float (hi, lo); the change is summed from both halves
    old_m = {"hi": jnp.float32(prev + 0.5), "lo": jnp.float32(-0.5)}
    new_m = {"hi": jnp.float32(new + 0.25), "lo": jnp.float32(-0.25)}
    change = (new + 0.25 - prev - 0.5) + (-0.25 + 0.5)
    assert bool(ttmm_em.converged_double(old_m, new_m, jnp.float32(tol))) == _hand_rule(change, new + 0.25, tol32)
    # PTM: the BIC decrease summed from per-piece differences (no N0 prior: prior_cells 0)
    pieces_old = jnp.asarray([prev - 3.0, 3.0], jnp.float32)
    pieces_new = jnp.asarray([new - 3.0, 3.0], jnp.float32)

    def measure(pieces, bic):
        return {"pieces": pieces, "n0": jnp.int32(0), "prior_cells": jnp.float32(0.0), "bic": jnp.float32(bic)}

    got = gem.ALGORITHM.converged(measure(pieces_old, prev), measure(pieces_new, new), jnp.float32(tol))
    assert bool(got) == _hand_rule(prev - new, new, tol32)


# ----------------------------------------------------------------------------- (c) one loop
class Toy(NamedTuple):
    x: jax.Array  # the objective: the iteration number, or NaN at the iteration ``static`` names
    i: jax.Array


def _toy_step(s, args, static):
    i = s.i + 1
    return Toy(jnp.where(i == static, jnp.nan, i.astype(jnp.float32)), i)


TOY = driver.Algorithm(step=_toy_step, objective=lambda s, args, static: s.x,
                       record=lambda s, args, static: {"double": 2.0 * s.x},
                       health=lambda s, static: (jnp.isfinite(s.x), jnp.array(True)))


def _host_step(bad):
    def step(x, iteration):
        new = float("nan") if iteration == bad else float(iteration)
        return new, {"objective": new, "double": 2.0 * new}

    return step


class _Bar:
    """A stand-in for tqdm recording what the loop shows."""

    made: list = []

    def __init__(self, total=None, initial=0, desc=None, disable=False, leave=True):
        self.log = [("open", total, initial, desc, disable)]
        _Bar.made.append(self)

    def update(self, n):
        self.log.append(("update", n))

    def set_postfix(self, **kw):
        self.log.append(("postfix", kw))

    def close(self):
        self.log.append(("close",))


@pytest.fixture
def bars(monkeypatch):
    _Bar.made = []
    monkeypatch.setattr(tqdm.auto, "tqdm", _Bar)
    return _Bar.made


def _compiled(bad=0, **kw):
    s0 = Toy(jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
    return driver.run(TOY, bad, s0, (), desc="toy", block=1, **kw)


def _host(bad=0, **kw):
    return driver.run_host(_host_step(bad), 0.0, desc="toy", **kw)


def _without_seconds(history):
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history]


def test_host_and_compiled_loops_give_the_same_history_and_progress(bars):
    state, hist_c = _compiled(max_iter=5)
    x, hist_h = _host(max_iter=5)
    assert float(state.x) == x == 5.0
    expected = [{"iteration": k, "objective": float(k), "double": 2.0 * k} for k in range(1, 6)]
    assert _without_seconds(hist_c) == _without_seconds(hist_h) == expected
    assert [set(h) for h in hist_c] == [set(h) for h in hist_h] == [{"iteration", "objective", "double", "seconds"}] * 5
    assert all(h["seconds"] >= 0 for h in hist_c + hist_h)
    compiled_bar, host_bar = bars
    assert compiled_bar.log == host_bar.log
    assert compiled_bar.log[0] == ("open", 5, 0, "toy", False) and compiled_bar.log[-1] == ("close",)
    assert compiled_bar.log[1:3] == [("update", 1), ("postfix", {"objective": "1"})]
    # custom postfixes: run's sees the history, run_host's the state and the step's record
    _compiled(max_iter=2, postfix=lambda h: {"last": h[-1]["double"]})
    _host(max_iter=2, postfix=lambda s, rec: {"last": rec["double"], "state": s})
    assert [e for e in bars[2].log if e[0] == "postfix"] == [("postfix", {"last": 2.0}), ("postfix", {"last": 4.0})]
    assert [e for e in bars[3].log if e[0] == "postfix"] == [("postfix", {"last": 2.0, "state": 1.0}),
                                                             ("postfix", {"last": 4.0, "state": 2.0})]


def test_host_and_compiled_loops_fail_alike_keeping_the_last_good_state(bars):
    errors = []
    for run in (_compiled, _host):
        with pytest.raises(NumericalError, match=r"^toy: iteration 4 produced non-finite values") as e:
            run(bad=4, max_iter=6)
        errors.append(e.value)
    compiled, host = errors
    assert (compiled.iteration, compiled.reason) == (host.iteration, host.reason) == (4, "nonfinite")
    assert float(compiled.state.x) == host.state == 3.0  # the state after iteration 3
    assert str(compiled).endswith("; the last good state is kept in this error's .state")
    assert str(host).endswith("; the last good state is kept in this error's .state")
    assert host.blame == "objective = nan"  # the host record names the value; the compiled loop has no explain here
    assert bars[0].log == bars[1].log
    assert [e for e in bars[0].log if e[0] == "update"] == [("update", 1)] * 3 + [("update", 0)]
    assert bars[0].log[-1] == ("close",)


class _Recording(ck.RunCheckpoint):
    def __init__(self, path, every):
        super().__init__(path, every)
        self.saves = []

    def save(self, state, prev, has_prev, done, history, finished):
        self.saves.append((done, finished, len(history)))
        super().save(state, prev, has_prev, done, history, finished)

    def save_host(self, state, done, history, finished):
        self.saves.append((done, finished, len(history)))
        super().save_host(state, done, history, finished)


def test_host_and_compiled_loops_checkpoint_at_the_same_iterations(tmp_path):
    compiled = _Recording(tmp_path / "compiled.npz", every=2)
    host = _Recording(tmp_path / "host.npz", every=2)
    s0 = Toy(jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
    # the compiled loop in its default blocks: they end where checkpoints are due
    _, hist_c = driver.run(TOY, 0, s0, (), max_iter=5, progress=False, checkpoint=compiled)
    _, hist_h = driver.run_host(_host_step(0), 0.0, max_iter=5, progress=False, checkpoint=host,
                                to_host=lambda x: {"x": np.asarray(x)}, from_host=lambda h, x: float(h["x"]))
    assert compiled.saves == host.saves == [(2, False, 2), (4, False, 4), (5, True, 5)]
    assert _without_seconds(hist_c) == _without_seconds(hist_h)
    # finished runs return at once, with the saved history
    again_c = driver.run(TOY, 0, s0, (), max_iter=5, progress=False, checkpoint=compiled)[1]
    again_h = driver.run_host(_host_step(0), 0.0, max_iter=5, progress=False, checkpoint=host,
                              to_host=lambda x: {"x": np.asarray(x)}, from_host=lambda h, x: float(h["x"]))[1]
    assert _without_seconds(again_c) == _without_seconds(again_h) == _without_seconds(hist_h)
    assert len(compiled.saves) == len(host.saves) == 3
