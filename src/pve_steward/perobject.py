"""Values computed from an object, kept exactly as long as the object lives.

Fifty callers that share one heavy run get one result object (admission.py); presenting and
encoding it fifty times was most of the CPU of their answers, all due at once, ahead of any cheap
call (issue 17). Keyed by identity, since pydantic models are neither hashable nor meant to be
compared field by field here; a weak reference drops the entry when the object goes, so nothing
outlives what it was computed from and an id is never reused while its entry remains.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class PerObject(Generic[V]):
    """``get(obj, key, make)``: ``make()`` once per live ``obj`` and ``key``, then the same value.

    A value must not refer to ``obj`` itself, or the two keep each other alive until a collection.
    An object that cannot be referred to weakly (a dict, a list) gets ``make()`` every time.
    """

    def __init__(self) -> None:
        self._values: dict[tuple[int, Hashable], tuple[weakref.ref[Any], V]] = {}

    def get(self, obj: Any, key: Hashable, make: Callable[[], V]) -> V:
        slot = (id(obj), key)
        held = self._values.get(slot)
        if held is not None and held[0]() is obj:
            return held[1]
        value = make()

        def forget(_gone: weakref.ref[Any]) -> None:
            self._values.pop(slot, None)

        try:
            ref = weakref.ref(obj, forget)
        except TypeError:  # a dict or list cannot be referred to weakly: computed each time
            return value
        self._values[slot] = (ref, value)
        return value

    def __len__(self) -> int:
        return len(self._values)
