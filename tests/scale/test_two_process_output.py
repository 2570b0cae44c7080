"""Issue 45 item 4: a run over two processes reports once.  Process 0 alone shows the progress
bar; neither process's standard output gets gloo's connection line (``[Gloo] Rank r is connected
to ...``, written from C++), and what the script itself prints after ``initialize`` still gets
there."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.multidevice import ROOT, env, free_port

CHILD = textwrap.dedent(
    """
    import sys
    from topicjax.scale import distributed
    distributed.initialize("127.0.0.1:{port}", num_processes=2, process_id=int(sys.argv[1]))
    print("initialized", flush=True)
    import jax
    from topicjax import datasets
    corpus = datasets.make_bars(n_docs=16, doc_length=10, seed=0).corpus
    model = distributed.fit(corpus, 3, max_iter=2, random_state=0, scores=())  # progress on (the default)
    print("fitted", jax.process_index(), len(model.history_), flush=True)
    jax.distributed.shutdown()
    """
)


def test_only_process_0_reports_and_gloo_says_nothing():
    code = CHILD.format(port=free_port())
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], env=env(2), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT) for i in range(2)]
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for i, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, err[-3000:]
        assert out.splitlines() == ["initialized", f"fitted {i} 2"], out  # no "[Gloo] Rank ..." line
        assert "Gloo" not in err
    assert "ARTM: 100%" in outs[0][1]  # the bar of process 0 (tqdm writes to the standard error)
    assert "ARTM" not in outs[1][1] and "%|" not in outs[1][1]
