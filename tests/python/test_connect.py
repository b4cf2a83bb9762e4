"""SPEC R1/R3 from Python: tenure.connect gives the same Tenure over etcd v3. The server is a
real etcd (Debian's etcd-server) on loopback random ports with a temporary data dir."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tenure
import tenure.aio

pytestmark = pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd-server not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def etcd_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data: Path = tmp_path_factory.mktemp("etcd")
    port, peer = _free_port(), _free_port()
    url, peer_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{peer}"
    proc = subprocess.Popen(
        ["etcd", "--name", "t", "--data-dir", str(data / "d"),
         "--listen-client-urls", url, "--advertise-client-urls", url,
         "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
         "--initial-cluster", f"t={peer_url}", "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                tenure.connect(url, timeout=1.0).close()
                break
            except tenure.Unavailable:
                assert time.monotonic() < deadline, "etcd did not start"
        yield url
    finally:
        proc.kill()
        proc.wait()


def test_r1_connect_keys_leases_and_sessions_over_etcd(etcd_url: str) -> None:
    with tenure.connect(etcd_url, timeout=5.0) as db:
        assert isinstance(db, tenure.Tenure)
        lease = db.grant(30)
        rev = db.put("py/a", "1", lease)
        kv = db.get("py/a")
        assert kv is not None and kv.value == b"1" and kv.mod_revision == rev
        assert db.time_to_live(lease).keys == [b"py/a"]
        db.revoke(lease)
        assert db.get("py/a") is None
        with pytest.raises(tenure.Unsupported):
            db.promote()


def test_r3_an_unreachable_server_is_unavailable_also_a_connection_error() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    start = time.monotonic()
    with pytest.raises(tenure.Unavailable) as exc:
        tenure.connect(url, timeout=0.5)
    assert isinstance(exc.value, ConnectionError)
    assert exc.value.code == 20
    assert time.monotonic() - start < 5
    with pytest.raises(tenure.InvalidArgument):
        tenure.connect("127.0.0.1:2379")


def test_r1_aio_connect_awaits_every_call_over_etcd(etcd_url: str) -> None:
    async def scenario() -> None:
        async with tenure.aio.connect(etcd_url, timeout=5.0) as db:
            lease = await db.grant(30)
            rev = await db.put("py/aio", "1", lease)
            kv = await db.get("py/aio")
            assert kv is not None and kv.mod_revision == rev
            assert [k.key for k in await db.range("py/aio")] == [b"py/aio"]
            await db.revoke(lease)
            assert await db.get("py/aio") is None

    asyncio.run(scenario())
