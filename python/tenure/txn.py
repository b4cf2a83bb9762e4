"""Transaction helpers: compares and operations for ``Tenure.txn()``.

    import tenure
    from tenure import txn

    r = db.txn(
        compare=[txn.version("job/1") == 0],
        success=[txn.put("job/1", "worker-a", lease=lease)],
        failure=[txn.get("job/1")],
    )
    if r.succeeded: ...

``txn.value(k)``, ``txn.version(k)``, ``txn.create_revision(k)``, ``txn.mod_revision(k)`` and
``txn.lease(k)`` compare with ``==``, ``!=``, ``<`` and ``>``. A missing key has version, create
and mod revision 0 and lease 0; a value compare on a missing key fails.
"""

from __future__ import annotations

from typing import Union

from ._tenure import Compare, Lease, Op

__all__ = [
    "Compare",
    "Op",
    "Field",
    "value",
    "version",
    "create_revision",
    "mod_revision",
    "lease",
    "put",
    "get",
    "delete",
    "delete_prefix",
    "range",
]

Key = Union[str, bytes, bytearray]
LeaseLike = Union[Lease, int]


class Field:
    """One field of one key, to compare: ``version("k") == 0``."""

    # A dict of slots documents each attribute (``help(Field)``).
    __slots__ = {
        "key": "The key compared.",
        "target": 'What of it: "value", "version", "create_revision", "mod_revision" or "lease".',
    }
    key: Key
    target: str

    def __init__(self, key: Key, target: str) -> None:
        self.key = key
        self.target = target

    def __eq__(self, other: object) -> Compare:  # type: ignore[override]
        return Compare(self.key, self.target, "==", other)

    def __ne__(self, other: object) -> Compare:  # type: ignore[override]
        return Compare(self.key, self.target, "!=", other)

    def __lt__(self, other: object) -> Compare:
        return Compare(self.key, self.target, "<", other)

    def __gt__(self, other: object) -> Compare:
        return Compare(self.key, self.target, ">", other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"tenure.txn.Field({self.key!r}, {self.target!r})"


def value(key: Key) -> Field:
    """The key's value (bytes order)."""
    return Field(key, "value")


def version(key: Key) -> Field:
    """The key's version: 0 when it does not exist."""
    return Field(key, "version")


def create_revision(key: Key) -> Field:
    """The revision that created the key (0 when missing)."""
    return Field(key, "create_revision")


def mod_revision(key: Key) -> Field:
    """The revision of the key's last write (0 when missing)."""
    return Field(key, "mod_revision")


def lease(key: Key) -> Field:
    """The ID of the lease the key is attached to (0 for none or missing)."""
    return Field(key, "lease")


def put(key: Key, value: Key, lease: LeaseLike | None = None) -> Op:
    """Put ``key = value``, attached to ``lease`` (``None``: detached). Raises
    ``tenure.InvalidArgument`` for a key or value that is not ``str`` or ``bytes``."""
    return Op.put(key, value, lease)


def get(key: Key) -> Op:
    """Read one key (the response is a ``KeyValue`` or ``None``)."""
    return Op.get(key)


def delete(key: Key) -> Op:
    """Delete one key (the response says whether it existed). Raises
    ``tenure.InvalidArgument`` for a key that is not ``str`` or ``bytes``."""
    return Op.delete(key)


def delete_prefix(prefix: Key) -> Op:
    """Delete every key under ``prefix`` (the response is how many). Raises
    ``tenure.InvalidArgument`` for a prefix that is not ``str`` or ``bytes``."""
    return Op.delete_prefix(prefix)


def range(prefix: Key, limit: int | None = None) -> Op:  # noqa: A001 - mirrors Tenure.range
    """Read the keys under ``prefix`` in key order, at most ``limit``."""
    return Op.range(prefix, limit)
