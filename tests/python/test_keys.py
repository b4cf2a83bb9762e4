"""TTL keys: put, get, range, delete, revisions (SPEC K1–K4), str/bytes handling."""

from __future__ import annotations

import pytest

import tenure


@pytest.mark.everywhere
def test_put_returns_the_new_revision_and_get_reads_it_back(db: tenure.Tenure) -> None:
    r = db.revision
    rev = db.put("k", "v")
    assert rev == r + 1 and db.revision == r + 1
    kv = db.get("k")
    assert isinstance(kv, tenure.KeyValue)
    assert kv.key == b"k" and kv.value == b"v"
    assert kv.create_revision == r + 1 and kv.mod_revision == r + 1 and kv.version == 1
    assert kv.lease is None


@pytest.mark.everywhere
def test_overwrite_keeps_create_revision_and_bumps_version(db: tenure.Tenure) -> None:
    r = db.revision
    db.put("k", "1")
    db.put("other", "x")
    db.put("k", "2")
    kv = db.get("k")
    assert kv is not None
    assert (kv.create_revision, kv.mod_revision, kv.version, kv.value) == (r + 1, r + 3, 2, b"2")


@pytest.mark.everywhere
def test_str_keys_and_values_are_utf8_and_results_are_bytes(db: tenure.Tenure) -> None:
    db.put("ключ/é", "värde ✓")
    kv = db.get("ключ/é".encode())
    assert kv is not None
    assert kv.key == "ключ/é".encode() and kv.value == "värde ✓".encode()
    assert type(kv.key) is bytes and type(kv.value) is bytes


@pytest.mark.everywhere
def test_bytes_and_bytearray_are_arbitrary(db: tenure.Tenure) -> None:
    key = bytes(range(256))
    db.put(key, bytearray(b"\x00\xff"))
    kv = db.get(bytearray(key))
    assert kv is not None and kv.value == b"\x00\xff"


def test_large_values_round_trip(db: tenure.Tenure) -> None:
    big = b"x" * (4 << 20)
    db.put("big", big)
    assert db.get("big").value == big  # type: ignore[union-attr]


@pytest.mark.everywhere
def test_get_of_a_missing_key_is_none(db: tenure.Tenure) -> None:
    assert db.get("nope") is None


@pytest.mark.everywhere
def test_empty_key_raises_invalid_argument(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.InvalidArgument):
        db.put("", "v")


@pytest.mark.everywhere
@pytest.mark.parametrize("bad", [1, 1.5, None, ["k"], object()])
def test_keys_and_values_of_other_types_raise_type_error(db: tenure.Tenure, bad: object) -> None:
    r = db.revision
    with pytest.raises(TypeError):
        db.put(bad, "v")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        db.put("k", bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        db.get(bad)  # type: ignore[arg-type]
    assert db.revision == r


def test_a_str_that_is_not_encodable_raises_unicode_error(db: tenure.Tenure) -> None:
    with pytest.raises(UnicodeEncodeError):
        db.put("\ud800", "v")


@pytest.mark.everywhere
def test_put_with_a_lease_attaches_and_without_detaches(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    db.put("k", "1", lease=lease)
    assert db.lease_of("k") == lease.id
    assert db.get("k").lease == lease.id  # type: ignore[union-attr]
    db.put("k", "2")
    assert db.lease_of("k") is None


@pytest.mark.everywhere
def test_put_with_lease_zero_means_no_lease(db: tenure.Tenure) -> None:
    db.put("k", "1", lease=0)
    assert db.lease_of("k") is None


@pytest.mark.everywhere
def test_put_with_a_missing_lease_raises_and_writes_nothing(db: tenure.Tenure) -> None:
    r = db.revision
    with pytest.raises(tenure.LeaseNotFound):
        db.put("k", "v", lease=404)
    assert db.get("k") is None and db.revision == r


@pytest.mark.everywhere
def test_range_returns_the_prefix_in_key_order_with_limit(db: tenure.Tenure) -> None:
    for k in ["b/2", "a/1", "b/1", "b/3", "c"]:
        db.put(k, k)
    assert [kv.key for kv in db.range("b/")] == [b"b/1", b"b/2", b"b/3"]
    assert [kv.key for kv in db.range(b"b/", limit=2)] == [b"b/1", b"b/2"]
    assert db.range("b/", limit=0) == []
    assert len(db.range("")) == 5
    assert db.range("zzz") == []


@pytest.mark.everywhere
def test_range_with_a_negative_limit_raises_invalid_argument(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.InvalidArgument):
        db.range("", limit=-1)


@pytest.mark.everywhere
def test_delete_reports_whether_the_key_existed(db: tenure.Tenure) -> None:
    db.put("k", "v")
    assert db.delete("k") is True
    assert db.delete("k") is False
    assert db.get("k") is None


@pytest.mark.everywhere
def test_delete_detaches_the_key_from_its_lease(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    db.put("k", "v", lease=lease)
    db.delete("k")
    assert lease.time_to_live().keys == []


@pytest.mark.everywhere
def test_delete_prefix_returns_how_many(db: tenure.Tenure) -> None:
    for k in ["p/1", "p/2", "q/1"]:
        db.put(k, "v")
    assert db.delete_prefix("p/") == 2
    assert db.delete_prefix("p/") == 0
    assert [kv.key for kv in db.range("")] == [b"q/1"]


@pytest.mark.everywhere
def test_every_write_advances_the_revision_by_one(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    revs = [db.revision]
    db.put("a", "1", lease=lease)
    revs.append(db.revision)
    db.put("b", "1", lease=lease)
    revs.append(db.revision)
    db.delete("a")
    revs.append(db.revision)
    db.revoke(lease)
    revs.append(db.revision)
    assert revs == list(range(revs[0], revs[0] + 5))


def test_keyvalue_is_a_comparable_snapshot(db: tenure.Tenure) -> None:
    db.put("k", "v")
    a, b = db.get("k"), db.get("k")
    assert a == b and a is not b
    db.put("k", "w")
    assert db.get("k") != a
    assert repr(a) == (
        "tenure.KeyValue(key=b'k', value=b'v', create_revision=1, mod_revision=1, version=1,"
        " lease=None)"
    )


def test_stats_counts_leases_keys_and_revision(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    db.put("a", "1", lease=lease)
    db.put("b", "1")
    lease.renew()
    s = db.stats()
    assert isinstance(s, dict)
    assert {
        "granted",
        "revoked",
        "renewed",
        "expired",
        "leases",
        "keys",
        "revision",
        "commits",
        "fsyncs",
        "expired_dropped",
        "watchers",
    } <= s.keys()
    assert (s["granted"], s["renewed"], s["leases"], s["keys"], s["revision"]) == (1, 1, 1, 2, 2)
    db.revoke(lease)
    s = db.stats()
    assert (s["revoked"], s["leases"], s["keys"]) == (1, 0, 1)
    assert all(isinstance(v, int) for v in s.values())
