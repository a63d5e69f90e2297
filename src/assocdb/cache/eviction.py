"""Eviction from tier 1: CLOCK for lists and objects, LRU for home timelines.

While the cache holds more than `max_bytes`: home timelines go first when they
hold half the memory or more; otherwise lists or objects, whichever are more
numerous. A hit sets its entry's reference bit instead of moving its key (it
never changes a dict); eviction gives an entry with the bit set a second
chance (the bit cleared, the key moved to the end), and spares up to 8 of the
hottest keys (`HotKeys`) a round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.cachekeys import HOME, LIST

if TYPE_CHECKING:
    from .tier1 import Cache


def evict(cache: Cache) -> None:
    """Drop entries until the cache holds at most `max_bytes` (call with its lock held)."""
    spared = 0
    while cache.bytes > cache.config.max_bytes and (cache._lists or cache._objects or cache._homes):
        if cache._homes and (
            cache._home_bytes * 2 >= cache.bytes or not (cache._lists or cache._objects)
        ):  # home timelines hold half the memory or more
            owner = next(iter(cache._homes))
            if spared < 8 and cache.hot.is_hot((HOME, owner)):
                cache._homes.move_to_end(owner)
                spared += 1
                continue
            cache._drop_home(owner)
        elif cache._lists and (not cache._objects or len(cache._lists) >= len(cache._objects)):
            lists = cache._lists
            key = next(iter(lists))  # the oldest; hits never change the dict
            entry = lists[key]
            if entry.used or (spared < 8 and cache.hot.is_hot((LIST, *key))):
                spared += not entry.used  # the hottest lists stay longer
                entry.used = False  # a second chance
                del lists[key]
                lists[key] = entry
                continue
            del lists[key]
            cache.bytes -= entry.nbytes + cache.decoded.forget(entry)
        else:
            objects = cache._objects
            obj_id = next(iter(objects))  # the oldest; hits never change the dict
            oldest = objects.pop(obj_id)
            if oldest.used:
                oldest.used = False  # a second chance
                objects[obj_id] = oldest
                continue
            cache.bytes -= oldest.nbytes
        cache.evictions += 1
