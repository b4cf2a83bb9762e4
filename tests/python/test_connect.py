"""SPEC R1/R3/R4/R5 from Python: tenure.connect gives the same Tenure over etcd v3, also over
mutual TLS (certificates made by the openssl command), and refusals raise Unauthenticated
naming the endpoint. The servers are real etcds (Debian's etcd-server) on loopback random ports
with temporary data dirs."""

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


def _etcd(data: Path, scheme: str, flags: list[str], **creds: Path) -> Iterator[str]:
    """A single-node etcd serving clients at ``scheme``://127.0.0.1:PORT with ``flags``, until
    the generator is closed; ``creds``: what ``tenure.connect`` needs to get in."""
    port, peer = _free_port(), _free_port()
    url, peer_url = f"{scheme}://127.0.0.1:{port}", f"http://127.0.0.1:{peer}"
    proc = subprocess.Popen(
        ["etcd", "--name", "t", "--data-dir", str(data / "d"),
         "--listen-client-urls", url, "--advertise-client-urls", url,
         "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
         "--initial-cluster", f"t={peer_url}", "--log-level", "error", *flags],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                tenure.connect(url, timeout=1.0, **creds).close()  # type: ignore[arg-type]
                break
            except tenure.Unavailable:
                assert time.monotonic() < deadline, "etcd did not start"
        yield url
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def etcd_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _etcd(tmp_path_factory.mktemp("etcd"), "http", [])


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
        # SPEC R1: no server says which leases expired; refused, naming the call.
        with pytest.raises(tenure.Unsupported, match="expired"):
            db.expired()


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


# R4/R5: TLS (mutual) to a real etcd, with certificates made by the openssl command.
_needs_openssl = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="openssl not installed"
)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _leaf(d: Path, name: str, ca: str, ext: str) -> None:
    """``name``.pem/.key signed by ``ca``.pem/.key with the extensions ``ext``."""
    (d / f"{name}.ext").write_text(ext)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext",
             cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d: Path = tmp_path_factory.mktemp("certs")
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                 "-subj", f"/CN={ca}", cwd=d)
    _leaf(d, "server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
          "extendedKeyUsage=serverAuth,clientAuth\n")
    _leaf(d, "client", "ca", "extendedKeyUsage=clientAuth\n")
    return d


@pytest.fixture(scope="module")
def etcd_tls(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    flags = [f"--cert-file={certs / 'server.pem'}", f"--key-file={certs / 'server.key'}",
             f"--trusted-ca-file={certs / 'ca.pem'}", "--client-cert-auth"]
    yield from _etcd(tmp_path_factory.mktemp("etcd-tls"), "https", flags, ca=certs / "ca.pem",
                     cert=certs / "client.pem", key=certs / "client.key")


@_needs_openssl
def test_r4_connect_over_mutual_tls(etcd_tls: str, certs: Path) -> None:
    with tenure.connect(etcd_tls, ca=str(certs / "ca.pem"), cert=certs / "client.pem",
                        key=certs / "client.key", server_name="localhost") as db:
        rev = db.put("py/tls", "1")
        kv = db.get("py/tls")
        assert kv is not None and kv.mod_revision == rev


@_needs_openssl
def test_r4_refused_tls_raises_unauthenticated_naming_the_endpoint(
    etcd_tls: str, certs: Path
) -> None:
    for kwargs in (
        {"ca": certs / "other-ca.pem", "cert": certs / "client.pem", "key": certs / "client.key"},
        {"ca": certs / "ca.pem"},
    ):
        with pytest.raises(tenure.Unauthenticated) as exc:
            tenure.connect(etcd_tls, timeout=3.0, **kwargs)  # type: ignore[arg-type]
        assert exc.value.code == 22
        assert etcd_tls in str(exc.value) and "TLS" in str(exc.value)


@_needs_openssl
def test_r4_aio_connect_takes_the_same_options(etcd_tls: str, certs: Path) -> None:
    async def main() -> bytes | None:
        async with tenure.aio.connect(etcd_tls, ca=certs / "ca.pem", cert=certs / "client.pem",
                                      key=certs / "client.key") as db:
            await db.put("py/aio-tls", "2")
            kv = await db.get("py/aio-tls")
            return None if kv is None else kv.value

    assert asyncio.run(main()) == b"2"


def test_r4_r5_options_go_in_pairs() -> None:
    with pytest.raises(tenure.InvalidArgument, match="cert and key"):
        tenure.connect("https://127.0.0.1:1", cert="client.pem")
    with pytest.raises(tenure.InvalidArgument, match="user and password"):
        tenure.connect("http://127.0.0.1:1", user="alice")
    with pytest.raises(tenure.InvalidArgument, match="https://"):
        tenure.connect("http://127.0.0.1:1", ca="ca.pem")
    with pytest.raises(FileNotFoundError):
        tenure.connect("https://127.0.0.1:1", ca="/nonexistent/ca.pem")
