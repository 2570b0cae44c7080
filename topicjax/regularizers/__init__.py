"""ARTM regularizers: the protocol and the pool of the paper (ARTM sec. 4)."""

from topicjax.regularizers.pool import *  # noqa: F401,F403
from topicjax.regularizers.pool import __all__, __doc__  # noqa: F401
