"""The other process of test_shared.py: opens a file with `shared=True` and does one thing.

    shared_child.py own PATH            owns the file until its stdin closes
    shared_child.py see PATH            reads "shared/a", writes "shared/b", tries the
                                        engine-only calls; prints a JSON report
    shared_child.py see-aio PATH        the same through tenure.aio
    shared_child.py plain PATH          a plain open (no shared=True); prints the error
    shared_child.py hold PATH NAME TTL  holds mutex NAME (session of TTL s) until killed

Each prints one JSON line on stdout (flushed) once it has done its part.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import tenure


def say(**report: Any) -> None:
    print(json.dumps(report), flush=True)


def refused(call: Any) -> str:
    """The message of the `tenure.Unsupported` that `call()` raises ("" if none)."""
    try:
        call()
    except tenure.Unsupported as e:
        return str(e)
    return ""


def see(path: str) -> None:
    with tenure.open(path, shared=True) as db:
        a = db.get("shared/a")
        db.put("shared/b", "from a non-owner")
        lease = db.grant(60.0)
        say(
            owner=db.stats()["owner"],
            a=None if a is None else a.value.decode(),
            promote=refused(lambda: db.promote()),
            demote=refused(db.demote),
            expired=refused(lambda: next(iter(db.expired(timeout=0.0)))),
            checkpoint=refused(lambda: db.checkpoint(lease, 1.0)),
        )
        db.revoke(lease)


async def see_aio(path: str) -> None:
    async with tenure.aio.open(path, shared=True) as db:
        a = await db.get("shared/a")
        await db.put("shared/b", "from a non-owner (asyncio)")
        try:
            await db.promote()
            promote = ""
        except tenure.Unsupported as e:
            promote = str(e)
        say(
            owner=(await db.stats())["owner"],
            a=None if a is None else a.value.decode(),
            promote=promote,
        )


def main(argv: list[str]) -> None:
    mode, path = argv[1], argv[2]
    if mode == "own":
        with tenure.open(path, shared=True) as db:
            say(owner=db.stats()["owner"])
            sys.stdin.read()
    elif mode == "see":
        see(path)
    elif mode == "see-aio":
        asyncio.run(see_aio(path))
    elif mode == "plain":
        try:
            tenure.open(path).close()
            say(error="")
        except tenure.AlreadyOpen as e:
            say(error=str(e))
    elif mode == "hold":
        name, ttl = argv[3], float(argv[4])
        with tenure.open(path, shared=True) as db:
            session = db.session(ttl=ttl)
            guard = session.lock(name, timeout=30.0)
            say(token=guard.fencing_token, owner=db.stats()["owner"])
            sys.stdin.read()
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv)
