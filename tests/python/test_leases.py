"""Leases: grant, revoke, renew, introspection, attach/detach, checkpoint, promote/demote
(SPEC L1–L9) and the Lease object."""

from __future__ import annotations

import math

import pytest

import tenure


def test_grant_returns_a_lease_with_id_and_ttl(db: tenure.Tenure) -> None:
    lease = db.grant(ttl=2.5)
    assert isinstance(lease, tenure.Lease)
    assert isinstance(lease.id, int) and lease.id > 0
    assert lease.ttl == 2.5
    assert lease.db is db


@pytest.mark.everywhere
def test_grant_allocates_fresh_ids_never_reused_after_revoke(db: tenure.Tenure) -> None:
    first = db.grant(10.0)
    first.revoke()
    second = db.grant(10.0)
    assert second.id != first.id


@pytest.mark.everywhere
def test_grant_with_explicit_id_uses_it(db: tenure.Tenure) -> None:
    lease = db.grant(10.0, id=4242)
    assert lease.id == 4242
    assert db.time_to_live(4242).id == 4242


@pytest.mark.everywhere
def test_grant_with_an_existing_id_raises_lease_exists(db: tenure.Tenure) -> None:
    db.grant(10.0, id=7)
    with pytest.raises(tenure.LeaseExists):
        db.grant(10.0, id=7)


@pytest.mark.everywhere
@pytest.mark.parametrize("bad_id", [0, -1])
def test_grant_with_id_not_positive_raises_invalid_argument(
    db: tenure.Tenure, bad_id: int
) -> None:
    with pytest.raises(tenure.InvalidArgument):
        db.grant(10.0, id=bad_id)


@pytest.mark.everywhere
@pytest.mark.parametrize("ttl", [0.0, -1.0, -0.001, math.nan, -math.inf])
def test_ttl_not_positive_or_nan_raises_invalid_argument(db: tenure.Tenure, ttl: float) -> None:
    with pytest.raises(tenure.InvalidArgument) as exc:
        db.grant(ttl)
    assert isinstance(exc.value, ValueError)
    assert db.leases() == []


@pytest.mark.everywhere
@pytest.mark.parametrize("ttl", [9_000_000_001.0, 1e300, math.inf])
def test_ttl_above_the_maximum_raises_lease_ttl_too_large(db: tenure.Tenure, ttl: float) -> None:
    with pytest.raises(tenure.LeaseTtlTooLarge) as exc:
        db.grant(ttl)
    assert isinstance(exc.value, ValueError)


@pytest.mark.everywhere
def test_ttl_at_the_maximum_is_accepted(db: tenure.Tenure) -> None:
    assert db.grant(9_000_000_000.0).ttl == 9_000_000_000.0


def test_ttl_below_min_ttl_is_raised_to_it(clock: tenure.ManualClock) -> None:
    with tenure.open(clock=clock, min_ttl=5.0) as db:
        lease = db.grant(1.0)
        assert lease.ttl == 5.0
        assert db.time_to_live(lease).ttl == 5.0


@pytest.mark.everywhere
def test_ttl_accepts_an_int(db: tenure.Tenure) -> None:
    assert db.grant(3).ttl == 3.0


@pytest.mark.everywhere
def test_ttl_of_a_wrong_type_raises_type_error(db: tenure.Tenure) -> None:
    with pytest.raises(TypeError):
        db.grant("10")  # type: ignore[arg-type]


@pytest.mark.everywhere
def test_revoke_deletes_attached_keys_in_one_revision(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    db.put("a", "1", lease=lease)
    db.put("b", "2", lease=lease)
    db.put("c", "3")
    rev = db.revision
    db.revoke(lease)
    assert db.get("a") is None and db.get("b") is None
    assert db.get("c") is not None
    assert db.revision == rev + 1
    with pytest.raises(tenure.LeaseNotFound):
        db.time_to_live(lease)


@pytest.mark.everywhere
def test_revoke_of_an_unknown_lease_raises_lease_not_found(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.LeaseNotFound, match="999"):
        db.revoke(999)


def test_renew_returns_the_ttl_and_moves_the_deadline(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    lease = db.grant(10.0)
    clock.advance(6.0)
    assert db.time_to_live(lease).remaining == pytest.approx(4.0)
    assert db.renew(lease) == 10.0
    assert db.time_to_live(lease).remaining == pytest.approx(10.0)
    clock.advance(1.0)
    assert lease.renew() == 10.0
    assert lease.time_to_live().remaining == pytest.approx(10.0)
    assert db.stats()["renewed"] == 2


@pytest.mark.everywhere
def test_renew_of_an_unknown_lease_raises_lease_not_found(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.LeaseNotFound):
        db.renew(12345)


def test_renew_on_a_standby_raises_not_primary(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    db.demote()
    assert db.is_primary is False
    with pytest.raises(tenure.NotPrimary):
        db.renew(lease)


def test_time_to_live_reports_ttl_remaining_and_keys_in_order(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    lease = db.grant(8.0)
    db.put("z", "1", lease=lease)
    db.put(b"a", "2", lease=lease)
    clock.advance(2.0)
    info = db.time_to_live(lease)
    assert isinstance(info, tenure.LeaseInfo)
    assert info.id == lease.id
    assert info.ttl == 8.0
    assert info.remaining == pytest.approx(6.0)
    assert info.keys == [b"a", b"z"]
    assert info == lease.time_to_live()
    assert "LeaseInfo(" in repr(info)


@pytest.mark.everywhere
def test_time_to_live_of_an_unknown_lease_raises_lease_not_found(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.LeaseNotFound):
        db.time_to_live(77)


@pytest.mark.everywhere
def test_leases_lists_every_live_lease_soonest_first(db: tenure.Tenure) -> None:
    long = db.grant(30.0)
    short = db.grant(5.0)
    mid = db.grant(10.0)
    ids = [info.id for info in db.leases()]
    assert ids == [short.id, mid.id, long.id]
    assert all(isinstance(i, tenure.LeaseInfo) for i in db.leases())


@pytest.mark.everywhere
def test_attach_detach_and_lease_of(db: tenure.Tenure) -> None:
    one = db.grant(10.0)
    two = db.grant(10.0)
    db.put("a", "1")
    db.put("b", "2")
    assert db.lease_of("a") is None
    db.attach(one, ["a", b"b"])
    assert db.lease_of("a") == one.id and db.lease_of(b"b") == one.id
    # A key attached elsewhere moves.
    db.attach(two, "a")
    assert db.lease_of("a") == two.id
    assert db.time_to_live(one).keys == [b"b"]
    db.detach(one, ("b",))
    assert db.lease_of("b") is None
    # Revoking `two` deletes only its key.
    two.revoke()
    assert db.get("a") is None and db.get("b") is not None


@pytest.mark.everywhere
def test_attach_to_an_unknown_lease_raises_and_changes_nothing(db: tenure.Tenure) -> None:
    db.put("a", "1")
    with pytest.raises(tenure.LeaseNotFound):
        db.attach(999, ["a"])
    assert db.lease_of("a") is None


@pytest.mark.everywhere
def test_detach_from_an_unknown_lease_raises_lease_not_found(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.LeaseNotFound):
        db.detach(999, ["a"])


@pytest.mark.everywhere
def test_attach_with_keys_of_a_wrong_type_raises_type_error(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    with pytest.raises(TypeError):
        db.attach(lease, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        db.attach(lease, [b"a", 5])  # type: ignore[list-item]


def test_checkpoint_is_used_by_the_next_promote(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    lease = db.grant(10.0)
    db.checkpoint(lease, 3.0)
    # Checkpoint does not move the current deadline (L8).
    assert db.time_to_live(lease).remaining == pytest.approx(10.0)
    db.demote()
    assert db.time_to_live(lease).remaining is None
    db.promote(extend=2.0)
    assert db.is_primary is True
    assert db.time_to_live(lease).remaining == pytest.approx(5.0)


def test_promote_without_checkpoint_uses_the_ttl(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    db.demote()
    db.promote()
    assert db.time_to_live(lease).remaining == pytest.approx(10.0)


def test_checkpoint_with_a_negative_remaining_raises_invalid_argument(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    with pytest.raises(tenure.InvalidArgument):
        db.checkpoint(lease, -1.0)


def test_a_standby_never_expires_leases(db: tenure.Tenure, clock: tenure.ManualClock) -> None:
    lease = db.grant(1.0)
    db.demote()
    clock.advance(100.0)
    with pytest.raises(tenure.Timeout):
        next(db.expired(timeout=0.2))
    assert db.time_to_live(lease).id == lease.id


# ---- the Lease object ----------------------------------------------------------------------


def test_a_lease_is_accepted_wherever_an_int_id_is(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    db.put("k", "v", lease=lease)
    assert db.get("k").lease == lease.id  # type: ignore[union-attr]
    assert db.time_to_live(lease) == db.time_to_live(lease.id)
    assert db.renew(lease) == db.renew(lease.id)


def test_a_lease_converts_and_compares_like_its_id(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    assert int(lease) == lease.id
    assert [10, 20, 30, 40][lease] == [10, 20, 30, 40][lease.id]  # __index__
    assert lease == lease.id and not (lease != lease.id)
    assert lease != lease.id + 1
    assert hash(lease) == hash(lease.id)
    assert {lease.id: "x"}[lease] == "x"  # type: ignore[index]
    assert lease != "1"
    assert repr(lease) == f"tenure.Lease(id={lease.id}, ttl=10.0)"


def test_leases_of_different_engines_are_not_equal(clock: tenure.ManualClock) -> None:
    with tenure.open(clock=clock) as a, tenure.open(clock=clock) as b:
        assert a.grant(1.0, id=1) != b.grant(1.0, id=1)


@pytest.mark.parametrize("bad", ["1", 1.0, None, True, object()])
def test_a_lease_argument_of_a_wrong_type_raises_type_error(db: tenure.Tenure, bad: object) -> None:
    with pytest.raises(TypeError):
        db.revoke(bad)  # type: ignore[arg-type]


def test_a_lease_id_out_of_range_raises_invalid_argument(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.InvalidArgument):
        db.revoke(2**70)


def test_lease_methods_act_on_their_engine(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    db.put("k", "v", lease=lease)
    assert lease.time_to_live().keys == [b"k"]
    lease.revoke()
    assert db.get("k") is None
    with pytest.raises(tenure.LeaseNotFound):
        lease.renew()

