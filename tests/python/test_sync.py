"""Coordination (SPEC S1-S6) from Python: sessions, fair mutexes with fencing tokens, elections
and their observers, the leader elector, the fence gate and record locks; Ctrl-C during the
blocking waits and fork safety of every new object.

Time-dependent behaviour runs on a tenure.ManualClock; results of other threads are awaited on
queues with generous timeouts."""

from __future__ import annotations

import gc
import multiprocessing
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

import tenure
from conftest import PYTHON, WAIT, interrupt_in_child, python_env, wait_until

# ---- helpers ---------------------------------------------------------------------------------


def in_thread(call: Callable[[], object]) -> queue.Queue[object]:
    """Runs `call` on a thread; its result (or exception) arrives on the returned queue."""
    q: queue.Queue[object] = queue.Queue()

    def run() -> None:
        try:
            q.put(call())
        except BaseException as e:  # noqa: BLE001 - handed to the test
            q.put(e)

    threading.Thread(target=run, daemon=True).start()
    return q


def keys(db: tenure.Tenure, prefix: str) -> list[bytes]:
    return [kv.key for kv in db.range(prefix)]


def lease_alive(db: tenure.Tenure, lease_id: int) -> bool:
    try:
        db.time_to_live(lease_id)
        return True
    except tenure.LeaseNotFound:
        return False


@pytest.fixture
def sessions(db: tenure.Tenure) -> Iterator[Callable[[], tenure.Session]]:
    """Makes sessions on `db` and closes them at the end."""
    made: list[tenure.Session] = []

    def make() -> tenure.Session:
        s = db.session(ttl=10.0)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


# ---- S1 sessions -----------------------------------------------------------------------------


def test_s1_a_session_renews_its_lease_at_a_third_of_the_ttl_and_exit_revokes_it(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    with db.session(ttl=3.0) as s:
        assert isinstance(s, tenure.Session)
        assert s.id == s.lease_id and s.lease_id > 0
        assert s.db is db
        assert not s.done
        db.put("held", "v", lease=s.lease_id)
        renewed = db.stats()["renewed"]
        for n in range(1, 7):
            clock.advance(1.0)
            wait_until(lambda: db.stats()["renewed"] >= renewed + n)
            assert db.time_to_live(s.lease_id).remaining == pytest.approx(3.0)
        # Six seconds on a 3 s TTL: alive only because it was renewed.
        assert db.get("held") is not None and not s.done
    assert s.done
    assert not lease_alive(db, s.lease_id)
    assert db.get("held") is None


@pytest.mark.everywhere
def test_s1_done_and_wait_done_report_a_lost_lease(db: tenure.Tenure) -> None:
    s = db.session(ttl=10.0)
    assert s.wait_done(timeout=0.05) is False
    waiter = in_thread(lambda: s.wait_done())
    db.revoke(s.lease_id)
    assert waiter.get(timeout=WAIT) is True
    assert s.done and s.wait_done(timeout=0) is True
    s.close()  # idempotent on a lost lease


def test_s1_done_fires_when_the_lease_expires_after_orphan(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    s = db.session(ttl=2.0)
    s.orphan()
    clock.advance(1.0)
    assert lease_alive(db, s.id) and not s.done
    clock.advance(1.5)
    assert s.wait_done(timeout=WAIT)
    assert not lease_alive(db, s.id)


def test_s1_orphan_keeps_the_lease_and_resume_renews_it_again(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    s = db.session(ttl=3.0)
    s.orphan()
    renewed = db.stats()["renewed"]
    clock.advance(1.0)
    assert db.time_to_live(s.id).remaining == pytest.approx(2.0)  # no longer renewed
    assert db.stats()["renewed"] == renewed and not s.done
    resumed = tenure.Session.resume(db, s.id)
    assert resumed.lease_id == s.id
    for n in range(1, 4):
        clock.advance(1.0)
        wait_until(lambda: db.stats()["renewed"] >= renewed + n)
        assert db.time_to_live(s.id).remaining == pytest.approx(3.0)
    # Four seconds after the grant of a 3 s lease: alive thanks to the resumed session.
    again = db.resume_session(db.grant(5.0), keepalive_interval=1.0)
    assert isinstance(again, tenure.Session) and not again.done
    resumed.close()
    again.close()
    assert not lease_alive(db, s.id) and s.done


@pytest.mark.everywhere
def test_s1_resume_of_an_unknown_lease_raises_lease_not_found(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.LeaseNotFound):
        tenure.Session.resume(db, 12345)
    with pytest.raises(tenure.LeaseNotFound):
        db.resume_session(12345)


@pytest.mark.parametrize(
    "kwargs",
    [{"ttl": 0.0}, {"ttl": -1.0}, {"ttl": float("nan")}, {"keepalive_interval": 0.0}],
    ids=["ttl0", "ttl-neg", "ttl-nan", "interval0"],
)
def test_s1_bad_session_options_raise_invalid_argument(
    db: tenure.Tenure, kwargs: dict[str, float]
) -> None:
    with pytest.raises(tenure.InvalidArgument):
        db.session(**kwargs)


@pytest.mark.parametrize("interval", [9e9 + 1.0, 1e300, float("inf")])
def test_s1_a_keepalive_interval_above_the_bound_raises_invalid_argument_naming_it(
    db: tenure.Tenure, interval: float
) -> None:
    assert tenure.MAX_KEEPALIVE_INTERVAL == 9e9
    lease = db.grant(10.0)
    bound = r"keepalive_interval.*9000000000 s"
    with pytest.raises(tenure.InvalidArgument, match=bound):
        db.session(keepalive_interval=interval)
    with pytest.raises(tenure.InvalidArgument, match=bound):
        db.resume_session(lease, keepalive_interval=interval)
    with pytest.raises(tenure.InvalidArgument, match=bound):
        lease.keep_alive(interval)
    assert [info.id for info in db.leases()] == [lease.id]


def test_s1_a_session_of_a_closed_engine_raises_closed(clock: tenure.ManualClock) -> None:
    db = tenure.open(clock=clock)
    s = db.session()
    db.close()
    assert s.wait_done(timeout=WAIT)
    with pytest.raises(tenure.Closed):
        db.session()
    with pytest.raises(tenure.Closed):
        s.lock("m")


# ---- S2 mutex, S3 fencing tokens -------------------------------------------------------------


@pytest.mark.everywhere
def test_s2_lock_is_a_context_manager_holding_the_key_and_exit_unlocks(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    s = sessions()
    with s.lock("jobs/1", timeout=5.0) as guard:
        assert isinstance(guard, tenure.LockGuard)
        assert guard.is_held() and guard.name == "jobs/1"
        assert keys(db, "jobs/1/") == [guard.key] == [f"jobs/1/{s.id:x}".encode()]
        assert db.get(guard.key).create_revision == guard.fencing_token  # type: ignore[union-attr]
        assert guard.session is s
    assert not guard.is_held()
    assert keys(db, "jobs/1/") == []


@pytest.mark.everywhere
def test_s2_try_lock_raises_locked_while_held_and_leaves_no_key(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    a, b = sessions(), sessions()
    m = a.mutex("m")
    assert m.name == "m" and m.key == f"m/{a.id:x}".encode() and m.session is a
    guard = m.try_lock()
    with pytest.raises(tenure.Locked):
        b.mutex("m").try_lock()
    assert keys(db, "m/") == [m.key]
    guard.unlock()
    with b.mutex("m").try_lock() as g:
        assert g.is_held()


@pytest.mark.everywhere
def test_s2_lock_times_out_and_withdraws_its_key(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    a, b = sessions(), sessions()
    with a.lock("m"):
        start = time.monotonic()
        with pytest.raises(tenure.Timeout):
            b.lock("m", timeout=0.2)
        assert time.monotonic() - start >= 0.2
        assert keys(db, "m/") == [f"m/{a.id:x}".encode()]


@pytest.mark.everywhere
def test_s2_s4_nested_lock_and_election_names_do_not_interfere(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    # Reliability defect 7.
    a, b = sessions(), sessions()
    with a.lock("jobs/nightly"):
        with b.lock("jobs", timeout=WAIT) as g:
            assert g.is_held()
    a.election("svc/eu").campaign(b"eu", timeout=WAIT)
    assert db.election_leader("svc") is None


@pytest.mark.everywhere
def test_s2_a_mutex_is_not_reentrant_per_session(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    # Reliability defect 8: a second acquisition through the same session is refused.
    a = sessions()
    with a.lock("m", timeout=WAIT) as g:
        with pytest.raises(tenure.InvalidArgument, match="once per session"):
            a.lock("m", timeout=0.1)
        with pytest.raises(tenure.InvalidArgument):
            a.mutex("m").try_lock()
        assert g.is_held()
    with a.lock("m", timeout=WAIT) as g2:
        assert g2.fencing_token > g.fencing_token


def test_s2_s4_huge_lock_and_campaign_timeouts_saturate(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    # Reliability defect 9: a timeout too large for the clock panicked (code 18). (Beyond what
    # a duration holds, about 1.8e19 s, a timeout is refused with InvalidArgument.)
    a = sessions()
    for huge in (1e19, 1.8e19):
        with a.lock("x", timeout=huge) as g:
            assert g.is_held()
        a.election("e").campaign(b"v", timeout=huge).resign()


@pytest.mark.everywhere
def test_s2_the_mutex_is_fifo_and_the_context_manager_never_enters_without_the_lock(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    a, b, c = sessions(), sessions(), sessions()
    ga = a.lock("m")
    got_b = in_thread(lambda: b.lock("m", timeout=WAIT))
    wait_until(lambda: len(keys(db, "m/")) == 2)
    got_c = in_thread(lambda: c.lock("m", timeout=WAIT))
    wait_until(lambda: len(keys(db, "m/")) == 3)
    ga.unlock()
    gb = got_b.get(timeout=WAIT)
    assert isinstance(gb, tenure.LockGuard) and gb.is_held()
    assert got_c.empty()  # c still waits behind b
    assert gb.fencing_token > ga.fencing_token
    gb.unlock()
    gc_ = got_c.get(timeout=WAIT)
    assert isinstance(gc_, tenure.LockGuard) and gc_.fencing_token > gb.fencing_token
    gc_.unlock()
    # A guard no longer held is never entered.
    entered = False
    with pytest.raises(tenure.NotLeader):
        with gc_:
            entered = True
    assert not entered


@pytest.mark.everywhere
def test_s2_a_waiter_whose_session_is_revoked_raises_session_expired(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    a, b = sessions(), sessions()
    with a.lock("m"):
        waiter = in_thread(lambda: b.lock("m"))
        wait_until(lambda: len(keys(db, "m/")) == 2)
        db.revoke(b.lease_id)
        assert isinstance(waiter.get(timeout=WAIT), tenure.SessionExpired)
        assert keys(db, "m/") == [f"m/{a.id:x}".encode()]


@pytest.mark.everywhere
def test_s2_unlock_of_a_lost_or_released_lock_raises_not_leader(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    a, b = sessions(), sessions()
    g = a.lock("m")
    g.unlock()
    with pytest.raises(tenure.NotLeader):
        g.unlock()
    lost = b.lock("m")
    b.close()  # the session's lease is revoked: the lock is lost
    assert not lost.is_held()
    with pytest.raises(tenure.NotLeader):
        lost.unlock()
    # Exiting a block whose lock was lost meanwhile is not an error.
    c = sessions()
    with c.lock("m") as held:
        db.revoke(c.lease_id)
    assert not held.is_held()


def test_s2_a_garbage_collected_guard_unlocks(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    s = sessions()
    s.lock("m")  # the guard is dropped at once
    gc.collect()
    assert keys(db, "m/") == []


@pytest.mark.everywhere
def test_s3_fencing_tokens_increase_and_the_gate_rejects_a_stale_one(
    sessions: Callable[[], tenure.Session],
) -> None:
    a, b = sessions(), sessions()
    gate = tenure.FenceGate()
    assert gate.highest == 0
    tokens = []
    for s in (a, b, a, b):
        with s.lock("res") as g:
            gate.admit(g.fencing_token)
            tokens.append(g.fencing_token)
    assert tokens == sorted(tokens) and len(set(tokens)) == 4
    assert gate.highest == tokens[-1]
    gate.admit(tokens[-1])  # the same token again is admitted
    with pytest.raises(tenure.StaleToken) as exc:
        gate.admit(tokens[0])
    assert str(tokens[0]) in str(exc.value)
    assert gate.highest == tokens[-1]


# ---- S4 elections ----------------------------------------------------------------------------


@pytest.mark.everywhere
def test_s4_campaign_is_fifo_and_observe_reports_every_change_including_none(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    a, b, c = sessions(), sessions(), sessions()
    with db.observe_election("svc", timeout=WAIT) as changes:
        assert next(changes) is None
        la = a.election("svc").campaign(b"host-a")
        first = next(changes)
        assert first is not None and first.value == b"host-a"
        assert first.create_revision == la.fencing_token and first.key == la.key
        assert la.is_leader() and la.name == "svc"
        won_b = in_thread(lambda: b.election("svc").campaign("host-b", timeout=WAIT))
        wait_until(lambda: len(keys(db, "svc/")) == 2)
        won_c = in_thread(lambda: c.election("svc").campaign("host-c", timeout=WAIT))
        wait_until(lambda: len(keys(db, "svc/")) == 3)
        la.proclaim("host-a v2")
        assert tenure.Election.leader(db, "svc").value == b"host-a v2"  # type: ignore[union-attr]
        assert next(changes).value == b"host-a v2"  # type: ignore[union-attr]
        la.resign()
        lb = won_b.get(timeout=WAIT)
        assert isinstance(lb, tenure.Leadership) and lb.fencing_token > la.fencing_token
        assert won_c.empty()
        assert next(changes).value == b"host-b"  # type: ignore[union-attr]
        lb.resign()
        lc = won_c.get(timeout=WAIT)
        assert isinstance(lc, tenure.Leadership) and lc.fencing_token > lb.fencing_token
        assert next(changes).value == b"host-c"  # type: ignore[union-attr]
        with lc:
            assert db.election_leader("svc").value == b"host-c"  # type: ignore[union-attr]
        assert next(changes) is None  # exit resigned: no leader
        assert db.election_leader("svc") is None
        assert not lc.is_leader()


@pytest.mark.everywhere
def test_s4_proclaim_after_losing_leadership_raises_not_leader(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    a = sessions()
    leadership = a.election("svc").campaign("host-a")
    a.close()
    assert not leadership.is_leader()
    with pytest.raises(tenure.NotLeader):
        leadership.proclaim("still me?")
    with pytest.raises(tenure.NotLeader):
        with leadership:
            pass
    leadership.resign()  # resigning a lost leadership is a no-op


@pytest.mark.everywhere
def test_s4_campaign_times_out_and_withdraws(
    db: tenure.Tenure, sessions: Callable[[], tenure.Session]
) -> None:
    a, b = sessions(), sessions()
    la = a.election("svc").campaign("host-a")
    with pytest.raises(tenure.Timeout):
        b.election("svc").campaign("host-b", timeout=0.1)
    assert keys(db, "svc/") == [la.key]


def test_s4_observe_waits_with_a_timeout_and_ends_when_the_engine_closes(
    clock: tenure.ManualClock,
) -> None:
    db = tenure.open(clock=clock)
    obs = tenure.Election.observe(db, "svc")
    assert obs.recv(timeout=1.0) is None  # the current state: no leader
    with pytest.raises(tenure.Timeout):
        obs.recv(timeout=0.1)
    db.close()
    assert list(obs) == []
    with pytest.raises(tenure.Closed):
        obs.recv(timeout=1.0)
    obs.cancel()


@pytest.mark.everywhere
def test_s4_a_cancelled_observer_stops_iterating(db: tenure.Tenure) -> None:
    obs = db.observe_election("svc")
    assert next(obs) is None
    obs.cancel()
    assert list(obs) == []


# ---- S5 leader elector -----------------------------------------------------------------------

GOOD: dict[str, Any] = {"lease_duration": 10.0, "renew_deadline": 5.0, "retry_period": 2.0}
# lease_duration, renew_deadline, retry_period
TIMES: tuple[float, float, float] = (10.0, 5.0, 2.0)


@pytest.mark.parametrize(
    "change",
    [
        {"identity": ""},
        {"name": ""},
        {"lease_duration": 5.0},
        {"renew_deadline": 2.4},
        {"renew_deadline": 9.0},
        {"retry_period": 0.0},
        {"lease_duration": -1.0},
        {"retry_period": float("nan")},
    ],
    ids=[
        "no-identity",
        "no-name",
        "lease<=renew",
        "renew<=retry*1.2",
        "renew+retry>=lease",
        "retry0",
        "negative",
        "nan",
    ],
)
def test_s5_inconsistent_configs_raise_invalid_argument(
    db: tenure.Tenure, change: dict[str, Any]
) -> None:
    args: dict[str, Any] = {"name": "leader/svc", "identity": "a", **GOOD, **change}
    with pytest.raises(tenure.InvalidArgument) as exc:
        tenure.LeaderElector(db, **args)
    assert isinstance(exc.value, ValueError)


def test_s5_a_callback_that_is_not_callable_is_a_type_error(db: tenure.Tenure) -> None:
    with pytest.raises(TypeError):
        tenure.LeaderElector(db, "leader/svc", "a", *TIMES, on_new_leader=42)  # type: ignore[arg-type]


def reporting(
    db: tenure.Tenure, identity: str, release_on_cancel: bool = True
) -> tuple[tenure.LeaderElector, queue.Queue[str]]:
    """An elector whose callbacks report "new:<id>", "started:<token>", "returned",
    "stopped" on a queue; the started callback leads until its Stop is raised."""
    q: queue.Queue[str] = queue.Queue()

    def started(token: int, stop: tenure.Stop) -> None:
        assert isinstance(stop, tenure.Stop) and not stop.is_set()
        q.put(f"started:{token}")
        assert stop.wait()
        q.put("returned")

    e = tenure.LeaderElector(
        db,
        "leader/svc",
        identity,
        *TIMES,
        on_started_leading=started,
        on_stopped_leading=lambda: q.put("stopped"),
        on_new_leader=lambda who: q.put(f"new:{who}"),
        release_on_cancel=release_on_cancel,
    )
    return e, q


def record(db: tenure.Tenure) -> tuple[int, list[str]]:
    """(mod revision, [lease, acquire_ms, renew_ms, transitions, holder]) of the record."""
    kv = db.get("leader/svc")
    assert kv is not None
    return kv.mod_revision, kv.value.decode().split(" ", 4)


def started_token(q: queue.Queue[str]) -> int:
    m = q.get(timeout=WAIT)
    assert m.startswith("started:"), m
    return int(m.removeprefix("started:"))


def test_s5_one_leader_and_failover_only_after_the_engine_expires_its_lease(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    a, qa = reporting(db, "a", release_on_cancel=False)
    b, qb = reporting(db, "b", release_on_cancel=False)
    a.start()
    assert qa.get(timeout=WAIT) == "new:a"
    token_a = started_token(qa)
    assert a.is_leader and a.leader == "a" and a.identity == "a" and a.name == "leader/svc"
    b.start()
    assert qb.get(timeout=WAIT) == "new:a"
    for _ in range(5):
        rev, _ = record(db)
        clock.advance(2.0)
        wait_until(lambda: record(db)[0] > rev)  # a renewed
        assert not b.is_leader
    assert b.leader == "a"
    _, fields = record(db)
    lease_a, last_renew = int(fields[0]), int(fields[2])
    a.stop()  # no release: the lease stays until the engine expires it
    assert [qa.get(timeout=WAIT), qa.get(timeout=WAIT)] == ["returned", "stopped"]
    assert not a.is_leader
    expired = db.expired(timeout=WAIT)
    clock.advance(9.0)  # a's lease (10 s) is still alive: b, retrying, must not take over
    clock.advance(2.0)  # now it has expired
    assert [e.id for e in next(expired)] == [lease_a]
    # Past b's longest retry wait (2 s x 2.2). b may have set its next wait after this advance
    # (its thread runs late on a busy machine), so manual time moves on until it takes over.
    for _ in range(20):
        clock.advance(5.0)
        try:
            news = qb.get(timeout=0.5)
            break
        except queue.Empty:
            continue
    else:
        news = qb.get(timeout=WAIT)
    assert news == "new:b"
    token_b = started_token(qb)
    assert token_b > token_a
    _, fields = record(db)
    assert fields[4] == "b"
    assert int(fields[1]) - last_renew >= 10_000, f"took over before a's lease expired: {fields}"
    assert fields[3] == "1"  # one leader transition
    assert b.is_leader and b.leader == "b"
    b.stop()
    assert [qb.get(timeout=WAIT), qb.get(timeout=WAIT)] == ["returned", "stopped"]


def test_s5_release_on_cancel_frees_leadership_at_once_and_callbacks_are_ordered(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    a, qa = reporting(db, "a")
    b, qb = reporting(db, "b")
    with a:
        assert qa.get(timeout=WAIT) == "new:a"
        started_token(qa)
        b.start()
        assert qb.get(timeout=WAIT) == "new:a"
        released_at = int(record(db)[1][2])
    # Exit stopped a and waited for its callbacks: returned before stopped.
    assert [qa.get_nowait(), qa.get_nowait()] == ["returned", "stopped"]
    assert qa.empty()
    clock.advance(5.0)  # past b's longest retry wait, well short of a's 10 s lease
    assert qb.get(timeout=WAIT) == "new:b"
    started_token(qb)
    assert int(record(db)[1][1]) - released_at < 10_000  # released at once, not expired
    b.stop()


def test_s5_run_blocks_until_its_stop_is_set_and_runs_once(db: tenure.Tenure) -> None:
    e, q = reporting(db, "a")
    stop = tenure.Stop()
    ran = in_thread(lambda: e.run(stop))
    assert q.get(timeout=WAIT) == "new:a"
    started_token(q)
    assert ran.empty()
    stop.set()
    assert ran.get(timeout=WAIT) is None
    assert [q.get_nowait(), q.get_nowait()] == ["returned", "stopped"]
    with pytest.raises(tenure.InvalidArgument):
        e.run()
    with pytest.raises(tenure.InvalidArgument):
        e.start()


def test_s5_stop_ends_a_foreground_run_and_a_callback_may_stop_its_elector(
    db: tenure.Tenure,
) -> None:
    done: queue.Queue[str] = queue.Queue()
    holder: list[tenure.LeaderElector] = []

    def started(token: int, stop: tenure.Stop) -> None:
        holder[0].stop()  # from the callback thread: signals only, never deadlocks
        done.put("stop requested")

    e = tenure.LeaderElector(
        db, "leader/svc", "a", *TIMES, on_started_leading=started
    )
    holder.append(e)
    ran = in_thread(e.run)
    assert done.get(timeout=WAIT) == "stop requested"
    assert ran.get(timeout=WAIT) is None
    assert not e.is_leader


def test_s5_callbacks_that_raise_are_reported_and_do_not_stop_the_elector(
    db: tenure.Tenure,
) -> None:
    reports: queue.Queue[tuple[type[BaseException], object]] = queue.Queue()

    def hook(u: Any) -> None:
        reports.put((u.exc_type, u.object))

    def new_leader(who: str) -> None:
        raise ValueError(f"new leader {who}")

    def started(token: int, stop: tenure.Stop) -> None:
        raise RuntimeError("started")

    def stopped() -> None:
        raise KeyError("stopped")

    old = sys.unraisablehook
    sys.unraisablehook = hook
    try:
        e = tenure.LeaderElector(
            db,
            "leader/svc",
            "a",
            *TIMES,
            on_started_leading=started,
            on_stopped_leading=stopped,
            on_new_leader=new_leader,
        )
        e.start()
        assert reports.get(timeout=WAIT) == (ValueError, new_leader)
        assert reports.get(timeout=WAIT) == (RuntimeError, started)
        assert e.is_leader
        e.stop()
        assert reports.get(timeout=WAIT) == (KeyError, stopped)
        assert not e.is_leader
    finally:
        sys.unraisablehook = old
    # The elector's record names a, and the engine is unharmed.
    assert record(db)[1][4] == "a"
    assert db.put("still", "works") > 0


def test_s5_stop_waits_in_the_calling_thread_and_times_out(db: tenure.Tenure) -> None:
    stop = tenure.Stop()
    assert not stop.is_set()
    start = time.monotonic()
    assert stop.wait(timeout=0.1) is False
    assert time.monotonic() - start >= 0.1
    waiter = in_thread(lambda: stop.wait())
    stop.set()
    assert waiter.get(timeout=WAIT) is True
    assert stop.is_set() and stop.wait(timeout=0) is True


# ---- S6 record locks -------------------------------------------------------------------------


def test_s6_record_lock_succeeds_only_for_the_current_owner(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    token = tenure.RecordLock.try_acquire(db, "res", "alice", 5.0)
    assert db.get("res").value == b"alice"  # type: ignore[union-attr]
    assert db.get("res").create_revision == token  # type: ignore[union-attr]
    for who in ("bob", "alice"):
        with pytest.raises(tenure.Locked):
            tenure.RecordLock.try_acquire(db, "res", who, 5.0)
    with pytest.raises(tenure.NotLeader):
        tenure.RecordLock.refresh(db, "res", "bob")
    with pytest.raises(tenure.NotLeader):
        tenure.RecordLock.release(db, "res", "bob")
    clock.advance(4.0)
    tenure.RecordLock.refresh(db, "res", "alice")
    clock.advance(4.0)  # 8 s after acquiring: alive thanks to the refresh
    assert db.get("res") is not None
    tenure.RecordLock.release(db, "res", "alice")
    assert db.get("res") is None
    with pytest.raises(tenure.NotLeader):
        tenure.RecordLock.release(db, "res", "alice")
    # Expiry frees it for the next owner, with a higher token.
    expired = db.expired(timeout=WAIT)
    t1 = tenure.RecordLock.try_acquire(db, "res", "alice", 1.0)
    clock.advance(1.5)
    next(expired)
    with pytest.raises(tenure.NotLeader):
        tenure.RecordLock.refresh(db, "res", "alice")
    assert tenure.RecordLock.try_acquire(db, "res", b"bob", 1.0) > t1


def test_s6_record_lock_rejects_a_bad_ttl(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.InvalidArgument):
        tenure.RecordLock.try_acquire(db, "res", "alice", 0.0)
    assert db.get("res") is None


# ---- Ctrl-C ----------------------------------------------------------------------------------

SETUP = """
import sys, time, tenure
db = tenure.open()
holder = db.session()
waiter = db.session()
"""

BLOCKERS = {
    "lock": (
        "g = holder.lock('m')",
        "waiter.lock('m')",
        "assert len(db.range('m/')) == 1, db.range('m/'); assert g.is_held()",
    ),
    "mutex_lock": (
        "g = holder.lock('m')",
        "waiter.mutex('m').lock(timeout=60)",
        "assert len(db.range('m/')) == 1, db.range('m/'); assert g.is_held()",
    ),
    "campaign": (
        "l = holder.election('e').campaign('a')",
        "waiter.election('e').campaign('b')",
        "assert [kv.value for kv in db.range('e/')] == [b'a']",
    ),
    "observe": ("obs = db.observe_election('e'); next(obs)", "next(obs)", ""),
    "wait_done": ("", "waiter.wait_done()", "assert not waiter.done"),
    "stop_wait": ("", "tenure.Stop().wait()", ""),
    "elector_run": (
        "e = tenure.LeaderElector(db, 'rec', 'me', 10.0, 5.0, 2.0, "
        "on_started_leading=lambda t, s: s.wait())",
        "e.run()",
        "assert not e.is_leader; assert db.get('rec') is not None; "
        "assert len(db.leases()) == 2",  # the elector's lease was released
    ),
}


@pytest.mark.parametrize("blocker", list(BLOCKERS), ids=list(BLOCKERS))
def test_sigint_interrupts_a_blocking_coordination_call_and_leaves_no_trace(
    blocker: str,
) -> None:
    before, call, after = BLOCKERS[blocker]
    script = SETUP + textwrap.dedent(
        f"""
        {before}
        print("ready", flush=True)
        start = time.monotonic()
        try:
            {call}
        except KeyboardInterrupt:
            waited = time.monotonic() - start
            {after}
            print("interrupted after", waited, flush=True)
            sys.exit(0)
        print("returned", flush=True)
        sys.exit(1)
        """
    )
    line, reacted, err, code = interrupt_in_child(script)
    assert line.startswith("interrupted after"), (line, err)
    assert float(line.split()[-1]) >= 0.4
    assert reacted < 0.5, f"KeyboardInterrupt took {reacted:.3f} s"
    assert code == 0


# ---- fork ------------------------------------------------------------------------------------

ctx = multiprocessing.get_context("fork")


def outcome(call: Callable[[], object]) -> str:
    try:
        call()
        return "ok"
    except Exception as e:  # noqa: BLE001 - reported to the parent
        return type(e).__name__


def test_inherited_coordination_objects_raise_closed_in_a_forked_child(path: Path) -> None:
    db = tenure.open(path)
    s = db.session(ttl=60.0)
    other = db.session(ttl=60.0)
    m = s.mutex("m")
    guard = s.lock("held")
    election = s.election("e")
    leadership = election.campaign("a")
    obs = db.observe_election("e")
    elector = tenure.LeaderElector(db, "rec", "a", *TIMES)
    stop = tenure.Stop()

    def child(conn: Connection) -> None:
        nonlocal guard, leadership, s, m, election, obs, elector, stop
        got = {
            "session": outcome(lambda: db.session()),
            "done": outcome(lambda: s.done),
            "wait_done": outcome(lambda: s.wait_done(0.1)),
            "lock": outcome(lambda: s.lock("x", timeout=0.1)),
            "mutex": outcome(lambda: s.mutex("x")),
            "try_lock": outcome(m.try_lock),
            "mutex_lock": outcome(lambda: m.lock(timeout=0.1)),
            "is_held": outcome(guard.is_held),
            "unlock": outcome(guard.unlock),
            "election": outcome(lambda: other.election("e")),
            "campaign": outcome(lambda: election.campaign("b", timeout=0.1)),
            "proclaim": outcome(lambda: leadership.proclaim("b")),
            "resign": outcome(leadership.resign),
            "is_leader": outcome(leadership.is_leader),
            "observe": outcome(lambda: obs.recv(timeout=0.1)),
            "leader": outcome(lambda: tenure.Election.leader(db, "e")),
            "record": outcome(lambda: tenure.RecordLock.try_acquire(db, "r", "me", 1.0)),
            "elector_start": outcome(elector.start),
            "elector_run": outcome(elector.run),
            "elector_is_leader": outcome(lambda: elector.is_leader),
            "stop_is_set": outcome(stop.is_set),
            "stop_wait": outcome(lambda: stop.wait(0.1)),
            # Releasing calls leave the parent's state alone and do not raise.
            "guard_exit": outcome(lambda: guard.__exit__(None, None, None)),
            "leadership_exit": outcome(lambda: leadership.__exit__(None, None, None)),
            "session_close": outcome(s.close),
            "session_orphan": outcome(s.orphan),
            "observer_cancel": outcome(obs.cancel),
        }
        # A fence gate is plain memory: it works in the child.
        gate = tenure.FenceGate()
        gate.admit(3)
        got["gate"] = outcome(lambda: gate.admit(2))
        conn.send(got)
        # The last references go: leaked, never dropped (no unlock, no resign, no join).
        del guard, leadership, s, m, election, obs, elector, stop
        gc.collect()

    parent, child_end = ctx.Pipe()
    p = ctx.Process(target=child, args=(child_end,))
    p.start()
    try:
        if not parent.poll(WAIT):
            pytest.fail("the child hung")
        got = parent.recv()
    finally:
        p.join(WAIT)
        if p.is_alive():
            p.kill()
            pytest.fail("the child did not exit")
    assert p.exitcode == 0
    releasing = {"guard_exit", "leadership_exit", "session_close", "session_orphan"}
    expected = {k: "Closed" for k in got if k not in releasing | {"observer_cancel", "gate"}}
    expected |= {k: "ok" for k in releasing | {"observer_cancel"}}
    expected["gate"] = "StaleToken"
    assert got == expected
    # The parent's session, lock and leadership are intact.
    assert not s.done and guard.is_held() and leadership.is_leader()
    assert lease_alive(db, s.id)
    guard.unlock()
    s.close()
    other.close()
    db.close()


# ---- example ---------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "coordination.py"


def test_the_coordination_example_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [PYTHON, str(EXAMPLE), str(tmp_path / "coordination.tenure")],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "b: jobs/report is locked" in out
    assert "a's stale token 1 rejected" in out
    assert "leader: host-b" in out and "host-a: not the leader any more" in out
    assert out.count("leader: None") == 2
    assert "b leads" in out and "b stopped leading" in out
