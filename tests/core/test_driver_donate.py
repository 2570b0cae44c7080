"""driver.run(..., donate=True): the same fit, written into the initial state's buffers; and the
progress bar's postfix hook."""

import jax.numpy as jnp
import numpy as np

from topicjax.core import driver


def _step(s, args, static):
    # a damped fixed-point iteration x <- (x + a / x) / 2 (Newton for sqrt(a)), elementwise
    x, n = s
    return (0.5 * (x + args[0] / x), n + 1)


def _objective(s, args, static):
    return -jnp.sum((s[0] * s[0] - args[0]) ** 2)


NEWTON = driver.Algorithm(step=_step, objective=_objective)


def test_donated_run_equals_the_plain_run_and_consumes_the_state():
    a = jnp.asarray(np.linspace(1.0, 9.0, 64), jnp.float32)
    out = []
    for donate in (False, True):
        state = (jnp.ones(64, jnp.float32), jnp.zeros((), jnp.int32))
        final, history = driver.run(NEWTON, None, state, (a,), max_iter=7, block=3, progress=False, donate=donate)
        out.append((np.asarray(final[0]), [h["objective"] for h in history]))
        assert state[0].is_deleted() == donate  # the first block wrote into the caller's buffer
    np.testing.assert_array_equal(out[0][0], out[1][0])
    assert out[0][1] == out[1][1]
    np.testing.assert_allclose(out[1][0], np.sqrt(np.asarray(a)), rtol=1e-5)  # Newton has converged


def test_postfix_sees_the_history_after_each_block():
    calls = []

    def postfix(history):
        calls.append([h["iteration"] for h in history])
        return {"last": history[-1]["iteration"]}

    a = jnp.asarray([4.0, 9.0], jnp.float32)
    state = (jnp.ones(2, jnp.float32), jnp.zeros((), jnp.int32))
    driver.run(NEWTON, None, state, (a,), max_iter=5, block=2, progress=True, postfix=postfix)
    assert calls == [[1, 2], [1, 2, 3, 4], [1, 2, 3, 4, 5]]
