"""enqueue, enqueue_many and wait: jobs written to bq's inbox.

A job is one row of ``{prefix}inbox`` (kind, args, options), written in the
caller's transaction: it exists only if that transaction commits. A bq Go
process that defines the kind then admits it through the Go enqueue and
stamps the row's outcome; :func:`wait` reads it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional, Sequence

from ._db import DEFAULT_PREFIX, MYSQL, POSTGRES, open_db
from .options import Options, args_json

#: Where the Go enqueue put the job, or why it stored none.
OutcomeWord = Literal["ready", "blocked", "scheduled", "waiting", "cancelled", "discarded", "duplicate", "refused", "applied"]


@dataclass(frozen=True)
class InboxHandle:
    """The inbox row of one enqueued job (its id, for :func:`wait`)."""

    id: int


@dataclass(frozen=True)
class Outcome:
    """A decided row: ``outcome`` is ready, blocked, scheduled, waiting (for
    the jobs of ``depends_on``) or cancelled (one of them had failed)
    (``job_id`` is the stored job), discarded (``detail`` says why), duplicate
    (``job_id`` is the job it duplicates) or refused (``detail`` is the Go
    error: bad args, naming the field, or bad options)."""

    id: int
    outcome: OutcomeWord
    job_id: Optional[int]
    detail: Optional[str]

    @property
    def stored(self) -> bool:
        """Whether a job was stored for the row."""
        return self.outcome in ("ready", "blocked", "scheduled", "waiting", "cancelled")


class WaitTimeout(TimeoutError):
    """No Go process decided the row in time: is one running that defines
    the job's kind?"""


def enqueue(conn: Any, kind: str, args: Any, options: Optional[Options] = None, *,
            prefix: str = DEFAULT_PREFIX) -> InboxHandle:
    """Enqueue one job of ``kind`` with ``args`` (a JSON-encodable mapping or
    a dataclass), in the caller's transaction on ``conn`` (a psycopg 3,
    sqlite3 or PyMySQL connection, or a cursor of one). Commit it to
    enqueue; roll it back and nothing is left. On an autocommit connection
    the row commits at once. ``options`` are Go's EnqueueOptions
    (:class:`bqueue.Options`)."""
    return enqueue_many(conn, kind, [args], options, prefix=prefix)[0]


def enqueue_many(conn: Any, kind: str, args: Sequence[Any], options: Optional[Options] = None, *,
                 prefix: str = DEFAULT_PREFIX) -> list[InboxHandle]:
    """Enqueue one job per item of ``args``, all with the same options, in
    one multi-row INSERT; the handles follow ``args``' order."""
    db = open_db(conn, prefix)
    if not isinstance(kind, str) or not kind:
        raise ValueError("kind is empty: name the job kind as bq.Define names it in Go")
    if isinstance(args, (str, bytes, Mapping)):
        raise TypeError("enqueue_many takes a sequence of args, one per job")
    opts = (options or Options()).to_json()
    rows = [args_json(a) for a in args]
    if not rows:
        return []
    values = ", ".join(["(?, ?, ?)"] * len(rows))
    params: list[Any] = []
    for a in rows:
        params += [kind, a, opts]
    head = "INSERT INTO {p}inbox (kind, args, options) VALUES " + values
    if db.dialect == POSTGRES:
        ids = [r[0] for r in db.rows(head + " RETURNING id", params)]
    else:
        cur = db.execute(head, params)
        last = int(cur.lastrowid)
        cur.close()
        # One INSERT of known rows takes consecutive ids: MySQL reports
        # the first, SQLite the last.
        first = last if db.dialect == MYSQL else last - len(rows) + 1
        ids = list(range(first, first + len(rows)))
    db.notify_inbox()
    return [InboxHandle(id=int(i)) for i in ids]


def outcome(conn: Any, handle: InboxHandle | int, *, prefix: str = DEFAULT_PREFIX) -> Optional[Outcome]:
    """The row's outcome, or None while it is pending. Raises LookupError
    when the row is gone: rolled back, or deleted after the fleet's
    retention."""
    db = open_db(conn, prefix)
    rid = handle.id if isinstance(handle, InboxHandle) else int(handle)
    rows = db.rows("SELECT outcome, job_id, detail FROM {p}inbox WHERE id = ?", (rid,))
    if not rows:
        raise LookupError(f"inbox row {rid} does not exist: its transaction rolled back, or it was decided and deleted")
    word, job_id, detail = rows[0]
    if word is None:
        return None
    return Outcome(id=rid, outcome=word, job_id=None if job_id is None else int(job_id), detail=detail)


def wait(
    conn: Any,
    handle: InboxHandle | int,
    *,
    timeout: float = 10.0,
    poll: float = 0.02,
    prefix: str = DEFAULT_PREFIX,
) -> Outcome:
    """Poll the row until a Go process decides it. Call it after the
    enqueue's transaction committed: unless ``conn`` is in autocommit, it
    commits after each read, so that the next read sees what committed
    since (MySQL's REPEATABLE READ would not). Raises :class:`WaitTimeout`."""
    db = open_db(conn, prefix)
    deadline = time.monotonic() + timeout
    while True:
        got = outcome(conn, handle, prefix=prefix)
        if not db.autocommit():
            db.conn.commit()
        if got is not None:
            return got
        if time.monotonic() >= deadline:
            rid = handle.id if isinstance(handle, InboxHandle) else handle
            raise WaitTimeout(
                f"inbox row {rid} is still pending after {timeout}s: is a bq Go process running that defines its kind?"
            )
        time.sleep(poll)
