"""Scale: online EM over on-disk batch stores, and one model sharded over devices and hosts.

* :mod:`~topicjax.scale.store` -- the batch store (a corpus on disk, read one batch at a time);
* :mod:`~topicjax.scale.convert` -- UCI and Vowpal Wabbit files streamed into a store;
* :mod:`~topicjax.scale.online` -- the online PLSA/ARTM fit over a store (``fit_online``);
* :mod:`~topicjax.scale.offline` -- offline PLSA/ARTM EM streamed from a store (``fit_store``);
* :mod:`~topicjax.scale.distributed` -- one model's documents sharded over devices and processes.
"""

from topicjax.scale import convert, distributed, offline, online, store

__all__ = ["convert", "distributed", "offline", "online", "store"]
