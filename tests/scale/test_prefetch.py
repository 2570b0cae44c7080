"""fit_online's batch prefetching: the next batch is loaded in a background thread, and the
batches reach the fit in order, each exactly once per pass."""

import threading

from topicjax.scale.online import _Prefetch


def test_next_batch_is_loaded_in_the_background_in_order():
    seen = []

    def load(i):
        seen.append((i, threading.current_thread().name))
        return i * 10

    pre = _Prefetch(load, 3)
    try:
        got = [pre.get(i % 3) for i in range(7)]  # a little over two passes
        pre.ahead[1].result()
    finally:
        pre.close()
    assert got == [0, 10, 20, 0, 10, 20, 0]
    assert [i for i, _ in seen] == [0, 1, 2, 0, 1, 2, 0, 1]  # the first load, then one ahead each time
    assert seen[0][1] == threading.current_thread().name
    assert all(name.startswith("topicjax-prefetch") for _, name in seen[1:])


def test_a_batch_out_of_order_is_loaded_directly():
    pre = _Prefetch(lambda i: i, 5)
    try:
        assert pre.get(0) == 0
        assert pre.get(3) == 3  # not the prefetched one (1): loaded on the spot
        assert pre.get(4) == 4
    finally:
        pre.close()


def test_nothing_is_loaded_after_the_last_batch():
    seen = []
    pre = _Prefetch(lambda i: seen.append(i) or i, 4)
    try:
        assert [pre.get(0), pre.get(1, last=True)] == [0, 1]
    finally:
        pre.close()
    assert seen == [0, 1]
