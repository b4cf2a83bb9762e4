"""The space quota and the alarms from Python (SPEC E20, E24, E25): fill past a small quota,
get QuotaExceeded and the NOSPACE alarm (also in metrics_text), compact, defragment, disarm,
write again; sync and asyncio."""

from __future__ import annotations

from pathlib import Path

import pytest

import tenure
import tenure.aio

MEMBER = 0x51AB
VALUE = b"x" * (16 << 10)
NOSPACE = tenure.Alarm(MEMBER, "NOSPACE")


def figure(text: str, name: str) -> int | None:
    """The value of the line ``name value`` of a Prometheus text."""
    for line in text.splitlines():
        head, _, value = line.partition(" ")
        if head == name:
            return int(value)
    return None


def small_quota(tmp_path: Path) -> int:
    """A quota 1 MiB above an empty file's length."""
    with tenure.open(tmp_path / "probe.tenure") as probe:
        assert probe.quota_backend_bytes is None
        assert figure(probe.metrics_text(), "etcd_server_quota_backend_bytes") == 0
        empty = probe.storage_size().file_bytes
    return empty + (1 << 20)


def fill(db: tenure.Tenure) -> int:
    """Puts VALUE-sized values until one is refused; how many were written."""
    for i in range(4096):
        try:
            db.put(f"fill/{i:05d}", VALUE)
        except tenure.QuotaExceeded as e:
            assert "NOSPACE alarm" in str(e)
            return i
    raise AssertionError("64 MiB written and the quota never refused a put")


def test_e25_past_the_quota_quota_exceeded_and_nospace_then_compact_defragment_disarm(
    tmp_path: Path,
) -> None:
    quota = small_quota(tmp_path)
    with tenure.open(
        tmp_path / "db.tenure", quota_backend_bytes=quota, member_id=MEMBER
    ) as db:
        assert db.quota_backend_bytes == quota
        assert db.member_id == MEMBER
        assert db.alarms() == []
        text = db.metrics_text()
        assert figure(text, "etcd_server_quota_backend_bytes") == quota
        assert figure(text, "tenure_server_alarm_nospace") == 0

        written = fill(db)
        assert written > 0
        assert db.alarms() == [NOSPACE]
        assert db.alarms()[0].kind == "NOSPACE"
        assert db.alarms()[0].member == MEMBER
        assert figure(db.metrics_text(), "tenure_server_alarm_nospace") == 1
        with pytest.raises(tenure.QuotaExceeded):
            db.put("tiny", b"")
        with pytest.raises(tenure.QuotaExceeded):
            db.grant(5)

        assert db.delete_prefix("fill/") == written
        db.compact(db.revision, physical=True)
        size = db.defragment()
        assert size.file_bytes < quota - 4 * len(VALUE)
        assert size.in_use_bytes <= size.file_bytes
        assert db.storage_size() == size
        assert db.disarm_alarm(NOSPACE) is True
        assert db.disarm_alarm(NOSPACE) is False
        assert db.alarms() == []
        assert figure(db.metrics_text(), "tenure_server_alarm_nospace") == 0
        db.put("again", VALUE)
        db.grant(5)


def test_e25_alarms_raise_disarm_compare_by_value_and_refuse_a_bad_kind() -> None:
    with tenure.open() as db:
        corrupt = tenure.Alarm(7, "CORRUPT")
        assert corrupt == tenure.Alarm(7, "CORRUPT")
        assert len({corrupt, tenure.Alarm(7, "CORRUPT"), NOSPACE}) == 2
        assert repr(corrupt) == "tenure.Alarm(member=7, kind='CORRUPT')"
        assert db.raise_alarm(corrupt) is True
        assert db.raise_alarm(corrupt) is False
        with pytest.raises(tenure.Unavailable, match="corrupt cluster"):
            db.put("k", "v")
        assert db.get("k") is None  # reads still work
        db.raise_alarm(NOSPACE)
        assert db.alarms() == [NOSPACE, corrupt]  # (kind, member) order
        assert db.disarm_alarm(corrupt) is True
        assert db.disarm_alarm(NOSPACE) is True
        db.put("k", "v")
        with pytest.raises(tenure.InvalidArgument, match="NOSPACE"):
            tenure.Alarm(1, "NONE")  # type: ignore[arg-type]
        with pytest.raises(OverflowError):
            tenure.Alarm(-1, "NOSPACE")
        with pytest.raises(tenure.InvalidArgument, match="no file"):
            db.defragment()
        assert db.quota_backend_bytes is None


@pytest.mark.asyncio
async def test_e25_asyncio_alarms_quota_and_defragment(tmp_path: Path) -> None:
    quota = small_quota(tmp_path)
    async with tenure.aio.open(
        tmp_path / "db.tenure", quota_backend_bytes=quota, member_id=MEMBER
    ) as adb:
        assert adb.quota_backend_bytes == quota
        assert adb.member_id == MEMBER
        written = fill(adb.sync)
        assert await adb.alarms() == [NOSPACE]
        assert figure(await adb.metrics_text(), "tenure_server_alarm_nospace") == 1
        with pytest.raises(tenure.QuotaExceeded):
            await adb.put("tiny", b"")
        assert await adb.delete_prefix("fill/") == written
        await adb.compact(adb.sync.revision, physical=True)
        size = await adb.defragment()
        assert size == await adb.storage_size()
        assert size.file_bytes < quota - 4 * len(VALUE)
        assert await adb.disarm_alarm(NOSPACE) is True
        assert await adb.raise_alarm(NOSPACE) is True
        assert await adb.disarm_alarm(NOSPACE) is True
        await adb.put("again", VALUE)
