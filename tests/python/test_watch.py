"""Watches (SPEC K6): events, prefixes, history, cancellation, falling behind."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import tenure
from conftest import WAIT


def test_watch_yields_put_and_delete_events_in_order(db: tenure.Tenure) -> None:
    with db.watch("k", timeout=WAIT) as w:
        assert isinstance(w, tenure.Watcher)
        r1 = db.put("k", "1")
        db.put("other", "x")
        r2 = db.put("k", "2")
        assert db.delete("k") is True
        r3 = db.revision
        events = [next(w) for _ in range(3)]
    assert [(e.type, e.revision) for e in events] == [("put", r1), ("put", r2), ("delete", r3)]
    assert isinstance(events[0], tenure.Event)
    assert events[1].kv.value == b"2" and events[1].kv.version == 2
    deleted = events[2].kv
    assert deleted.key == b"k" and deleted.mod_revision == r3 and deleted.value == b""
    assert events[0].prev_kv is None  # not asked for
    assert repr(events[0]) == f"tenure.Event(type='put', key=b'k', revision={events[0].revision})"


def test_prev_kv_carries_the_previous_value(db: tenure.Tenure) -> None:
    db.put("k", "old")
    with db.watch("k", prev_kv=True, timeout=WAIT) as w:
        db.put("k", "new")
        db.delete("k")
        put, delete = next(w), next(w)
    assert put.prev_kv is not None and put.prev_kv.value == b"old"
    assert delete.prev_kv is not None and delete.prev_kv.value == b"new"


def test_prefix_watch_sees_every_key_under_it(db: tenure.Tenure) -> None:
    with db.watch("svc/", prefix=True, timeout=WAIT) as w:
        db.put("svc/a", "1")
        db.put("other", "x")
        db.put("svc/b", "2")
        keys = [next(w).kv.key for _ in range(2)]
        with pytest.raises(tenure.Timeout):
            w.recv(timeout=0.1)
    assert keys == [b"svc/a", b"svc/b"]


def test_start_revision_replays_history(db: tenure.Tenure) -> None:
    r1 = db.put("k", "1")
    db.put("k", "2")
    with db.watch("k", start_revision=r1, timeout=WAIT) as w:
        assert [next(w).kv.value for _ in range(2)] == [b"1", b"2"]


def test_a_watch_replays_the_history_after_reopen_and_below_a_compaction_raises_compacted(
    path: Path,
) -> None:
    with tenure.open(path) as db:
        db.put("k", "1")
        db.put("k", "2")
    with tenure.open(path) as db:
        with db.watch("k", start_revision=1, timeout=WAIT) as w:
            events = [next(w), next(w)]
        assert [(e.kv.value, e.revision) for e in events] == [(b"1", 1), (b"2", 2)]
        db.compact(2)
        with pytest.raises(tenure.Compacted):
            db.watch("k", start_revision=1)


def test_revoke_and_expiry_deletes_reach_watchers(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    a = db.grant(10.0)
    b = db.grant(1.0)
    db.put("x/1", "1", lease=a)
    db.put("x/2", "2", lease=a)
    db.put("x/3", "3", lease=b)
    with db.watch("x/", prefix=True, timeout=WAIT) as w:
        a.revoke()
        revoked = [next(w), next(w)]
        clock.advance(2.0)
        expired = next(w)
    assert [(e.type, e.kv.key) for e in revoked] == [("delete", b"x/1"), ("delete", b"x/2")]
    assert revoked[0].revision == revoked[1].revision  # one revision (L4)
    assert (expired.type, expired.kv.key) == ("delete", b"x/3")


def test_exiting_the_block_cancels_the_watch(db: tenure.Tenure) -> None:
    with db.watch("k") as w:
        assert not w.cancelled
    assert w.cancelled
    db.put("k", "v")
    assert list(w) == []
    with pytest.raises(tenure.Closed):
        w.recv(timeout=0.1)
    w.cancel()  # idempotent


def test_cancel_from_another_thread_ends_a_blocked_iteration(db: tenure.Tenure) -> None:
    w = db.watch("k")
    done = threading.Event()
    seen: list[tenure.Event] = []

    def consume() -> None:
        seen.extend(w)  # blocks without a timeout
        done.set()

    t = threading.Thread(target=consume)
    t.start()
    w.cancel()
    assert done.wait(WAIT)
    t.join(WAIT)
    assert seen == []


def test_iteration_stops_when_the_engine_closes(clock: tenure.ManualClock) -> None:
    db = tenure.open(clock=clock)
    w = db.watch("k", prefix=True)
    db.put("k1", "v")
    db.close()
    # What was committed before the close is still delivered, then iteration ends.
    assert [e.kv.key for e in w] == [b"k1"]


def test_next_with_timeout_raises_timeout(db: tenure.Tenure) -> None:
    with db.watch("k", timeout=0.05) as w:
        start = time.monotonic()
        with pytest.raises(tenure.Timeout):
            next(w)
        elapsed = time.monotonic() - start
    assert 0.04 <= elapsed < 5.0


def test_a_watcher_that_falls_too_far_behind_raises_compacted(db: tenure.Tenure) -> None:
    # The engine keeps at most 10 000 undelivered events per watcher, then cancels it.
    w = db.watch("k", timeout=WAIT)
    for i in range(10_001):
        db.put("k", str(i))
    received = 0
    with pytest.raises(tenure.Compacted):
        while True:
            next(w)
            received += 1
    assert received == 10_000
    assert list(w) == []


def test_watchers_are_counted_in_stats(db: tenure.Tenure) -> None:
    with db.watch("a"), db.watch("b"):
        assert db.stats()["watchers"] == 2


def test_a_watch_key_of_a_wrong_type_raises_type_error(db: tenure.Tenure) -> None:
    with pytest.raises(TypeError):
        db.watch(1)  # type: ignore[arg-type]


def test_a_non_positive_start_revision_raises_invalid_argument(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.InvalidArgument):
        db.watch("k", start_revision=0)


def test_k6_cancelled_and_dropped_watchers_are_gone_at_once(db: tenure.Tenure) -> None:
    # Before: each watcher reserved its whole queue (~1.9 MB) and stayed registered until its
    # key next changed, so 300 cancelled watches held ~560 MiB.
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(300):
        db.watch("k").cancel()
    assert db.stats()["watchers"] == 0
    for _ in range(300):
        w = db.watch("k")
        del w
    assert db.stats()["watchers"] == 0
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
    assert grown_mib < 64, f"600 short-lived watchers raised peak memory by {grown_mib} MiB"
