"""The one driver and the batch driver: stopping rule, non-finite and collapse checks, history,
host hooks, blocks; every batch mode equals the fits one by one."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from topicjax import datasets
from topicjax.artm import algorithm as em
from topicjax.core import driver, layout
from topicjax.core.errors import NumericalError
from topicjax.regularizers import as_regularizer


class S(NamedTuple):
    x: jax.Array
    i: jax.Array


def _step(s, args, static):
    # a scripted objective sequence: args[0][i] after i + 1 steps
    return S(s.x, s.i + 1)


def _objective(s, args, static):
    return args[0][jnp.minimum(s.i, args[0].shape[0] - 1)]


def _record(s, args, static):
    return {"i": s.i}


SCRIPTED = driver.Algorithm(step=_step, objective=_objective, record=_record)


def _python_rule(seq, tol):
    """The stopping rule written out: stop after iteration i >= 2 when |seq[i] - seq[i-1]| <=
    tol · max(|seq[i]|, 1e-30); seq[0] is the start, never compared."""
    for i in range(2, len(seq)):
        if tol > 0 and abs(seq[i] - seq[i - 1]) <= tol * max(abs(seq[i]), 1e-30):
            return i
    return len(seq) - 1


@pytest.mark.parametrize("block", [1, 3, None])
def test_stopping_rule_on_scripted_objectives(block):
    sequences = [
        [100.0, 90.0, 89.999, 80.0, 70.0],  # converges at iteration 2
        [100.0, 100.0, 50.0, 49.0, 48.99999],  # iteration 1 is never compared with the start
        [100.0, 90.0, 80.0, 70.0],  # never within tol
        [100.0, 90.0, 90.0 - 90.0 * 1e-3, 1.0],  # about at the threshold (float32)
    ]
    for seq in sequences:
        for tol in (0.0, 1e-3, 1e-5):
            s0 = S(jnp.zeros(()), jnp.zeros((), jnp.int32))
            _, hist = driver.run(SCRIPTED, None, s0, (jnp.asarray(seq, jnp.float32),), max_iter=len(seq) - 1,
                                 tol=tol, progress=False, block=block)
            f32 = [float(np.float32(v)) for v in seq]
            assert len(hist) == _python_rule(f32, tol), (seq, tol)
            assert [h["iteration"] for h in hist] == list(range(1, len(hist) + 1))
            assert [h["objective"] for h in hist] == pytest.approx(f32[1:len(hist) + 1])
            assert all(set(h) >= {"iteration", "objective", "seconds", "i"} for h in hist)


def test_nonfinite_iteration_stops_with_the_last_good_state():
    seq = jnp.asarray([0.0, 1.0, 2.0, jnp.nan, 4.0])
    algo = SCRIPTED._replace(health=lambda s, static: (jnp.isfinite(seq[jnp.minimum(s.i, 4)]), jnp.array(True)))
    s0 = S(jnp.zeros(()), jnp.zeros((), jnp.int32))
    with pytest.raises(NumericalError, match="iteration 3 produced non-finite values; culprit") as e:
        driver.run(algo, None, s0, (seq,), max_iter=4, progress=False, explain=lambda s, a, it, r: "culprit")
    assert e.value.iteration == 3 and e.value.reason == "nonfinite" and int(e.value.state.i) == 2


def test_collapse_is_an_error_not_an_empty_model():
    algo = SCRIPTED._replace(health=lambda s, static: (jnp.array(True), s.i < 2))
    s0 = S(jnp.zeros(()), jnp.zeros((), jnp.int32))
    with pytest.raises(NumericalError, match="iteration 2 produced a collapse") as e:
        driver.run(algo, None, s0, (jnp.arange(5.0),), max_iter=4, progress=False)
    assert e.value.reason == "collapse" and int(e.value.state.i) == 1


class T(NamedTuple):
    i: jax.Array  # the parameter
    sq: jax.Array  # derived from it: i * i (what restore recomputes)


def _t_step(s, args, static):
    i = s.i + 1
    return T(i, jnp.where(i == 3, jnp.nan, (i * i).astype(jnp.float32)))  # iteration 3 fails


def _t_rollback(ok, new, old, static):
    return new._replace(i=jnp.where(ok, new.i, old.i))  # the derived field is not kept


def _t_restore(s, args, static):
    return s._replace(sq=(s.i * s.i).astype(jnp.float32))


ROLLBACK = driver.Algorithm(step=_t_step, objective=lambda s, args, static: s.sq,
                            health=lambda s, static: (jnp.isfinite(s.sq), jnp.array(True)),
                            rollback=_t_rollback, restore=_t_restore)


@pytest.mark.parametrize("donate", [False, True])
def test_rollback_keeps_part_of_the_state_and_restore_recomputes_the_rest(donate):
    """An algorithm that rolls back only its parameters: the failing iteration's derived values
    are recomputed by restore (outside the compiled loop) for the error's state, in run,
    run_fixed and run_many."""
    def s0():
        return T(jnp.zeros((), jnp.int32), jnp.zeros((), jnp.float32))

    with pytest.raises(NumericalError, match="iteration 3 produced non-finite values") as e:
        driver.run(ROLLBACK, None, s0(), (), max_iter=5, progress=False, donate=donate)
    assert int(e.value.state.i) == 2 and float(e.value.state.sq) == 4.0
    state, _, n, status = driver.run_fixed(ROLLBACK, None, s0(), (), max_iter=5)
    assert int(n) == 2 and int(status) == driver.NONFINITE and (int(state.i), float(state.sq)) == (2, 4.0)
    states = T(jnp.asarray([0, 3], jnp.int32), jnp.asarray([0.0, 9.0], jnp.float32))
    out, _, n, status = driver.run_many(ROLLBACK, None, states, (), batched=(), max_iter=4, mode="sequential")
    assert list(np.asarray(n)) == [2, 4] and list(np.asarray(status)) == [driver.NONFINITE, driver.RUNNING]
    assert list(np.asarray(out.i)) == [2, 7] and list(np.asarray(out.sq)) == [4.0, 49.0]


def test_rollback_and_restore_come_together():
    s0 = T(jnp.zeros((), jnp.int32), jnp.zeros((), jnp.float32))
    with pytest.raises(ValueError, match="rollback and restore together"):
        driver.run(ROLLBACK._replace(restore=None), None, s0, (), max_iter=2, progress=False)


def test_host_hooks_and_blocks():
    seen, scored = [], []
    s0 = S(jnp.zeros(()), jnp.zeros((), jnp.int32))
    seq = (jnp.arange(10.0),)

    def before(it, history):
        seen.append((it, len(history)))
        return seq

    def after(it, s):
        scored.append((it, int(s.i)))
        return {"host": it * 10}

    _, hist = driver.run(SCRIPTED, None, s0, seq, max_iter=7, progress=False, before=before, after=after,
                         after_every=3)
    assert seen == [(i, i - 1) for i in range(1, 8)]  # every iteration, with the history so far
    assert scored == [(3, 3), (6, 6), (7, 7)]  # every 3 iterations and after the last
    assert [h.get("host") for h in hist] == [None, None, 30, None, None, 60, 70]


@pytest.fixture(scope="module")
def em_problem():
    corpus, _, _ = datasets.make_bars(n_docs=60, doc_length=30, seed=2)
    data = layout.prepare(corpus)
    reg = as_regularizer(None)
    keys = jax.random.split(jax.random.key(0), 3)
    # compiled: vmapped eagerly, every operation of the initialisation compiled a program of its own
    states = jax.jit(jax.vmap(lambda k: em.init(k, corpus.n_words, corpus.n_docs, 5)))(keys)
    return corpus, data, reg, states


#: model ``g`` of a batch of states, in one compiled program (not one per array)
_model = jax.jit(lambda states, g: jax.tree.map(lambda a: a[g], states))


def test_run_equals_a_python_loop_of_steps(em_problem):
    corpus, data, reg, states = em_problem
    s0 = _model(states, 0)
    state, hist = driver.run(em.ARTM_EM, em.EMStatic(), s0, (data, reg, None), max_iter=7, progress=False)
    step = jax.jit(em.step)
    s = s0
    lls = []
    for _ in range(7):
        s = step(s, data, reg)
        lls.append(float(s.loglik))
    np.testing.assert_allclose(np.asarray(state.phi), np.asarray(s.phi), rtol=1e-6, atol=1e-8)
    assert [h["objective"] for h in hist] == pytest.approx(lls, rel=1e-7)
    fixed, recs, n, status = driver.run_fixed(em.ARTM_EM, em.EMStatic(), s0, (data, reg, None), max_iter=7)
    np.testing.assert_allclose(np.asarray(fixed.phi), np.asarray(s.phi), rtol=1e-6, atol=1e-8)
    assert int(n) == 7 and int(status) == driver.RUNNING


@pytest.mark.parametrize("mode", ["sequential", "vmap", "devices", "threads"])
def test_run_many_equals_each_fit_alone(em_problem, mode):
    """Each mode gives every model's own fit; ``"devices"`` spreads the 3 models over the local
    devices (one in the suite; 4 in tests/test_gpu_paths.py's multi-device run, where a copy of
    the last model fills the fourth device and is dropped)."""
    corpus, data, reg, states = em_problem
    out, recs, n, status = driver.run_many(em.ARTM_EM, em.EMStatic(), states, (data, reg, None),
                                           batched=(False, False, False), max_iter=6, tol=1e-4, mode=mode,
                                           vmap_size=2 if mode == "vmap" else None, workers=2)
    for g in range(3):
        alone = driver.run_fixed(em.ARTM_EM, em.EMStatic(), _model(states, g),
                                 (data, reg, None), max_iter=6, tol=1e-4)
        np.testing.assert_allclose(np.asarray(out.phi[g]), np.asarray(alone[0].phi), rtol=1e-5, atol=1e-7)
        assert int(n[g]) == int(alone[2])


def test_run_many_rejects_bad_settings(em_problem):
    corpus, data, reg, states = em_problem
    with pytest.raises(ValueError, match="mode must be one of"):
        driver.run_many(em.ARTM_EM, em.EMStatic(), states, (data, reg, None), batched=(False,) * 3, max_iter=2,
                        mode="gpu")
    with pytest.raises(ValueError, match="2 flags for 3 arguments"):
        driver.run_many(em.ARTM_EM, em.EMStatic(), states, (data, reg, None), batched=(False, False), max_iter=2)
    with pytest.raises(ValueError, match="vmap_size must be an integer >= 1"):
        driver.run_many(em.ARTM_EM, em.EMStatic(), states, (data, reg, None), batched=(False,) * 3, max_iter=2,
                        mode="vmap", vmap_size=0)
