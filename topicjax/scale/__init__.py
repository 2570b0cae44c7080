"""Scale: online EM over on-disk batch stores, and one model sharded over devices and hosts."""

from topicjax.scale import distributed, online

__all__ = ["distributed", "online"]
