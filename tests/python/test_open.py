"""tenure.open(), the handle's lifecycle, options and the file (SPEC D1–D7, L13)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

import tenure
from conftest import WAIT


def test_open_without_path_is_in_memory_and_touches_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with tenure.open() as db:
        assert db.path is None
        db.put("k", "v")
        assert db.get("k") is not None
    assert list(tmp_path.iterdir()) == []


def test_open_file_persists_keys_and_leases_across_reopen(path: Path) -> None:
    with tenure.open(path) as db:
        lease = db.grant(ttl=3600.0)
        rev = db.put("a", b"1", lease=lease)
        db.put("b", "2")
    with tenure.open(path) as db:
        kv = db.get("a")
        assert kv is not None and kv.value == b"1" and kv.lease == lease.id
        assert db.revision == rev + 1
        info = db.time_to_live(lease.id)
        assert info.ttl == 3600.0 and info.keys == [b"a"]
        # L1: IDs are never reused, also after a reopen.
        assert db.grant(10.0).id > lease.id


def test_open_accepts_pathlike_and_str(path: Path) -> None:
    with tenure.open(str(path)) as db:
        assert db.path == path
    with tenure.open(path) as db:
        assert db.path == path
        assert isinstance(db.path, Path)


def test_handle_is_a_context_manager_that_closes(path: Path) -> None:
    with tenure.open(path) as db:
        assert isinstance(db, tenure.Tenure)
        assert not db.closed
    assert db.closed
    with pytest.raises(tenure.Closed):
        db.put("k", "v")


def test_context_manager_closes_when_the_block_raises(path: Path) -> None:
    with pytest.raises(RuntimeError):
        with tenure.open(path) as db:
            raise RuntimeError("boom")
    assert db.closed
    # The file was released: it opens again.
    tenure.open(path).close()


def test_close_is_idempotent() -> None:
    db = tenure.open()
    db.close()
    db.close()
    assert db.closed


def test_every_call_on_a_closed_handle_raises_closed(clock: tenure.ManualClock) -> None:
    db = tenure.open(clock=clock)
    lease = db.grant(10.0)
    db.put("k", "v")
    db.close()
    calls: list[Callable[[], object]] = [
        lambda: db.grant(1.0),
        lambda: db.revoke(lease),
        lambda: db.renew(lease),
        lambda: lease.renew(),
        lambda: lease.revoke(),
        lambda: lease.time_to_live(),
        lambda: lease.keep_alive(),
        lambda: db.time_to_live(lease),
        lambda: db.leases(),
        lambda: db.attach(lease, ["k"]),
        lambda: db.detach(lease, ["k"]),
        lambda: db.lease_of("k"),
        lambda: db.checkpoint(lease, 1.0),
        lambda: db.promote(),
        lambda: db.demote(),
        lambda: db.is_primary,
        lambda: db.expired(),
        lambda: db.put("k", "v"),
        lambda: db.get("k"),
        lambda: db.range(""),
        lambda: db.delete("k"),
        lambda: db.delete_prefix(""),
        lambda: db.revision,
        lambda: db.txn(success=[tenure.txn.get("k")]),
        lambda: db.watch("k"),
    ]
    for call in calls:
        with pytest.raises(tenure.Closed):
            call()
    # Stats stay readable after close.
    assert db.stats()["keys"] == 1


def test_second_open_of_the_same_file_raises_already_open_with_the_path(path: Path) -> None:
    with tenure.open(path):
        with pytest.raises(tenure.AlreadyOpen, match="test.tenure"):
            tenure.open(path)


def test_a_file_that_is_not_a_database_raises_corrupt_and_is_left_untouched(
    tmp_path: Path,
) -> None:
    junk = tmp_path / "junk.tenure"
    content = b"definitely not a redb file\n" * 100
    junk.write_bytes(content)
    with pytest.raises(tenure.Corrupt):
        tenure.open(junk)
    assert junk.read_bytes() == content


def test_an_unopenable_path_raises_storage_error(tmp_path: Path) -> None:
    with pytest.raises(tenure.StorageError, match="missing"):
        tenure.open(tmp_path / "missing" / "dir" / "x.tenure")


@pytest.mark.parametrize(
    "options",
    [
        {"durability": "sometimes"},
        {"recovery": "magic"},
        {"durability": "buffered", "flush_interval": 0.0},
        {"durability": "buffered", "flush_interval": -1.0},
        {"checkpoint_interval": 0.0},
        {"checkpoint_interval": float("nan")},
        {"expired_retry_interval": 0.0},
        {"min_ttl": -1.0},
        {"extend": -1.0},
        {"extend": float("inf")},
    ],
)
def test_bad_option_values_raise_invalid_argument(options: dict[str, object]) -> None:
    with pytest.raises(tenure.InvalidArgument):
        tenure.open(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options",
    [
        {"durability": 1},
        {"flush_interval": "fast"},
        {"clock": object()},
        {"primary": "yes"},
        {"min_ttl": None},
    ],
)
def test_bad_option_types_raise_type_error(options: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        tenure.open(**options)  # type: ignore[arg-type]


def test_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        tenure.open(None, "immediate")  # type: ignore[call-arg]


def test_buffered_durability_is_flushed_by_close(path: Path) -> None:
    with tenure.open(path, durability="buffered", flush_interval=3600.0) as db:
        db.put("k", "v")
        assert db.get("k") is not None
    with tenure.open(path) as db:
        kv = db.get("k")
        assert kv is not None and kv.value == b"v"


def test_immediate_durability_commits_every_write(path: Path) -> None:
    with tenure.open(path) as db:
        before = db.stats()["commits"]
        db.put("a", "1")
        db.put("b", "2")
        assert db.stats()["commits"] >= before + 2
        assert db.stats()["fsyncs"] >= before + 2


def test_recovery_extend_restarts_every_lease_from_its_ttl_plus_extend(
    path: Path, clock: tenure.ManualClock
) -> None:
    with tenure.open(path, clock=clock) as db:
        lease = db.grant(ttl=10.0)
    # Wall time passes while closed; "extend" ignores it, "wall" would count it.
    clock.advance(4.0)
    with tenure.open(path, clock=clock, recovery="extend", extend=5.0) as db:
        remaining = db.time_to_live(lease).remaining
        assert remaining is not None and remaining == pytest.approx(15.0, abs=0.01)


def test_recovery_wall_counts_the_time_spent_closed(
    path: Path, clock: tenure.ManualClock
) -> None:
    with tenure.open(path, clock=clock) as db:
        lease = db.grant(ttl=10.0)
    clock.advance(4.0)
    with tenure.open(path, clock=clock, recovery="wall") as db:
        remaining = db.time_to_live(lease).remaining
        assert remaining is not None and remaining == pytest.approx(6.0, abs=0.01)


def test_open_as_standby_is_not_primary(clock: tenure.ManualClock) -> None:
    with tenure.open(primary=False, clock=clock) as db:
        assert db.is_primary is False
        lease = db.grant(5.0)
        assert db.time_to_live(lease).remaining is None


def test_repr_says_where_and_whether_open(path: Path) -> None:
    db = tenure.open(path)
    assert repr(db) == f"tenure.Tenure(path={str(path)!r}, closed=False)"
    db.close()
    assert repr(db) == f"tenure.Tenure(path={str(path)!r}, closed=True)"
    with tenure.open() as mem:
        assert repr(mem) == "tenure.Tenure(path=None, closed=False)"


def test_version_is_a_string() -> None:
    assert isinstance(tenure.__version__, str)
    assert tenure.__version__.count(".") == 2


def test_open_interval_defaults_are_the_cores(clock: tenure.ManualClock) -> None:
    # The native signature takes them from the core's Builder constants and shows them as ...
    # (as the stub does); tenure.aio.open shows their values.
    native = inspect.signature(tenure.open).parameters
    aio = inspect.signature(tenure.aio.open).parameters
    for name, value in [
        ("flush_interval", tenure.DEFAULT_FLUSH_INTERVAL),
        ("checkpoint_interval", tenure.DEFAULT_CHECKPOINT_INTERVAL),
        ("expired_retry_interval", tenure.DEFAULT_EXPIRED_RETRY_INTERVAL),
    ]:
        assert native[name].default is ..., name
        assert aio[name].default == value > 0, name
    # The native default is that constant: an unrevoked expired lease comes again after it (L12).
    retry = tenure.DEFAULT_EXPIRED_RETRY_INTERVAL
    with tenure.open(clock=clock, auto_revoke=False) as db:
        expired = db.expired(timeout=WAIT)
        lease = db.grant(1.0)
        clock.advance(1.5)
        assert [e.id for e in next(expired)] == [lease.id]
        clock.advance(retry - 1.0)
        with pytest.raises(tenure.Timeout):
            expired.recv(timeout=0.2)
        clock.advance(1.5)
        assert [e.id for e in next(expired)] == [lease.id]
