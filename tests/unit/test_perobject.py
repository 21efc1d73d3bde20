"""Values computed from an object are kept exactly while the object lives, and only for that object."""

from __future__ import annotations

import gc

from pydantic import BaseModel

from pve_steward.perobject import PerObject


class Page(BaseModel):
    n: int


def test_a_value_is_made_once_per_live_object_and_key() -> None:
    memo: PerObject[str] = PerObject()
    made: list[str] = []

    def make(text: str) -> str:
        made.append(text)
        return text

    a, b = Page(n=1), Page(n=1)  # equal, yet two objects: two values
    assert memo.get(a, "k", lambda: make("a")) == "a"
    assert memo.get(a, "k", lambda: make("again")) == "a"
    assert memo.get(b, "k", lambda: make("b")) == "b"
    assert memo.get(a, "other", lambda: make("a2")) == "a2"
    assert made == ["a", "b", "a2"]


def test_the_value_goes_with_its_object() -> None:
    memo: PerObject[list[int]] = PerObject()
    page = Page(n=1)
    memo.get(page, None, lambda: [1])
    assert len(memo) == 1
    del page
    gc.collect()
    assert len(memo) == 0, "nothing outlives the object it was computed from"


def test_an_object_that_cannot_be_held_weakly_gets_a_fresh_value_each_time() -> None:
    memo: PerObject[int] = PerObject()
    rows = [1, 2]
    calls = iter(range(10))
    assert memo.get(rows, None, lambda: next(calls)) == 0
    assert memo.get(rows, None, lambda: next(calls)) == 1
    assert len(memo) == 0
