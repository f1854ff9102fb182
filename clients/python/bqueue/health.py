"""health: what waits in each queue, and in the inbox.

The counts of Go's Client.Health per queue (ready, running, scheduled,
blocked, failed, paused) and the inbox's pending rows, read with the same
SQL, one query after another rather than in one snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._db import DEFAULT_PREFIX, open_db, text

# sqltext.QueueCounts, summed per queue as Go's JobCountByQueue sums it.
_COUNTS = """
SELECT queue, sum(ready), sum(running), sum(scheduled), sum(blocked), sum(failed) FROM (
	SELECT queue, count(*) AS ready, 0 AS running, 0 AS scheduled, 0 AS blocked, 0 AS failed
		FROM {p}ready_executions GROUP BY queue
	UNION ALL SELECT j.queue, 0, count(*), 0, 0, 0
		FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id GROUP BY j.queue
	UNION ALL SELECT queue, 0, 0, count(*), 0, 0 FROM {p}scheduled_executions GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, count(*), 0 FROM {p}blocked_executions GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, 0, count(*) FROM {p}failed_executions GROUP BY queue
) t GROUP BY queue ORDER BY queue"""


@dataclass(frozen=True)
class QueueHealth:
    """bq.QueueHealth: one queue's live jobs by state."""

    queue: str
    ready: int = 0
    running: int = 0
    scheduled: int = 0
    blocked: int = 0
    failed: int = 0
    paused: bool = False


@dataclass(frozen=True)
class Health:
    """Every queue with live jobs or paused, ordered by name, and the
    inbox's rows no Go process has decided yet (``inbox_pending``: a count
    that stays up means no running process defines their kinds)."""

    queues: list[QueueHealth] = field(default_factory=list)
    inbox_pending: int = 0


def health(conn: Any, *, prefix: str = DEFAULT_PREFIX) -> Health:
    """Read the queues' counts and the inbox's pending rows."""
    db = open_db(conn, prefix)
    counts = {text(r[0]): [int(v or 0) for v in r[1:]] for r in db.rows(_COUNTS)}
    paused = {text(r[0]) for r in db.rows("SELECT queue FROM {p}paused_queues")}
    queues = [
        QueueHealth(q, *counts.get(q, [0, 0, 0, 0, 0]), paused=q in paused)  # type: ignore[arg-type]
        for q in sorted(set(counts) | paused)
    ]
    pending = int(db.rows("SELECT count(*) FROM {p}inbox WHERE outcome IS NULL")[0][0])
    return Health(queues=queues, inbox_pending=pending)
