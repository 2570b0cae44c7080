"""One driver for every iterative fit, and one batch driver for many fits.

An algorithm is an :class:`Algorithm`: module-level pure functions (hashable, so compiled programs
are cached on them) over an immutable state ``S``, arguments ``args`` (data, regularizers,
coefficients: traced) and a hashable ``static`` configuration:

* ``step(S, args, static) -> S``;
* ``objective(S, args, static) -> m``: what the stopping rule watches (a scalar, or any pytree with a
  ``value(m) -> scalar`` and a ``converged(m_prev, m_new, tol) -> bool`` of its own: PTM's BIC is
  a double-float with exact differences);
* ``record(S, args, static) -> dict``: per-iteration history fields computed on the device;
* ``health(S, static) -> (finite, present)``: False ``finite`` stops with non-finite values,
  False ``present`` with a collapse (every topic or every document removed);
* ``rollback(ok, new, old, static) -> S`` and ``restore(S, args, static) -> S`` (optional, both or
  neither): how a failing iteration is undone.  By default every array of the old state is kept
  until the new one has passed its health check (``where(ok, new, old)``), so a step holds two
  whole states at once.  An algorithm whose state holds values derived from others (PTM's E-step
  statistics, computed from its parameters) keeps only what it needs: ``rollback`` returns
  ``new`` where ``ok`` and otherwise a state whose kept arrays are the old ones (the others may
  be anything, e.g. ``new``'s), and ``restore`` recomputes the rest from those; the old derived
  arrays then die inside the step, and ``restore`` runs only after a failing iteration, outside
  the compiled loop.

:func:`run` runs the algorithm to its stopping rule -- ``max_iter`` iterations, or
``|Δm| <= tol · max(|m|, 1e-30)`` between two iterations (:func:`relative_change_converged`, which
an algorithm's own ``converged`` applies to the change it computes exactly; maximised by default,
minimised with ``Algorithm.minimize``) -- in *blocks* of iterations compiled into one ``lax.while_loop`` each,
so the host fetches the history once per block instead of once per iteration (the estimator
costs what the compiled step costs).  A failing iteration is not applied: the fit ends with
:class:`~topicjax.core.errors.NumericalError` carrying the last good state.  Host hooks, when
given, run between iterations: ``before(iteration, history) -> args`` (schedules of the score
history, the next batch of a stream) makes blocks of one iteration; ``after(iteration, state) ->
dict`` (scores computed on the host) runs every ``after_every`` iterations and after the last.
``checkpoint`` (a :class:`topicjax.core.checkpoint.RunCheckpoint`) saves the whole loop state
every ``checkpoint.every`` iterations and at the end, and resumes from a saved one (see
:mod:`topicjax.core.checkpoint`).

:func:`run_host` is the same loop (one implementation, ``_loop``) for an algorithm whose step runs
on the host and may change the shapes of its state between iterations (LIDA's Gibbs chains grow
K_max as topics are born; the offline EM over a batch store): one host-level ``step(state,
iteration) -> (state, record)`` per iteration, with the same history records, progress bar,
:class:`~topicjax.core.errors.NumericalError` on a non-finite value and checkpoint schedule as
:func:`run`; its state is checkpointed through ``to_host`` /
``from_host`` (JSON values and numpy arrays of any shape).

:func:`run_many` runs a batch of fits (leading axis of the states and of the arguments marked
``batched``) in one compiled call, each exactly as :func:`run_fixed` would run it alone:
``mode="sequential"`` (one model after the other), ``"vmap"`` (``vmap_size`` models side by
side), ``"devices"`` (the models spread over the devices of a mesh, each device running its share
one after the other) or ``"threads"`` (groups of models in host threads, each a compiled call).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from topicjax.core import numerics
from topicjax.core.errors import NumericalError
from topicjax.core.compiled import jit

__all__ = ["Algorithm", "HostAlgorithm", "run", "run_host", "run_fixed", "run_many", "RUNNING", "CONVERGED", "NONFINITE", "COLLAPSE",
           "MODES", "default_mode", "BLOCK", "flatten_records"]

RUNNING, CONVERGED, NONFINITE, COLLAPSE = 0, 1, 2, 3
#: Iterations per compiled block of :func:`run` (when no host hook needs every iteration).
BLOCK = 16
MODES = ("sequential", "vmap", "devices", "threads")


class Algorithm(NamedTuple):
    """A pure iterative algorithm for the drivers (see the module docstring)."""

    step: Callable
    objective: Callable
    record: Callable | None = None
    health: Callable | None = None
    converged: Callable | None = None
    value: Callable | None = None
    minimize: bool = False
    rollback: Callable | None = None
    restore: Callable | None = None


class HostAlgorithm(NamedTuple):
    """An iterative algorithm whose step runs on the host (:func:`run_host`): for a state that
    changes its shapes between iterations, such as a LIDA chain growing K_max
    (:data:`topicjax.lida.chain.ALGORITHM`).

    ``step(state, iteration, args, static) -> (state, record)`` does iteration ``iteration``
    (1, 2, ...); ``record`` is a dict of Python numbers with ``objective`` among them.
    ``health(state, static) -> {name: number}``: values the record does not show, checked for
    finiteness after every step.  ``postfix(state, record) -> dict``: the progress bar's postfix.
    ``to_host(state)`` / ``from_host(saved, state, static)``: what a checkpoint keeps (JSON values
    and numpy arrays) and the state restored from it (``state`` is the initial one)."""

    step: Callable
    health: Callable | None = None
    postfix: Callable | None = None
    to_host: Callable | None = None
    from_host: Callable | None = None


def _value(algo: Algorithm, m):
    return algo.value(m) if algo.value is not None else m


def relative_change_converged(change, scale, tol):
    """The one relative-change stopping rule: ``|change| <= tol · max(|scale|, 1e-30)``.

    ``change`` is the objective's change over the last iteration and ``scale`` its new value.
    An algorithm whose measure is not a plain scalar computes the change its own exact way (TTMM's
    double-float log-likelihood, PTM's BIC summed from per-piece differences) and passes it here,
    so that every fit stops by the same inequality.  Traceable (used inside the compiled loops);
    returns a boolean array."""
    return jnp.abs(change) <= tol * jnp.maximum(jnp.abs(scale), 1e-30)


def _relative_change(prev, new, tol):
    return relative_change_converged(new - prev, new, tol)


def _block_impl(algo: Algorithm, static, size: int, state, args, prev, has_prev, n_todo, tol):
    """Up to ``n_todo <= size`` iterations in one ``while_loop``; returns
    ``(state, measure, has_prev, n_done, status, records)``."""
    rec_shape = jax.eval_shape(lambda s: algo.record(s, args, static), state) if algo.record else {}
    bufs = jax.tree.map(lambda x: jnp.zeros((size,) + x.shape, x.dtype), rec_shape)
    v_shape = jax.eval_shape(lambda s: _value(algo, algo.objective(s, args, static)), state)
    obj_buf = jnp.zeros((size,), v_shape.dtype)
    converged = algo.converged or _relative_change
    tol = jnp.asarray(tol, jnp.float32)

    def cond(c):
        return (c[1] < n_todo) & (c[4] == RUNNING)

    def body(c):
        s, i, prev, has_prev, status, bufs, obj_buf = c
        new = algo.step(s, args, static)
        m = algo.objective(new, args, static)
        v = _value(algo, m)
        if algo.health is not None:
            finite, present = algo.health(new, static)
        else:
            finite, present = jnp.array(True), jnp.array(True)
        finite = finite & jnp.isfinite(v)
        ok = finite & present
        conv = has_prev & (tol > 0) & converged(prev, m, tol)
        if algo.record is not None:
            rec = algo.record(new, args, static)
            bufs = jax.tree.map(lambda b, r: b.at[i].set(r), bufs, rec)
        obj_buf = obj_buf.at[i].set(v)
        if algo.rollback is not None:
            s = algo.rollback(ok, new, s, static)
        else:
            s = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, s)
        prev = jax.tree.map(lambda a, b: jnp.where(ok, a, b), m, prev)
        status = jnp.where(~finite, NONFINITE, jnp.where(~present, COLLAPSE, jnp.where(conv, CONVERGED, RUNNING)))
        return s, i + ok.astype(jnp.int32), prev, has_prev | ok, status.astype(jnp.int32), bufs, obj_buf

    carry = (state, jnp.zeros((), jnp.int32), prev, jnp.asarray(has_prev), jnp.asarray(RUNNING, jnp.int32), bufs,
             obj_buf)
    state, n, prev, has_prev, status, bufs, obj_buf = jax.lax.while_loop(cond, body, carry)
    return state, prev, has_prev, n, status, {"objective": obj_buf, **bufs}


_block = jit(_block_impl, static_argnames=("algo", "static", "size"))
# the same program writing the new state into the old state's buffers (``run(..., donate=True)``)
_block_donating = jit(_block_impl, static_argnames=("algo", "static", "size"), donate_argnames=("state",))


def _initial_measure(algo, static, state, args):
    return algo.objective(state, args, static)


_initial = jit(_initial_measure, static_argnames=("algo", "static"))


def _restore_impl(algo, static, state, args):
    return algo.restore(state, args, static)


_restore = jit(_restore_impl, static_argnames=("algo", "static"))


def _check_rollback(algo: Algorithm):
    if (algo.rollback is None) != (algo.restore is None):
        raise ValueError("an Algorithm gives rollback and restore together, or neither")


def _to_python(x):
    x = np.asarray(x)
    if x.ndim == 0:
        return x.item()
    return x


class _CompiledSteps:
    """:func:`run`'s iterations for :func:`_loop`: blocks of compiled iterations.  The carry is
    ``(state, prev, has_prev, args)``: the state, the last accepted measure (what the stopping
    rule compares with), whether there is one, and the arguments (``before`` may replace them)."""

    def __init__(self, algo, static, *, block_fn, size, tol, before, explain):
        self.algo, self.static, self.block_fn, self.size = algo, static, block_fn, size
        self.tol, self.before, self.explain = tol, before, explain

    def start(self, state, args):
        return state, _initial(self.algo, self.static, state, args), False, args

    @staticmethod
    def state(carry):
        return carry[0]

    def restore(self, checkpoint, carry):
        state, prev, _, args = carry
        saved = checkpoint.restore(state, prev)
        if saved is None:
            return None
        state, prev, has_prev, done, history, finished = saved
        return (state, prev, has_prev, args), done, history, finished

    def save(self, checkpoint, carry, done, history, last):
        state, prev, has_prev, _ = carry
        checkpoint.save(state, prev, has_prev, done, history, finished=last)

    def advance(self, carry, done, todo, history):
        state, prev, has_prev, args = carry
        if self.before is not None:
            args = self.before(done + 1, history)
        state, prev, has_prev, n, status, recs = self.block_fn(self.algo, self.static, self.size, state, args, prev,
                                                               has_prev, todo, self.tol)
        n, status = int(n), int(status)
        flat = flatten_records(jax.tree.map(np.asarray, recs))
        records = [{k: _to_python(v[j]) for k, v in flat.items()} for j in range(n)]
        return (state, prev, has_prev, args), records, status

    def failure(self, carry, iteration, status):
        state, _, _, args = carry
        if self.algo.restore is not None:  # the rolled-back state: its derived arrays recomputed
            state = _restore(self.algo, self.static, state, args)
        reason = "nonfinite" if status == NONFINITE else "collapse"
        culprit = self.explain(state, args, iteration, reason) if self.explain is not None else None
        return state, reason, f"; {culprit}" if culprit else "", culprit


class _HostSteps:
    """:func:`run_host`'s iterations for :func:`_loop`: one host-level step at a time.  The carry is
    ``(state, bad)``: the state and, after a failing step, ``"name = value"`` of what was not
    finite (the state is then the one the failing step was given)."""

    size = 1

    def __init__(self, step, health, to_host, from_host):
        self.step, self.health, self.to_host, self.from_host = step, health, to_host, from_host

    @staticmethod
    def state(carry):
        return carry[0]

    def restore(self, checkpoint, carry):
        saved = checkpoint.restore_host()
        if saved is None:
            return None
        host, done, history, finished = saved
        return (self.from_host(host, carry[0]), None), done, history, finished

    def save(self, checkpoint, carry, done, history, last):
        checkpoint.save_host(self.to_host(carry[0]), done, history, finished=last)

    def advance(self, carry, done, todo, history):
        new, record = self.step(carry[0], done + 1)
        bad = _first_nonfinite(record) or (_first_nonfinite(self.health(new)) if self.health is not None else None)
        if bad is not None:
            return (carry[0], bad), [], NONFINITE
        return (new, None), [record], RUNNING

    @staticmethod
    def failure(carry, iteration, status):
        return carry[0], "nonfinite", f" ({carry[1]})", carry[1]


def _loop(steps, carry, *, max_iter: int, progress: bool, desc: str, checkpoint, postfix: Callable | None,
          after: Callable | None = None, after_every: int = 1):
    """The one driver loop of :func:`run` and :func:`run_host`: resuming from ``checkpoint``,
    ``steps.advance`` up to the next iteration where a host score or a checkpoint is due, the
    history (``iteration``, the step's record, ``seconds``: the wall time of the advance spread
    over its iterations), the progress bar, :class:`~topicjax.core.errors.NumericalError` for a
    failing iteration (its culprit from ``steps.failure``), the ``after`` host scores, the
    checkpoint saves and the stop at convergence.  ``postfix(state, history) -> dict`` sets the
    bar's postfix (default: the last objective).  Returns ``(state, history)``."""
    from tqdm.auto import tqdm

    every = max(int(after_every), 1)
    history: list[dict] = []
    done = 0
    finished = False
    if checkpoint is not None:
        saved = steps.restore(checkpoint, carry)
        if saved is not None:
            carry, done, history, finished = saved
    bar = tqdm(total=max_iter, initial=done, desc=desc, disable=not progress, leave=False)
    try:
        while done < max_iter and not finished:
            todo = min(steps.size, max_iter - done)
            if after is not None:  # end blocks where host scores are due
                todo = min(todo, every - done % every)
            if checkpoint is not None:  # ... and where checkpoints are due
                todo = min(todo, checkpoint.every - done % checkpoint.every)
            t0 = time.perf_counter()
            carry, records, status = steps.advance(carry, done, todo, history)
            per = (time.perf_counter() - t0) / max(len(records) + (status >= NONFINITE), 1)
            for j, rec in enumerate(records):
                history.append({"iteration": done + j + 1, **rec, "seconds": per})
            done += len(records)
            bar.update(len(records))
            if history and progress:  # formatting the postfix costs a LIDA sweep ~0.1 ms
                bar.set_postfix(**(postfix(steps.state(carry), history) if postfix is not None
                                   else {"objective": f"{history[-1]['objective']:.6g}"}))
            if status in (NONFINITE, COLLAPSE):
                state, reason, detail, blame = steps.failure(carry, done + 1, status)
                what = ("non-finite values" if reason == "nonfinite"
                        else "a collapse (every topic or every document would be removed)")
                raise NumericalError(f"{desc}: iteration {done + 1} produced {what}{detail}; the last good state is "
                                     "kept in this error's .state", iteration=done + 1, reason=reason, blame=blame,
                                     state=state)
            last = status == CONVERGED or done >= max_iter
            if after is not None and history and (done % every == 0 or last):
                history[-1].update(after(done, steps.state(carry)) or {})
            if checkpoint is not None and (done % checkpoint.every == 0 or last):
                steps.save(checkpoint, carry, done, history, last)
            if status == CONVERGED:
                break
    finally:
        bar.close()
    return steps.state(carry), history


@numerics.full_precision
def run(algo: Algorithm, static, state, args, *, max_iter: int, tol: float = 0.0, progress: bool = True,
        desc: str = "fit", before: Callable | None = None, after: Callable | None = None, after_every: int = 1,
        explain: Callable | None = None, block: int | None = None, checkpoint=None, donate: bool = False,
        postfix: Callable | None = None):
    """Run ``algo`` from ``state`` to its stopping rule (see the module docstring).

    Returns ``(state, history)``: history is a list of dicts, one per iteration, with
    ``iteration``, ``objective``, ``seconds`` (wall time of the iteration; a block's time spread
    over its iterations, the first including compilation) and the fields of ``algo.record``
    (scalars as Python numbers, arrays as numpy) and of ``after``.  ``explain(state, args,
    iteration, reason) -> str`` adds the culprit to the error of a failing iteration.
    ``checkpoint``: a :class:`~topicjax.core.checkpoint.RunCheckpoint`: blocks end at its
    multiples of ``every``, where the state, the last measure, the history and the host state
    are saved; a saved run resumes where it stopped (a finished one returns at once), giving
    the same state and history as the uninterrupted run.  ``donate=True`` hands ``state``'s
    buffers to the compiled blocks, which write the new state into them (one copy of the state
    less at the peak: 0.5 GB for PTM at NYTimes size); the caller must not use ``state`` (or any
    array it shares with another object) afterwards, and no array of ``state`` may be in ``args``.
    ``postfix(history) -> dict`` sets the progress bar's postfix after each block (default: the
    last objective).  The loop itself (history, progress bar, errors, checkpoints) is
    :func:`run_host`'s too.
    """
    _check_rollback(algo)
    # one block size whatever max_iter is (the iterations of a block are a traced count), so a
    # refit with another max_iter reuses the compiled program
    steps = _CompiledSteps(algo, static, block_fn=_block_donating if donate else _block,
                           size=1 if before is not None else int(block or BLOCK), tol=tol, before=before,
                           explain=explain)
    return _loop(steps, steps.start(state, args), max_iter=int(max_iter), progress=progress, desc=desc,
                 checkpoint=checkpoint, postfix=None if postfix is None else (lambda s, history: postfix(history)),
                 after=after, after_every=after_every)


def _first_nonfinite(values: dict) -> str | None:
    """``"name = value"`` of the first real number in ``values`` that is not finite."""
    for k, v in values.items():
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            continue
        if not np.isfinite(v):
            return f"{k} = {v}"
    return None


def _last_record(history: list[dict]) -> dict:
    """The step's own record of the last iteration (its history entry without the loop's fields)."""
    return {k: v for k, v in history[-1].items() if k not in ("iteration", "seconds")}


def run_host(step, state, *, max_iter: int, progress: bool = True, desc: str = "fit",
             health: Callable | None = None, postfix: Callable | None = None, checkpoint=None,
             to_host: Callable | None = None, from_host: Callable | None = None, args=None, static=None):
    """Run a host-level algorithm for ``max_iter`` iterations (see the module docstring): the loop
    of :func:`run` with one host step per iteration.

    ``step`` is a :class:`HostAlgorithm`, run with ``args`` and ``static`` (its ``health``,
    ``postfix``, ``to_host`` and ``from_host`` are used where the keywords of the same names are
    not given), or a plain callable ``step(state, iteration) -> (state, record)`` with the
    keywords below.  A step does iteration ``iteration`` (1, 2, ...) on the
    host and may return a state of other shapes than it was given; ``record`` (a dict of Python
    numbers, ``objective`` among them) becomes the iteration's history entry, between
    ``iteration`` and ``seconds`` (the wall time of the step).  A non-finite number in the record,
    or in ``health(state) -> {name: number}`` (values the record does not show), ends the fit with
    :class:`~topicjax.core.errors.NumericalError` naming it and keeping the last good state (the
    state the failing step was given: a step that donates its input's buffers, as LIDA's sweeps
    do, leaves its arrays deleted);
    ``postfix(state, record) -> dict`` sets the progress bar's postfix (default: the objective).
    ``checkpoint``: a :class:`~topicjax.core.checkpoint.RunCheckpoint`; the state is saved every
    ``checkpoint.every`` iterations and after the last as ``to_host(state)`` (JSON values and
    numpy arrays) and restored as ``from_host(saved, state)``; a saved run resumes at the saved
    iteration (a finished one returns at once).  Returns ``(state, history)`` as :func:`run`.

    Raises :class:`ValueError` for a checkpoint without ``to_host`` and ``from_host``.
    """
    if isinstance(step, HostAlgorithm):
        algo = step

        def step(s, iteration):
            return algo.step(s, iteration, args, static)

        if health is None and algo.health is not None:
            def health(s):
                return algo.health(s, static)
        postfix = postfix if postfix is not None else algo.postfix
        to_host = to_host if to_host is not None else algo.to_host
        if from_host is None and algo.from_host is not None:
            def from_host(saved, s):
                return algo.from_host(saved, s, static)
    if checkpoint is not None and (to_host is None or from_host is None):
        raise ValueError("run_host: a checkpoint needs to_host and from_host")
    return _loop(_HostSteps(step, health, to_host, from_host), (state, None), max_iter=int(max_iter),
                 progress=progress, desc=desc, checkpoint=checkpoint,
                 postfix=None if postfix is None else (lambda s, history: postfix(s, _last_record(history))))


def flatten_records(recs: dict) -> dict:
    """Nested record dicts flattened to ``"outer/inner"`` keys."""
    out = {}
    for k, v in recs.items():
        if isinstance(v, dict):
            for k2, v2 in flatten_records(v).items():
                out[f"{k}/{k2}"] = v2
        else:
            out[k] = v
    return out


# ----------------------------------------------------------------------------- batches
def _fixed_impl(algo, static, max_iter, state, args, tol):
    prev = algo.objective(state, args, static)
    state, _, _, n, status, recs = _block_impl(algo, static, max_iter, state, args, prev, False, max_iter, tol)
    return state, recs, n, status


def run_fixed(algo: Algorithm, static, state, args, *, max_iter: int, tol: float = 0.0):
    """One whole fit compiled: ``(state, records (max_iter rows), n_iter, status)``, the pure
    function that :func:`run_many` maps over models (and that ``jax.grad`` can differentiate).
    After a failing iteration an algorithm with ``restore`` has its state restored by a second
    call (outside the compiled fit)."""
    _check_rollback(algo)
    state, recs, n, status = _fixed_jit(algo, static, int(max_iter), state, args, tol)
    if algo.restore is not None and int(status) >= NONFINITE:
        state = _restore(algo, static, state, args)
    return state, recs, n, status


_fixed_jit = jit(_fixed_impl, static_argnames=("algo", "static", "max_iter"))


def default_mode() -> str:
    """``"vmap"`` on accelerators, ``"devices"`` with several local CPU devices, else
    ``"sequential"`` (on one CPU device a model's step is bound by memory traffic that batching
    does not share, experiments/results/bench_grid_cpu.md)."""
    if jax.default_backend() != "cpu":
        return "vmap"
    return "devices" if len(jax.local_devices()) > 1 else "sequential"


def _many_impl(algo, static, max_iter, mode, vmap_size, batched, n_dev, states, args, tol):
    args_b = tuple(a for a, b in zip(args, batched) if b)
    args_s = tuple(a for a, b in zip(args, batched) if not b)

    def run_models(s, ab, a_s):
        def one(x):
            it_b, it_s = iter(x[1]), iter(a_s)
            merged = tuple(next(it_b) if b else next(it_s) for b in batched)
            return _fixed_impl(algo, static, max_iter, x[0], merged, tol)

        return jax.lax.map(one, (s, ab), batch_size=None if vmap_size <= 1 else vmap_size)

    if mode == "devices":
        from jax.sharding import Mesh
        from jax.sharding import PartitionSpec as P

        mesh = Mesh(np.array(jax.local_devices()[:n_dev]), ("models",))
        sharded = jax.tree.map(lambda _: P("models"), (states, args_b))
        f = jax.shard_map(run_models, mesh=mesh, in_specs=(*sharded, jax.tree.map(lambda _: P(), args_s)),
                          out_specs=P("models"), check_vma=False)
        return f(states, args_b, args_s)
    return run_models(states, args_b, args_s)


_many_jit = jit(_many_impl, static_argnames=("algo", "static", "max_iter", "mode", "vmap_size", "batched", "n_dev"))


def _tree_rows_impl(tree, start, size):
    return jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, start, size), tree)


#: rows ``start:start + size`` of every array of a pytree in one compiled program (a thread's
#: models under ``"threads"``; sliced eagerly, every array's slice compiled a program of its own)
_tree_rows = jit(_tree_rows_impl, static_argnames=("size",))
#: pytrees of one structure concatenated leaf by leaf, in one compiled program
_tree_concat = jit(lambda trees: jax.tree.map(lambda *xs: jnp.concatenate(xs), *trees))


@numerics.full_precision
def run_many(algo: Algorithm, static, states, args: tuple, *, batched: tuple, max_iter: int, tol: float = 0.0,
             mode: str | None = None, vmap_size: int | None = None, workers: int | None = None):
    """Run the fits of a batch (leading axis ``G`` of ``states`` and of every element of the
    tuple ``args`` whose flag in ``batched`` is True) in one compiled call per device or thread.

    Returns ``(states, records, n_iter, status)`` stacked over the models; model ``g`` equals
    :func:`run_fixed` on its own state and arguments (up to float round-off under ``"vmap"``).
    ``mode``: see the module docstring (default :func:`default_mode`); ``vmap_size``: models
    side by side under ``"vmap"`` (default all); ``workers``: threads under ``"threads"``
    (default: the number of CPU cores).
    """
    _check_rollback(algo)
    mode = mode or default_mode()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    batched = tuple(bool(b) for b in batched)
    if len(batched) != len(args):
        raise ValueError(f"batched has {len(batched)} flags for {len(args)} arguments")
    G = int(jax.tree.leaves(states)[0].shape[0])
    max_iter = int(max_iter)
    if mode == "threads":
        import os

        workers = max(1, min(int(workers or len(os.sched_getaffinity(0))), G))
        bounds = np.linspace(0, G, workers + 1).astype(int)

        def chunk(k):
            s_k, a_k = _tree_rows((states, tuple(a if b else None for a, b in zip(args, batched))),
                                  int(bounds[k]), int(bounds[k + 1] - bounds[k]))
            a_k = tuple(x if b else a for x, a, b in zip(a_k, args, batched))
            return _many_jit(algo, static, max_iter, "sequential", 1, batched, 1, s_k, a_k, tol)

        with ThreadPoolExecutor(workers) as pool:
            parts = list(pool.map(chunk, range(workers)))
        return _restore_failed(algo, static, _tree_concat(parts), args, batched)
    n_dev = 1
    if mode == "devices":
        n_dev = len(jax.local_devices())
        pad = (-G) % n_dev
        if pad:  # repeat the last model to fill every device; the copies are dropped below
            rep = lambda a: jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)])  # noqa: E731
            states = jax.tree.map(rep, states)
            args = tuple(jax.tree.map(rep, a) if b else a for a, b in zip(args, batched))
    if vmap_size is not None and (isinstance(vmap_size, bool) or not isinstance(vmap_size, (int, np.integer))
                                  or vmap_size < 1):
        raise ValueError(f"vmap_size must be an integer >= 1, got {vmap_size!r}")
    bs = G if vmap_size is None else min(int(vmap_size), G)
    if mode == "sequential":
        bs = 1
    out = _many_jit(algo, static, max_iter, mode, bs, batched, n_dev, states, args, tol)
    return _restore_failed(algo, static, jax.tree.map(lambda a: a[:G], out), args, batched)


def _restore_failed(algo, static, out, args, batched):
    """``run_many``'s result with the states of the models whose fit failed restored (only for an
    algorithm with ``restore``; one model at a time, outside the compiled batch)."""
    states, recs, n_iter, status = out
    if algo.restore is None:
        return out
    for g in np.flatnonzero(np.asarray(status) >= NONFINITE):
        args_g = tuple(jax.tree.map(lambda a: a[g], a) if b else a for a, b in zip(args, batched))
        good = _restore(algo, static, jax.tree.map(lambda a: a[g], states), args_g)
        states = jax.tree.map(lambda a, x: a.at[g].set(x), states, good)
    return states, recs, n_iter, status

