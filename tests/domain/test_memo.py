"""The bounded memo: what each policy forgets, exactly at its bound."""

from __future__ import annotations

import pytest

from workplace_env.memo import BoundedMemo, MemoPolicy


def filled(memo: BoundedMemo, count: int) -> BoundedMemo:
    for i in range(count):
        assert memo.put(i, str(i))
    return memo


def test_clear_keeps_up_to_the_bound_then_starts_over():
    memo = filled(BoundedMemo(3), 3)
    assert memo.entries == {0: "0", 1: "1", 2: "2"}
    memo.put(3, "3")  # full: emptied first
    assert memo.entries == {3: "3"}


def test_a_full_memo_evicts_even_for_a_key_it_holds():
    memo = filled(BoundedMemo(3), 3)
    memo.put(1, "one")
    assert memo.entries == {1: "one"}
    oldest = filled(BoundedMemo(3, MemoPolicy.OLDEST), 3)
    oldest.put(1, "one")  # drops 0; 1 keeps its place
    assert list(oldest.entries.items()) == [(1, "one"), (2, "2")]


def test_oldest_drops_the_first_inserted_whatever_was_read():
    memo = filled(BoundedMemo(3, MemoPolicy.OLDEST), 3)
    assert memo.recall(0) == "0"  # a read is no use under OLDEST
    memo.put(3, "3")
    assert list(memo.entries) == [1, 2, 3]
    memo.put(4, "4")
    assert list(memo.entries) == [2, 3, 4]


def test_lru_drops_the_least_recently_recalled():
    memo = filled(BoundedMemo(3, MemoPolicy.LRU), 3)
    assert memo.recall(0) == "0"
    assert memo.recall(9, "absent") == "absent"
    memo.put(3, "3")
    assert list(memo.entries) == [2, 0, 3]
    memo.entries.get(2)  # a plain lookup is not a use
    memo.put(4, "4")
    assert list(memo.entries) == [0, 3, 4]


def test_make_room_counts_the_pending_insertions():
    memo = filled(BoundedMemo(5), 3)
    memo.make_room(1)  # 3 + 1 < 5: kept
    assert len(memo) == 3
    memo.make_room(2)  # 3 + 2 reaches 5: emptied
    assert not memo.entries
    oldest = filled(BoundedMemo(3, MemoPolicy.OLDEST), 3)
    oldest.make_room()
    assert list(oldest.entries) == [1, 2]


def test_a_size_budget_drops_the_oldest_until_the_total_fits():
    memo = BoundedMemo(policy=MemoPolicy.LRU, max_size=10)
    assert memo.put("a", 1, size=4) and memo.put("b", 2, size=4)
    assert memo.size == 8
    memo.recall("a")
    assert memo.put("c", 3, size=4)  # 12 > 10: "b", least recently used, goes
    assert list(memo.entries) == ["a", "c"] and memo.size == 8
    assert memo.put("d", 4, size=10)  # exactly the budget: everything else goes
    assert list(memo.entries) == ["d"] and memo.size == 10
    assert not memo.put("e", 5, size=11)  # over the whole budget: never stored
    assert list(memo.entries) == ["d"] and memo.size == 10


def test_a_repeated_key_is_counted_once_in_the_size():
    memo = BoundedMemo(policy=MemoPolicy.OLDEST, max_size=10)
    memo.put("a", 1, size=4)
    memo.put("a", 1, size=6)
    assert memo.size == 6
    memo.clear()
    assert memo.size == 0 and not memo.entries and len(memo) == 0


def test_the_entry_bound_and_the_size_budget_both_hold():
    memo = BoundedMemo(2, MemoPolicy.OLDEST, max_size=100)
    for key in "abc":
        memo.put(key, key, size=10)
    assert list(memo.entries) == ["b", "c"] and memo.size == 20


def test_a_size_budget_needs_an_order():
    with pytest.raises(ValueError):
        BoundedMemo(policy=MemoPolicy.CLEAR, max_size=1)


def test_the_entries_are_a_plain_dict_kept_across_clears():
    memo = filled(BoundedMemo(2), 2)
    entries = memo.entries
    assert type(entries) is dict and len(memo) == 2
    memo.put(2, "2")  # emptied and refilled in place: a held reference stays current
    assert memo.entries is entries and entries == {2: "2"}


def test_has_room_only_when_plain_insertions_cannot_reach_the_bound():
    memo = filled(BoundedMemo(5), 3)
    assert memo.has_room(1)  # 4 < 5: put would evict nothing
    assert not memo.has_room(2)  # the second would find it full
    assert not BoundedMemo(policy=MemoPolicy.OLDEST, max_size=4).has_room(1)  # sizes: put
