"""SPEC S12: groups and the partitioner from Python, in all three places."""

from __future__ import annotations

import pytest

import tenure

WAIT = 10.0


@pytest.mark.everywhere
def test_s12_members_join_leave_and_a_member_whose_session_ends_leaves(
    db: tenure.Tenure,
) -> None:
    changes = db.watch_group("workers")
    a, b = db.session(ttl=30), db.session(ttl=30)
    ga = a.group("workers")
    ga.join("w1", "cpu")
    b.group("workers").join("w2", b"gpu")
    assert db.group_members("workers") == [("w1", b"cpu"), ("w2", b"gpu")]
    assert changes.next(WAIT) == ("joined", "w1", b"cpu")
    assert changes.next(WAIT) == ("joined", "w2", b"gpu")
    with pytest.raises(tenure.Locked):
        b.group("workers").join("w1")
    with pytest.raises(tenure.InvalidArgument):
        ga.join("a/b")
    ga.leave()
    assert changes.next(WAIT) == ("left", "w1", b"")
    b.close()  # w2's session ends: it leaves
    assert changes.next(WAIT) == ("left", "w2", b"")
    assert db.group_members("workers") == []
    with pytest.raises(tenure.Timeout):
        changes.next(0.02)
    a.close()


@pytest.mark.everywhere
def test_s12_the_partitioner_is_stable_and_follows_the_live_members(db: tenure.Tenure) -> None:
    sessions = [db.session(ttl=30) for _ in range(3)]
    for i, s in enumerate(sessions):
        s.group("shards").join(f"m{i}")
    p = db.partitioner("shards", 2)
    assert (p.group, p.replicas) == ("shards", 2)
    before = {k: p.members_for(f"key-{k}") for k in range(30)}
    assert all(len(set(o)) == 2 for o in before.values())
    assert before == {k: p.members_for(f"key-{k}") for k in range(30)}
    sessions[1].close()
    for k, owners in before.items():
        now = p.members_for(f"key-{k}")
        assert "m1" not in now
        if owners[0] != "m1":
            assert now[0] == owners[0]
    with pytest.raises(tenure.InvalidArgument):
        db.partitioner("shards", 0)
    for s in (sessions[0], sessions[2]):
        s.close()
    assert p.members_for("k") == []
