"""TTMM parameters (π, τ, β), their random initialisation, and sampling of synthetic corpora
from the generative process (sec. 2)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from topicjax.data.corpus import Corpus
from topicjax.core.compiled import jit

__all__ = ["TTMMParams", "random_params", "synthetic_params", "sample_corpus"]


class TTMMParams(NamedTuple):
    """The TTMM parameters: ``pi`` (J,), ``tau`` (J, K), ``beta`` (K, W); rows sum to one."""

    pi: Float[Array, " J"]
    tau: Float[Array, "J K"]
    beta: Float[Array, "K W"]


def _random_params(key, n_themes: int, n_components: int, n_words: int, dtype=jnp.float32,
                   real_words=None) -> TTMMParams:
    k_tau, k_beta = jax.random.split(key)
    pi = jnp.full((n_themes,), 1.0 / n_themes, dtype)
    tau = jax.random.uniform(k_tau, (n_themes, n_components), dtype, 0.05, 1.0)
    if real_words is None:
        beta = jax.random.uniform(k_beta, (n_components, n_words), dtype, 0.05, 1.0)
    else:
        # entry (k, w) of the (K, real_words) draw: the counter-based generator draws entry i of
        # any shape from its flat index i, so the flat draw read at k * real_words + w is it
        flat = jax.random.uniform(k_beta, (n_components * n_words,), dtype, 0.05, 1.0)
        k, w = jnp.arange(n_components)[:, None], jnp.arange(n_words)[None, :]
        beta = jnp.where(w < real_words, flat[k * real_words + jnp.minimum(w, real_words - 1)], jnp.zeros((), dtype))
    return TTMMParams(pi, tau / tau.sum(1, keepdims=True), beta / beta.sum(1, keepdims=True))


# one compiled program instead of a dozen eagerly compiled random and arithmetic operations
_random_params_jit = jit(_random_params, static_argnums=(1, 2, 3, 4))


def random_params(key, n_themes: int, n_components: int, n_words: int, *, dtype=jnp.float32,
                  real_words=None) -> TTMMParams:
    """Initial parameters of EM and SGD: uniform π, rows of τ and β drawn uniformly in [0.05, 1]
    and normalised (which breaks the symmetry between themes and between topics).

    Depends on ``key`` only (bits may differ between CPU and GPU).  ``real_words`` (traced, at
    most ``n_words``): the columns of β from ``real_words`` on are no word (a vocabulary rounded
    up to a bucket) and are 0; the others are the draw of ``random_params(key, ..., real_words)``.
    """
    return _random_params_jit(key, int(n_themes), int(n_components), int(n_words), dtype, real_words)


def synthetic_params(n_themes: int, n_components: int, n_words: int, *, concentration: float = 0.3,
                     seed: int = 0) -> TTMMParams:
    """Parameters to sample synthetic corpora from (float64 numpy): π ~ Dirichlet(1), rows of τ and
    β ~ symmetric Dirichlet(``concentration``); small concentrations give distinct themes/topics."""
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.ones(n_themes))
    tau = rng.dirichlet(np.full(n_components, concentration), size=n_themes)
    beta = rng.dirichlet(np.full(n_words, concentration), size=n_components)
    # a Dirichlet draw with a small concentration can contain exact zeros; keep every word possible
    beta = np.maximum(beta, 1e-12)
    return TTMMParams(pi, tau, beta / beta.sum(1, keepdims=True))


def sample_corpus(params: TTMMParams, n_docs: int, *, doc_length=100, seed: int = 0, vocab=None):
    """Sample documents from the generative process of sec. 2 (steps 2-3; the length is given).

    ``doc_length`` is a fixed length or an inclusive ``(low, high)`` range.  Returns
    ``(corpus, themes)``; the corpus is labelled with the themes (``"theme{j}"``), so it can also
    serve as a labelled corpus.  Seeded with numpy: the same arguments give the same corpus.
    """
    pi, tau, beta = (np.asarray(x, np.float64) for x in params)
    pi, tau, beta = pi / pi.sum(), tau / tau.sum(1, keepdims=True), beta / beta.sum(1, keepdims=True)
    rng = np.random.default_rng(seed)
    themes = rng.choice(pi.size, size=n_docs, p=pi)
    if isinstance(doc_length, tuple):
        lengths = rng.integers(doc_length[0], doc_length[1] + 1, size=n_docs)
    else:
        lengths = np.full(n_docs, int(doc_length))
    p_word = tau @ beta  # P(w | h=j), eq. 1: drawing a topic then a word = drawing from this mixture
    counts = np.stack([rng.multinomial(lengths[d], p_word[themes[d]] / p_word[themes[d]].sum()) for d in range(n_docs)])
    corpus = Corpus.from_dense(counts, vocab=vocab, labels=[f"theme{j}" for j in themes],
                               label_names=[f"theme{j}" for j in range(pi.size)])
    return corpus, themes
