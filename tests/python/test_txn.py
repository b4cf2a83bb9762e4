"""Transactions (SPEC K5) and the tenure.txn helpers."""

from __future__ import annotations

import pytest

import tenure
from tenure import txn


def test_create_if_missing_succeeds_once(db: tenure.Tenure) -> None:
    def claim(owner: str) -> tenure.TxnResponse:
        return db.txn(
            compare=[txn.version("job") == 0],
            success=[txn.put("job", owner)],
            failure=[txn.get("job")],
        )

    first = claim("a")
    assert first.succeeded and bool(first)
    assert first.responses == [first.revision]
    second = claim("b")
    assert not second.succeeded and not bool(second)
    [holder] = second.responses
    assert isinstance(holder, tenure.KeyValue) and holder.value == b"a"
    assert second.revision == first.revision  # the failure branch wrote nothing


def test_every_compare_target_and_operator(db: tenure.Tenure) -> None:
    lease = db.grant(10.0)
    db.put("k", "m", lease=lease)  # rev 1
    db.put("k", "m")  # rev 2, version 2, no lease
    db.attach(lease, ["k"])  # rev 3
    kv = db.get("k")
    assert kv is not None
    cases = [
        (txn.value("k") == "m", True),
        (txn.value("k") == b"x", False),
        (txn.value("k") != "x", True),
        (txn.value("k") < "n", True),
        (txn.value("k") > "n", False),
        (txn.version("k") == 2, True),
        (txn.version("k") > 1, True),
        (txn.version("k") < 2, False),
        (txn.version("missing") == 0, True),
        (txn.create_revision("k") == kv.create_revision, True),
        (txn.mod_revision("k") == kv.mod_revision, True),
        (txn.mod_revision("k") < kv.mod_revision, False),
        (txn.lease("k") == lease, True),
        (txn.lease("k") == lease.id, True),
        (txn.lease("k") != 0, True),
        (txn.lease("missing") == 0, True),
        (txn.value("missing") == "", False),
    ]
    for compare, expected in cases:
        assert db.txn(compare=[compare]).succeeded is expected, repr(compare)


def test_all_compares_must_hold(db: tenure.Tenure) -> None:
    db.put("a", "1")
    r = db.txn(compare=[txn.value("a") == "1", txn.version("b") == 1], success=[txn.put("x", "y")])
    assert not r.succeeded and db.get("x") is None


def test_operation_responses_by_kind(db: tenure.Tenure) -> None:
    db.put("p/1", "1")
    db.put("p/2", "2")
    db.put("q", "q")
    lease = db.grant(10.0)
    r = db.txn(
        success=[
            txn.put("n", "new", lease=lease),
            txn.get("q"),
            txn.get("missing"),
            txn.range("p/", limit=1),
            txn.delete("q"),
            txn.delete("missing"),
            txn.delete_prefix("p/"),
        ]
    )
    assert r.succeeded
    put_rev, got, missing, ranged, deleted, not_deleted, n_deleted = r.responses
    assert put_rev == r.revision
    assert isinstance(got, tenure.KeyValue) and got.value == b"q"
    assert missing is None
    assert isinstance(ranged, list) and [kv.key for kv in ranged] == [b"p/1"]
    assert deleted is True and not_deleted is False
    assert n_deleted == 2
    assert db.lease_of("n") == lease.id
    assert [kv.key for kv in db.range("")] == [b"n"]


def test_a_transaction_is_one_revision(db: tenure.Tenure) -> None:
    before = db.revision
    r = db.txn(success=[txn.put("a", "1"), txn.put("b", "2"), txn.delete("a")])
    assert r.revision == before + 1 == db.revision
    assert db.get("b").mod_revision == r.revision  # type: ignore[union-attr]


def test_an_empty_transaction_succeeds_without_writing(db: tenure.Tenure) -> None:
    r = db.txn()
    assert r.succeeded and r.responses == [] and r.revision == db.revision == 0


def test_a_put_to_a_missing_lease_fails_the_whole_transaction(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.LeaseNotFound):
        db.txn(success=[txn.put("a", "1"), txn.put("b", "2", lease=999)])
    assert db.get("a") is None and db.revision == 0


def test_items_that_are_not_compares_or_ops_raise_type_error(db: tenure.Tenure) -> None:
    with pytest.raises(TypeError):
        db.txn(compare=[True])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        db.txn(success=[txn.version("k") == 0])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        db.txn(success=5)  # type: ignore[arg-type]


def test_compare_arguments_are_checked(db: tenure.Tenure) -> None:
    with pytest.raises(TypeError):
        txn.version("k") == "zero"  # noqa: B015
    with pytest.raises(TypeError):
        txn.value("k") == 0  # noqa: B015
    with pytest.raises(tenure.InvalidArgument):
        txn.Compare("k", "colour", "==", 1)
    with pytest.raises(tenure.InvalidArgument):
        txn.Compare("k", "version", "<=", 1)
    with pytest.raises(tenure.InvalidArgument):
        txn.range("p", limit=-1)


def test_fields_are_not_hashable_and_render_readably() -> None:
    with pytest.raises(TypeError):
        hash(txn.version("k"))
    assert repr(txn.version("k")) == "tenure.txn.Field('k', 'version')"
    assert repr(txn.version("k") == 0) == "tenure.txn.Compare(b'k', 'version', '==', 0)"
    assert repr(txn.put("k", "v", lease=3)) == "tenure.txn.Op.put(b'k', b'v', lease=3)"
    assert repr(txn.range("p")) == "tenure.txn.Op.range(b'p', limit=None)"


def test_ops_and_compares_compare_by_value() -> None:
    assert txn.put("k", "v") == txn.put(b"k", b"v")
    assert txn.get("k") != txn.delete("k")
    assert (txn.version("k") == 0) == (txn.version(b"k") == 0)
