"""sync_policies and list_policies: bq's stored queue policies.

sync_policies follows Go's Client.SyncPolicies statement for statement, in
the caller's transaction: the namespace's policies become exactly those
given, and a queue another namespace owns is refused. What the Go side
then does to the keys of waiting and running jobs (a changed per-key limit
promotes blocked jobs; a changed rate resizes the keys' rates) runs in Go:
a ``bq.policies`` inbox row, written in the same transaction, asks a Go
process to apply the stored policies of those queues.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Optional, Sequence

from ._db import DB, DEFAULT_PREFIX, MYSQL, SQLITE, open_db, text

MAX_RATE_LIMIT = 10_000  # bq.MaxRateLimit
_QUEUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")
_QUEUE_RULE = "use 1 to 128 ASCII letters, digits, '_', '-', '.' or ':', starting with a letter or digit"


def _q(s: str) -> str:
    """s quoted as Go's %q quotes it (for plain text)."""
    return json.dumps(s)


class PolicyConflict(Exception):
    """A queue's policy is owned by another namespace (bq.ErrPolicyConflict)."""


class InvalidArgument(ValueError):
    """Bad input, refused before the database (bq.ErrInvalidArgument)."""


@dataclass(frozen=True)
class Policy:
    """bq.Policy: one queue's limits; 0 (and None) set none."""

    queue: str
    max_active: int = 0
    max_active_per_key: int = 0
    max_blocked: int = 0
    max_starts_per_key: int = 0
    starts_period: Optional[timedelta] = None
    # Policy.MaxWait: the backpressure bound of keyed jobs that set no
    # Concurrency.MaxWait (whole microseconds); None for none.
    max_wait: Optional[timedelta] = None
    # Policy.Adaptive's Min: adaptive limits for keyed jobs that set no
    # Concurrency.Adaptive, with this floor; 0 for off.
    adaptive_min: int = 0

    @property
    def starts_period_ms(self) -> int:
        return 0 if self.starts_period is None else int(self.starts_period / timedelta(milliseconds=1))

    @property
    def max_wait_us(self) -> int:
        return 0 if self.max_wait is None else self.max_wait // timedelta(microseconds=1)


@dataclass(frozen=True)
class StoredPolicy(Policy):
    """bq.StoredPolicy: a policy as the database holds it."""

    namespace: str = ""
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None


_COLUMNS = ("queue, namespace, max_active, max_active_per_key, max_blocked, max_starts_per_key, starts_period_ms, "
            "max_wait_us, adaptive_min, created_at, updated_at")


def _stored(db: DB, r: tuple[Any, ...]) -> StoredPolicy:
    period, wait = int(r[6]), int(r[7])
    return StoredPolicy(
        queue=text(r[0]), namespace=text(r[1]), max_active=int(r[2]), max_active_per_key=int(r[3]),
        max_blocked=int(r[4]), max_starts_per_key=int(r[5]),
        starts_period=timedelta(milliseconds=period) if period else None,
        max_wait=timedelta(microseconds=wait) if wait else None, adaptive_min=int(r[8]),
        created_at=db.read_time(r[9]), updated_at=db.read_time(r[10]),
    )


def list_policies(conn: Any, *, prefix: str = DEFAULT_PREFIX) -> list[StoredPolicy]:
    """Every stored policy, ordered by queue (bq.Client.ListPolicies)."""
    db = open_db(conn, prefix)
    return [_stored(db, r) for r in db.rows(f"SELECT {_COLUMNS} FROM {{p}}policies ORDER BY queue")]


def _validate(namespace: str, policies: Sequence[Policy]) -> None:
    """Go's validatePolicies, with its wording."""
    errs: list[str] = []
    if not namespace:
        errs.append("the namespace is empty: name the owner of these policies, e.g. the service that syncs them")
    seen: set[str] = set()
    for p in policies:
        if p.queue in seen:
            errs.append(f"queue {_q(p.queue)} has two policies: give each queue one")
        seen.add(p.queue)
        if not isinstance(p.queue, str) or not _QUEUE.match(p.queue):
            errs.append(f"Policy.Queue: queue name {p.queue!r} is invalid: {_QUEUE_RULE}")
        if p.max_active < 0 or p.max_active_per_key < 0 or p.max_blocked < 0:
            errs.append(
                f"queue {_q(p.queue)}: MaxActive {p.max_active}, MaxActivePerKey {p.max_active_per_key}, "
                f"MaxBlocked {p.max_blocked}: use 0 (no limit) or more"
            )
        if p.max_wait is not None and (p.max_wait < timedelta(0) or p.max_wait % timedelta(microseconds=1)):
            errs.append(
                f"queue {_q(p.queue)}: MaxWait {p.max_wait}: use a positive duration of whole microseconds "
                "(the longest a job may be expected to wait for its slot), or 0 for no bound"
            )
        if p.adaptive_min < 0:
            errs.append(
                f"queue {_q(p.queue)}: Adaptive.Min {p.adaptive_min}: use 1 or more (the lowest a throttled key's "
                "limit falls to), or leave Adaptive nil for no adaptive limits"
            )
        elif p.max_active_per_key > 0 and p.adaptive_min > p.max_active_per_key:
            errs.append(
                f"queue {_q(p.queue)}: Adaptive.Min {p.adaptive_min} is above MaxActivePerKey {p.max_active_per_key}: "
                f"the limit could never fall; set Min at most {p.max_active_per_key}"
            )
        if p.max_starts_per_key != 0 or p.starts_period is not None:
            what = f"queue {_q(p.queue)}: Policy"
            if not 1 <= p.max_starts_per_key <= MAX_RATE_LIMIT:
                errs.append(f"{what} MaxStartsPerKey is {p.max_starts_per_key}: use 1 to {MAX_RATE_LIMIT} starts per period")
            if p.starts_period is None or p.starts_period < timedelta(milliseconds=1):
                errs.append(f"{what} StartsPeriod is {p.starts_period}: use 1ms or more")
            elif p.starts_period % timedelta(milliseconds=1):
                errs.append(f"{what} StartsPeriod is {p.starts_period}: use whole milliseconds, which the databases count")
    if errs:
        raise InvalidArgument("sync policies: " + "\n".join(errs))


def _values(p: Policy) -> list[int]:
    """The limit columns of p, in _COLUMNS' order."""
    return [p.max_active, p.max_active_per_key, p.max_blocked, p.max_starts_per_key, p.starts_period_ms,
            p.max_wait_us, p.adaptive_min]


def _same(have: StoredPolicy, want: Policy) -> bool:
    return _values(have) == _values(want)


def sync_policies(conn: Any, namespace: str, policies: Sequence[Policy], *, prefix: str = DEFAULT_PREFIX) -> None:
    """Make the database's policies of ``namespace`` exactly ``policies``,
    in the caller's transaction (bq.Client.SyncPolicies): new ones are
    created, changed ones updated, the namespace's unlisted ones deleted.
    A queue another namespace owns raises :class:`PolicyConflict`. On
    SQLite it begins the transaction (BEGIN IMMEDIATE) when none is open:
    it reads then writes, and needs the write lock from the start."""
    _validate(namespace, policies)
    db = open_db(conn, prefix)
    queues = [p.queue for p in policies]
    if db.dialect == SQLITE and not db.in_transaction():
        db.execute("BEGIN IMMEDIATE").close()
    lock = "" if db.dialect == SQLITE else " FOR UPDATE"
    marks = ", ".join(["?"] * len(queues)) or "NULL"
    stored = [_stored(db, r) for r in db.rows(
        f"SELECT {_COLUMNS} FROM {{p}}policies WHERE namespace = ? OR queue IN ({marks}) ORDER BY queue{lock}",
        [namespace, *queues])]
    by_queue = {s.queue: s for s in stored}
    now = db.now_stamp()
    written: list[str] = []  # queues whose keys and workers the Go side must bring in line
    for p in policies:
        have = by_queue.get(p.queue)
        values = _values(p)
        if have is not None and have.namespace != namespace:
            raise PolicyConflict(
                f"sync policies of namespace {_q(namespace)}: queue policy owned by another namespace: queue {_q(p.queue)} "
                f"belongs to namespace {_q(have.namespace)}, so namespace {_q(namespace)} cannot set it: "
                f"remove it from {_q(have.namespace)}'s policies first")
        if have is not None and _same(have, p):
            continue
        if have is not None:
            db.execute("UPDATE {p}policies SET max_active = ?, max_active_per_key = ?, max_blocked = ?, "
                       "max_starts_per_key = ?, starts_period_ms = ?, max_wait_us = ?, adaptive_min = ?, updated_at = ? "
                       "WHERE queue = ?",
                       [*values, now, p.queue]).close()
        else:
            conflict = " ON DUPLICATE KEY UPDATE queue = queue" if db.dialect == MYSQL else " ON CONFLICT (queue) DO NOTHING"
            cur = db.execute("INSERT INTO {p}policies (" + _COLUMNS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" + conflict,
                             [p.queue, namespace, *values, now, now])
            inserted = cur.rowcount == 1
            cur.close()
            if not inserted:
                raise PolicyConflict(f"sync policies of namespace {_q(namespace)}: queue policy owned by another namespace: "
                                     f"queue {_q(p.queue)} got a policy from another namespace meanwhile")
        written.append(p.queue)
    for s in stored:
        if s.namespace == namespace and s.queue not in queues:
            db.execute("DELETE FROM {p}policies WHERE queue = ?", [s.queue]).close()
            written.append(s.queue)
    # A changed per-key limit or rate applies to the keys of the queues'
    # unfinished jobs, and raised caps let more of their jobs run: the Go
    # side does both, as SyncPolicies does. Syncing the same set again
    # writes nothing.
    if written:
        db.execute("INSERT INTO {p}inbox (kind, args, options) VALUES (?, ?, ?)",
                   ["bq.policies", json.dumps({"queues": sorted(written)}), "{}"]).close()
        db.notify_inbox()
