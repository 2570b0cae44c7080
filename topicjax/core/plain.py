"""Plain Python values of arrays, for JSON: what a save's ``meta.json``, a regularizer's spec and
the command line's summaries write.

>>> import numpy as np
>>> jsonable({"phi": np.eye(2, dtype=np.float32), "n": np.int64(3), 1: (np.float32(0.5),)})
{'phi': [[1.0, 0.0], [0.0, 1.0]], 'n': 3, '1': [0.5]}
"""

from __future__ import annotations

import numpy as np

__all__ = ["jsonable"]


def jsonable(x):
    """``x`` with numpy/JAX arrays and scalars turned into lists and Python numbers (for JSON);
    dict keys become strings, tuples lists."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if hasattr(x, "shape") and hasattr(x, "dtype"):  # jax arrays
        return np.asarray(x).tolist()
    return x
