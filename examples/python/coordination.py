"""Coordination on tenure: a fenced job lock, an election followed by an observer, and a
client-go style leader elector with failover.

Every session is a lease renewed by a native thread; closing it (the end of its `with` block)
revokes the lease and so releases whatever it holds. Blocking calls release the GIL and Ctrl-C
interrupts them.

Run: python examples/python/coordination.py [path]   (no path: in memory)
"""

from __future__ import annotations

import queue
import sys
import threading

import tenure


def value_of(kv: tenure.KeyValue | None) -> str | None:
    return None if kv is None else kv.value.decode()


def fenced_lock(db: tenure.Tenure) -> None:
    # The guarded resource (say, a storage service) remembers the highest token it has seen.
    gate = tenure.FenceGate()
    with db.session(ttl=5.0) as a, db.session(ttl=5.0) as b:
        with a.lock("jobs/report", timeout=5.0) as guard_a:
            gate.admit(guard_a.fencing_token)
            print(f"a holds jobs/report, fencing token {guard_a.fencing_token}")
            try:
                b.mutex("jobs/report").try_lock()
            except tenure.Locked:
                print("b: jobs/report is locked")
        with b.lock("jobs/report", timeout=5.0) as guard_b:
            gate.admit(guard_b.fencing_token)
            print(f"b holds jobs/report, fencing token {guard_b.fencing_token}")
        # A late write from a, e.g. after a long pause: its token is older than b's.
        try:
            gate.admit(guard_a.fencing_token)
        except tenure.StaleToken:
            print(f"a's stale token {guard_a.fencing_token} rejected")


def election(db: tenure.Tenure) -> None:
    with db.observe_election("svc", timeout=5.0) as changes:
        print("leader:", value_of(next(changes)))
        with db.session(ttl=5.0) as host_a, db.session(ttl=5.0) as host_b:
            lead_a = host_a.election("svc").campaign("host-a")
            print("leader:", value_of(next(changes)), "token", lead_a.fencing_token)

            # host-b campaigns too and waits (in a thread) until host-a resigns.
            won: queue.Queue[tenure.Leadership] = queue.Queue()
            waiter = threading.Thread(
                target=lambda: won.put(host_b.election("svc").campaign("host-b", timeout=5.0))
            )
            with db.watch("svc/", prefix=True, timeout=5.0) as candidacies:
                waiter.start()
                next(candidacies)  # host-b's candidacy is queued behind host-a
            lead_a.proclaim("host-a (draining)")
            print("leader:", value_of(next(changes)))
            lead_a.resign()
            lead_b = won.get(timeout=5.0)
            waiter.join()
            print("leader:", value_of(next(changes)), "token", lead_b.fencing_token)
            try:
                lead_a.proclaim("host-a again")
            except tenure.NotLeader:
                print("host-a: not the leader any more")
        # Closing host-b's session revoked its lease: no leader.
        print("leader:", value_of(next(changes)))


def leader_elector(db: tenure.Tenure) -> None:
    events: queue.Queue[str] = queue.Queue()

    def expect(text: str) -> None:
        while True:
            event = events.get(timeout=10.0)
            print("  " + event)
            if event == text:
                return

    def make(identity: str) -> tenure.LeaderElector:
        def on_started(token: int, stop: tenure.Stop) -> None:
            events.put(f"{identity} leads")
            stop.wait()  # lead until the leadership ends

        return tenure.LeaderElector(
            db,
            "leader/scheduler",
            identity,
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.2,
            on_started_leading=on_started,
            on_stopped_leading=lambda: events.put(f"{identity} stopped leading"),
            on_new_leader=lambda who: events.put(f"{identity} sees leader {who}"),
        )

    a, b = make("a"), make("b")
    with a:
        expect("a leads")
        b.start()
        expect("b sees leader a")
    # Leaving the block stopped a, which released leadership at once (release_on_cancel).
    expect("b leads")
    b.stop()
    expect("b stopped leading")


def main(path: str | None) -> int:
    with tenure.open(path) as db:
        fenced_lock(db)
        election(db)
        leader_elector(db)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
