"""SPEC S12: groups and the partitioner from Python, sync and asyncio, in all three places."""

from __future__ import annotations

import asyncio

import pytest

import tenure
import tenure.aio

WAIT = 10.0


@pytest.mark.everywhere
def test_s12_members_join_leave_and_a_member_whose_session_ends_leaves(
    db: tenure.Tenure,
) -> None:
    changes = db.watch_group("workers")
    a, b = db.session(ttl=30), db.session(ttl=30)
    ga = a.group("workers")
    b.group("workers").join("w2", b"gpu")
    ga.join("w1", "cpu")
    members = db.group_members("workers")
    assert members == {"w1": b"cpu", "w2": b"gpu"}
    assert list(members) == ["w1", "w2"], "inserted in ID order"
    assert changes.recv(WAIT) == ("joined", "w2", b"gpu")
    assert changes.recv(WAIT) == ("joined", "w1", b"cpu")
    with pytest.raises(tenure.Locked):
        b.group("workers").join("w1")
    with pytest.raises(tenure.InvalidArgument):
        ga.join("a/b")
    ga.leave()
    assert changes.recv(WAIT) == ("left", "w1", b"")
    b.close()  # w2's session ends: it leaves
    assert changes.recv(WAIT) == ("left", "w2", b"")
    assert db.group_members("workers") == {}
    with pytest.raises(tenure.Timeout):
        changes.recv(0.02)
    with changes:
        pass  # exit cancels
    with pytest.raises(tenure.Closed):
        changes.recv(0.02)
    assert list(changes) == []
    a.close()


@pytest.mark.everywhere
def test_s12_the_partitioner_is_stable_and_follows_the_live_members(db: tenure.Tenure) -> None:
    sessions = [db.session(ttl=30) for _ in range(3)]
    for i, s in enumerate(sessions):
        s.group("shards").join(f"m{i}")
    p = db.partitioner("shards", 2)
    assert (p.group, p.replicas) == ("shards", 2)
    before = {k: (p.members_for(f"key-{k}"), p.primary_for(f"key-{k}")) for k in range(30)}
    assert all(len(owners) == 2 and primary in owners for owners, primary in before.values())
    assert before == {k: (p.members_for(f"key-{k}"), p.primary_for(f"key-{k}")) for k in range(30)}
    assert {primary for _, primary in before.values()} == {"m0", "m1", "m2"}
    sessions[1].close()
    for k, (owners, primary) in before.items():
        now = p.members_for(f"key-{k}")
        assert "m1" not in now and len(now) == 2
        if primary != "m1":
            assert p.primary_for(f"key-{k}") == primary, "a key moves only if it must"
    with pytest.raises(tenure.InvalidArgument):
        db.partitioner("shards", 0)
    for s in (sessions[0], sessions[2]):
        s.close()
    assert p.members_for("k") == set()
    assert p.primary_for("k") is None


@pytest.mark.everywhere
def test_s12_asyncio_groups_the_membership_watch_and_the_partitioner(
    db: tenure.Tenure,
) -> None:
    async def main() -> None:
        adb = tenure.aio.Tenure(db)
        async with adb.watch_group("agroup", timeout=WAIT) as changes:
            async with adb.session(ttl=30) as a, adb.session(ttl=30) as b:
                ga = a.group("agroup")
                await ga.join("w1", b"cpu")
                await b.group("agroup").join("w2")
                assert await adb.group_members("agroup") == {"w1": b"cpu", "w2": b""}
                assert await changes.__anext__() == ("joined", "w1", b"cpu")
                assert await changes.recv(WAIT) == ("joined", "w2", b"")
                p = adb.partitioner("agroup", 2)
                assert (p.group, p.replicas) == ("agroup", 2)
                assert await p.members_for("k") == {"w1", "w2"}
                assert await p.primary_for("k") in {"w1", "w2"}
                await ga.leave()
                assert await changes.recv(WAIT) == ("left", "w1", b"")
                # A receive cancelled while it waits loses nothing: the change comes next.
                waiting = asyncio.ensure_future(changes.recv())
                await asyncio.sleep(0)
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
            # b's session ended: w2 left.
            assert await changes.recv(WAIT) == ("left", "w2", b"")
            assert await adb.group_members("agroup") == {}
            assert await p.primary_for("k") is None
        assert [c async for c in changes] == []

    asyncio.run(main())
