#!/usr/bin/env python3
"""etcd's file size for the data of `history --run open` (BENCHMARKS.md, "Revision history:
the budget"): KEYS keys named as that binary names them, each put VERSIONS times with a
VALUE_SIZE-byte value, in txns of 100 puts (one revision per txn), through etcd's JSON gateway
(/v3/kv/txn) on one kept-alive connection; auto-compaction off, as tenure's run. A real etcd on
127.0.0.1 at random ports, in a temporary directory, stopped by its PID.

Prints the db size (`etcdctl endpoint status -w json`, dbSize) after the puts and after
`etcdctl defrag`, and bytes per retained key version.

    python3 bench/etcd_history_size.py --keys 100000 --versions 10
"""

import argparse
import base64
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def status(endpoint: str) -> dict:
    out = subprocess.run(
        ["etcdctl", "--endpoints", endpoint, "endpoint", "status", "-w", "json"],
        check=True, capture_output=True, text=True, env={**os.environ, "ETCDCTL_API": "3"},
    ).stdout
    return json.loads(out)[0]["Status"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--versions", type=int, default=10)
    ap.add_argument("--value-size", type=int, default=32)
    ap.add_argument("--batch", type=int, default=100)
    a = ap.parse_args()
    etcd = shutil.which("etcd")
    if etcd is None:
        sys.exit("etcd_history_size: etcd is not installed (make serve-tools)")
    tmp = tempfile.mkdtemp(prefix="etcd-size-")
    client, peer = free_port(), free_port()
    endpoint = f"http://127.0.0.1:{client}"
    proc = subprocess.Popen(
        [etcd, "--data-dir", tmp, "--listen-client-urls", endpoint,
         "--advertise-client-urls", endpoint,
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"default=http://127.0.0.1:{peer}",
         "--quota-backend-bytes", str(8 << 30)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        conn = http.client.HTTPConnection("127.0.0.1", client, timeout=30)
        for _ in range(200):
            try:
                conn.request("POST", "/v3/kv/range", body=json.dumps({"key": b64(b"x")}))
                conn.getresponse().read()
                break
            except OSError:
                conn.close()
                time.sleep(0.05)
        names = [f"history/k{i:08}".encode() for i in range(a.keys)]
        began = time.monotonic()
        for v in range(a.versions):
            value = f"v{v:04}-".encode()
            value = b64(value + b"x" * max(0, a.value_size - len(value)))
            for at in range(0, a.keys, a.batch):
                ops = [{"requestPut": {"key": b64(k), "value": value}}
                       for k in names[at:at + a.batch]]
                conn.request("POST", "/v3/kv/txn", body=json.dumps({"success": ops}))
                r = conn.getresponse()
                body = r.read()
                if r.status != 200:
                    sys.exit(f"etcd_history_size: txn answered {r.status}: {body[:200]!r}")
        took = time.monotonic() - began
        versions = a.keys * a.versions
        st = status(endpoint)
        print(f"etcd_history_size keys={a.keys} versions={a.versions} revision="
              f"{st['header']['revision']} load_s={took:.1f} db_bytes={st['dbSize']} "
              f"bytes_per_version={st['dbSize'] / versions:.1f}")
        subprocess.run(["etcdctl", "--endpoints", endpoint, "--command-timeout", "120s", "defrag"], check=True,
                       capture_output=True, env={**os.environ, "ETCDCTL_API": "3"})
        st = status(endpoint)
        print(f"etcd_history_size defragmented db_bytes={st['dbSize']} "
              f"bytes_per_version={st['dbSize'] / versions:.1f}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
