"""The database a caller's DB-API connection is on, and how to talk to it.

The client never opens, commits or rolls back the caller's connection (but
for :func:`bqueue.wait`, which says so): every statement runs on a cursor
of it, in whatever transaction the caller has open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

POSTGRES = "postgres"
MYSQL = "mysql"
SQLITE = "sqlite"

DEFAULT_PREFIX = "bq_"
_PREFIX = re.compile(r"^[a-z][a-z0-9_]{0,30}$")


def validate_prefix(prefix: str) -> str:
    """Return prefix if it is safe to splice into SQL as bq's Go side
    allows it (migrations.ValidatePrefix), else raise ValueError."""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise ValueError(
            f"invalid table prefix {prefix!r}: use lower-case letters, digits and underscores, "
            f"starting with a letter (at most 31 characters), e.g. {DEFAULT_PREFIX!r}"
        )
    return prefix


@dataclass(frozen=True)
class DB:
    """A caller's connection, its dialect and bq's table prefix."""

    conn: Any
    dialect: str
    prefix: str

    @property
    def mark(self) -> str:
        """The driver's placeholder: %s (psycopg, PyMySQL) or ? (sqlite3)."""
        return "?" if self.dialect == SQLITE else "%s"

    def sql(self, query: str) -> str:
        """query with {p} the prefix and each ? the driver's placeholder."""
        q = query.replace("{p}", self.prefix)
        return q if self.dialect == SQLITE else q.replace("?", "%s")

    def execute(self, query: str, params: Sequence[Any] = ()) -> Any:
        cur = self.conn.cursor()
        cur.execute(self.sql(query), tuple(params))
        return cur

    def rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.execute(query, params)
        try:
            return [tuple(r) for r in cur.fetchall()]
        finally:
            cur.close()

    def notify_inbox(self) -> None:
        """On PostgreSQL, wake the Go processes when the transaction
        commits (never after a rollback); elsewhere they watch the table."""
        if self.dialect == POSTGRES:
            self.execute("SELECT pg_notify(?, '')", (self.prefix + "inbox",)).close()

    def in_transaction(self) -> bool:
        """Whether the connection has a transaction open (best effort)."""
        if self.dialect == SQLITE:
            return bool(self.conn.in_transaction)
        if self.dialect == POSTGRES:
            import psycopg  # the caller's driver; only imported for its own connections

            return self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        return False

    def autocommit(self) -> bool:
        """Whether each statement commits on its own."""
        if self.dialect == SQLITE:
            return self.conn.isolation_level is None
        if self.dialect == POSTGRES:
            return bool(self.conn.autocommit)
        return bool(self.conn.get_autocommit())

    def now_stamp(self) -> Any:
        """The time now as bq's policies table holds it: a timestamp on
        PostgreSQL, Unix microseconds elsewhere."""
        now = datetime.now(timezone.utc)
        if self.dialect == POSTGRES:
            return now
        return int(now.timestamp() * 1_000_000)

    def read_time(self, v: Any) -> datetime:
        """A time column read back, as an aware datetime in UTC."""
        if isinstance(v, datetime):
            return v if v.tzinfo else v.replace(tzinfo=timezone.utc)
        return datetime.fromtimestamp(int(v) / 1_000_000, tz=timezone.utc)


def text(v: Any) -> str:
    """A text column read back: MySQL's VARBINARY columns come as bytes."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8")
    return str(v)


def open_db(conn: Any, prefix: str = DEFAULT_PREFIX) -> DB:
    """Wrap conn, a DB-API connection or cursor of psycopg 3, sqlite3 or
    PyMySQL, detecting its database from its driver's module."""
    if conn is None:
        raise TypeError("the connection is None: pass a psycopg, sqlite3 or PyMySQL connection of yours")
    if hasattr(conn, "connection") and hasattr(conn, "fetchone"):
        conn = conn.connection  # a cursor: its connection
    module = type(conn).__module__.split(".")[0]
    dialect = {"psycopg": POSTGRES, "sqlite3": SQLITE, "pymysql": MYSQL}.get(module)
    if dialect is None:
        raise TypeError(
            f"{type(conn).__module__}.{type(conn).__name__} is no connection bqueue knows: "
            "pass a psycopg 3 connection (PostgreSQL), a sqlite3 connection (SQLite) "
            "or a PyMySQL connection (MySQL/MariaDB)"
        )
    return DB(conn=conn, dialect=dialect, prefix=validate_prefix(prefix))
