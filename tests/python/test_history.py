"""Revision history (SPEC K9, K10, K13, K14): reads at a past revision, compaction keeping its
own revision (physical or not), the compacted and future errors as typed exceptions (with their
revisions), sync and asyncio, and a watch from a past revision after a reopen."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

import tenure
import tenure.aio


@pytest.fixture
def hdb(request: pytest.FixtureRequest, place: str, tmp_path: Path) -> Iterator[tenure.Tenure]:
    """`db`, but file-backed when embedded: an in-memory engine keeps only the present (K9)."""
    if place != "embedded":
        yield request.getfixturevalue("db")
        return
    with tenure.open(tmp_path / "history.tenure") as d:
        yield d


def write_history(db: tenure.Tenure) -> int:
    """k=v1 (r+1), k=v2 (r+2), other=o (r+3), delete k (r+4); returns r."""
    r = db.revision
    db.put("k", "v1")
    db.put("k", "v2")
    db.put("other", "o")
    assert db.delete("k")
    return r


@pytest.mark.everywhere
def test_k9_get_at_a_revision_answers_the_key_as_it_was(hdb: tenure.Tenure) -> None:
    db = hdb
    r = write_history(db)
    kv = db.get("k", revision=r + 1)
    assert kv is not None
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"v1", r + 1, r + 1, 1)
    kv = db.get("k", revision=r + 3)
    assert kv is not None
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"v2", r + 1, r + 2, 2)
    assert db.get("k", revision=r + 4) is None
    assert db.get("k") is None
    assert db.get("other", revision=r + 2) is None
    assert db.get("other", revision=r + 3) is not None


@pytest.mark.everywhere
def test_k9_range_at_a_revision_lists_the_keys_of_then_with_a_limit(hdb: tenure.Tenure) -> None:
    db = hdb
    r = write_history(db)
    assert [(kv.key, kv.value) for kv in db.range("", revision=r + 2)] == [(b"k", b"v2")]
    assert [kv.key for kv in db.range("", revision=r + 3)] == [b"k", b"other"]
    assert [kv.key for kv in db.range("", limit=1, revision=r + 3)] == [b"k"]
    assert db.range("k", revision=r + 4) == []


@pytest.mark.everywhere
def test_k13_a_future_revision_is_future_revision_with_etcds_text(hdb: tenure.Tenure) -> None:
    db = hdb
    write_history(db)
    future = db.revision + 1
    with pytest.raises(tenure.FutureRevision, match="required revision is a future revision") as e:
        db.get("k", revision=future)
    assert e.value.revision == future
    assert e.value.code == 23
    assert isinstance(e.value, tenure.TenureError)
    assert not isinstance(e.value, tenure.InvalidArgument)
    with pytest.raises(tenure.FutureRevision, match="required revision is a future revision"):
        db.range("", revision=future)
    with pytest.raises(tenure.FutureRevision):
        db.compact(future)


def test_k13_future_revision_names_the_current_one_embedded(hdb: tenure.Tenure) -> None:
    db = hdb
    write_history(db)
    current = db.revision
    with pytest.raises(tenure.FutureRevision) as e:
        db.get("k", revision=current + 2)
    assert (e.value.revision, e.value.current_revision) == (current + 2, current)


def test_k13_compacted_carries_compact_revision(hdb: tenure.Tenure) -> None:
    db = hdb
    r = write_history(db)
    db.compact(r + 2)
    with pytest.raises(tenure.Compacted) as e:
        db.get("k", revision=r + 1)
    assert (e.value.revision, e.value.compact_revision) == (r + 1, r + 2)
    with pytest.raises(tenure.Compacted) as e:
        db.range("", revision=r + 1)
    assert e.value.compact_revision == r + 2
    with pytest.raises(tenure.Compacted) as e:
        db.watch("k", start_revision=r + 1)
    assert e.value.compact_revision == r + 2
    with pytest.raises(tenure.Compacted) as e:
        db.compact(r + 1)
    assert e.value.compact_revision == r + 2


def test_k14_physical_compaction_sync_and_asyncio(path: Path) -> None:
    with tenure.open(path) as db:
        r = write_history(db)
        db.compact(r + 2, physical=True)
        kv = db.get("k", revision=r + 2)
        assert kv is not None and kv.value == b"v2"
        with pytest.raises(tenure.Compacted):
            db.get("k", revision=r + 1)

    async def main() -> None:
        async with tenure.aio.open(path) as adb:
            await adb.compact(r + 3, physical=True)
            with pytest.raises(tenure.Compacted) as e:
                await adb.get("k", revision=r + 2)
            assert e.value.compact_revision == r + 3
            with pytest.raises(tenure.FutureRevision):
                await adb.compact(r + 9, physical=True)

    asyncio.run(main())


def test_k9_a_negative_revision_is_invalid_argument(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.InvalidArgument, match="negative"):
        db.get("k", revision=-1)
    with pytest.raises(tenure.InvalidArgument, match="negative"):
        db.range("", revision=-1)
    with pytest.raises(tenure.InvalidArgument, match="below 1"):
        db.compact(0)
    with pytest.raises(TypeError):
        db.get("k", revision="1")  # type: ignore[arg-type]


@pytest.mark.everywhere
def test_k10_compact_keeps_its_revision_and_below_it_is_compacted(hdb: tenure.Tenure) -> None:
    db = hdb
    r = write_history(db)
    db.compact(r + 2)
    kv = db.get("k", revision=r + 2)
    assert kv is not None and kv.value == b"v2"
    with pytest.raises(tenure.Compacted, match="required revision has been compacted"):
        db.get("k", revision=r + 1)
    with pytest.raises(tenure.Compacted, match="required revision has been compacted"):
        db.range("", revision=r + 1)
    with pytest.raises(tenure.Compacted):
        db.compact(r + 2)
    with pytest.raises(tenure.FutureRevision, match="future revision"):
        db.compact(db.revision + 1)
    # A watch from the compacted revision replays it and what followed.
    with db.watch("k", start_revision=r + 2, timeout=10.0) as w:
        got = [(e.type, e.revision) for e in (w.recv(), w.recv())]
    assert got == [("put", r + 2), ("delete", r + 4)]


def test_k9_history_and_a_watch_from_the_past_survive_a_reopen(path: Path) -> None:
    with tenure.open(path) as db:
        r = write_history(db)
    with tenure.open(path) as db:
        kv = db.get("k", revision=r + 1)
        assert kv is not None and kv.value == b"v1"
        with db.watch("k", start_revision=r + 2, timeout=10.0) as w:
            events = [(e.type, e.revision) for e in (w.recv(), w.recv())]
    assert events == [("put", r + 2), ("delete", r + 4)]


def test_k9_asyncio_reads_at_a_revision_and_compacts(path: Path) -> None:
    async def main() -> None:
        async with tenure.aio.open(path) as db:
            r = write_history(db.sync)
            kv = await db.get("k", revision=r + 1)
            assert kv is not None and kv.value == b"v1"
            assert [k.key for k in await db.range("", limit=5, revision=r + 3)] == [b"k", b"other"]
            await db.compact(r + 2)
            with pytest.raises(tenure.Compacted):
                await db.get("k", revision=r + 1)
            with pytest.raises(tenure.FutureRevision, match="future revision"):
                await db.range("", revision=r + 9)

    asyncio.run(main())


def test_k9_an_in_memory_engine_keeps_only_the_present(db: tenure.Tenure) -> None:
    r = write_history(db)
    with pytest.raises(tenure.Compacted):
        db.get("k", revision=r + 1)
    assert [kv.key for kv in db.range("", revision=r + 4)] == [b"other"]
