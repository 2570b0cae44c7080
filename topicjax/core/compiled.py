"""``jit``: ``jax.jit`` with the compiler options of every program topicjax compiles.

XLA's CPU compiler (jaxlib 0.10) hands element-wise and reduction fusions to the YNNPACK library
(``ynn_fusion`` in the optimised HLO).  Inside a loop (``while_loop``, ``scan``: the drivers'
blocks, the samplers' sweeps) such a fusion allocates its own output at every iteration, outside
XLA's buffer plan, and copies it back: the normalisation of Θ's columns, ``θ / Σ_t θ_td``, in a
4-iteration loop over a 100 x 800,000 Θ held 3.0 Θ more than XLA's ``memory_analysis()``
accounts for and took 1.8 s; without YNNPACK's element-wise and reduction fusions, 0.05 Θ and
0.56 s (XLA's own loop fusion writes in place).  A PLSA fit's loop held 3.3 Θ-sized arrays beside
its state, 2.4 without them (XLA plans 2.3); at NYTimes size the fit peaked at 2.96 GiB with 1.68 s
per iteration, and at 2.85 GiB with 1.56 s without them (``experiments/results/bench_scale.md``,
"Session 19"); at PubMed size a Θ-sized array is 3.3 GB.

So topicjax's programs ask XLA to give YNNPACK matrix products only
(``xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_DOT``; jaxlib's default also sends it
element-wise and reduction fusions).  The options are settled once, at the first compilation:
only on the CPU backend, and only if this jaxlib knows the option (a trial compilation of a
one-line program; a jaxlib without it, older or newer, compiles with its defaults).  Programs that
users compile themselves are not affected, and nothing is set in ``XLA_FLAGS``.

Importing this module turns on JAX's persistent compilation cache in topicjax's folder
(:func:`topicjax.core.jit_cache.enable`), unless the user set JAX's cache or ``TOPICJAX_CACHE=off``:
a new interpreter then loads a fit's programs instead of compiling them.  At import, not at the
first compilation here: code outside this module may compile before it (an eager operation, a
random key), and JAX stores only what it compiles after the folder is set.  ``import topicjax`` does not import this
module (:mod:`topicjax` loads its families at their first use), so a user who sets JAX's cache
after ``import topicjax`` and before using a model keeps it.  JAX's cache is process-wide: the
user's own programs compiled afterwards are stored too.

>>> import jax.numpy as jnp
>>> from topicjax.core.compiled import jit
>>> @jit
... def normalize(theta):
...     return theta / theta.sum(0)
>>> normalize(jnp.ones((4, 3))).sum(0).tolist()
[1.0, 1.0, 1.0]
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from topicjax.core import jit_cache

__all__ = ["OPTIONS", "compiler_options", "jit"]

jit_cache.enable()  # before anything of topicjax compiles: see the module docstring

#: XLA options of topicjax's programs on CPU (see the module docstring).
OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}

_chosen: dict | None = None


def compiler_options() -> dict:
    """The options topicjax's programs are compiled with: :data:`OPTIONS` on the CPU backend of a
    jaxlib that knows them, else none.  Decided at the first call (which starts JAX's backend)."""
    global _chosen
    if _chosen is None:
        chosen = {}
        if jax.default_backend() == "cpu":
            try:
                jax.jit(lambda x: x + 1, compiler_options=OPTIONS).lower(np.float32(0)).compile()
                chosen = dict(OPTIONS)
            except Exception:  # noqa: BLE001 - "No such compile option": this jaxlib's defaults then
                chosen = {}
        _chosen = chosen
    return _chosen


class _Jitted:
    """A function compiled by ``jax.jit`` with :func:`compiler_options`, created at its first use
    (the options need JAX's backend, which importing topicjax must not start).  Called while
    another program is being traced, it is the plain ``jax.jit`` function: JAX takes compiler
    options at the top level only, where the outer program's apply.
    ``lower``, ``trace``, ``eval_shape`` and the rest are those of the ``jax.jit`` object with the
    options."""

    def __init__(self, fun, kwargs: dict):
        functools.update_wrapper(self, fun)
        self._fun, self._kwargs, self._jitted, self._nested = fun, kwargs, None, None

    def _get(self):
        if self._jitted is None:
            self._jitted = jax.jit(self._fun, compiler_options=compiler_options() or None, **self._kwargs)
        return self._jitted

    def _plain(self):
        if self._nested is None:
            self._nested = jax.jit(self._fun, **self._kwargs)
        return self._nested

    def __call__(self, *args, **kwargs):
        try:
            return self._get()(*args, **kwargs)
        except ValueError as e:
            # JAX refuses compiler options while another program is being traced (a call inside
            # jit, scan, while_loop); that is at trace time only, so no call at run time pays for
            # a check, and the outer program's options apply
            if "compiler_options" not in str(e):
                raise
            return self._plain()(*args, **kwargs)

    def __getattr__(self, name):
        if "_fun" not in self.__dict__:  # while copying or unpickling, before __init__ ran
            raise AttributeError(name)
        return getattr(self._get(), name)


def jit(fun=None, **kwargs):
    """``jax.jit(fun, **kwargs)`` compiled with :func:`compiler_options`; ``@jit``,
    ``@functools.partial(jit, static_argnames=...)`` and ``jit(fun, donate_argnums=0)`` work as with
    ``jax.jit``."""
    if fun is None:
        return functools.partial(jit, **kwargs)
    return _Jitted(fun, kwargs)
