"""bqueue: enqueue bq jobs from Python, in your own database transaction.

bq (https://github.com/bqueue/bq) is a Go job queue in your SQL database.
This package writes jobs to bq's inbox table on the connection you pass
(psycopg 3 for PostgreSQL, the standard sqlite3 module, PyMySQL for
MySQL/MariaDB); a bq Go process that defines the job's kind admits each
one through the Go enqueue, under the same limits, discards, uniques and
schedules as a Go enqueue, and stamps the row's outcome::

    import psycopg, bqueue

    conn = psycopg.connect(dsn)
    with conn.transaction():                    # yours: commit, or nothing
        conn.execute("INSERT INTO orders ...")
        h = bqueue.enqueue(conn, "billing.charge", {"order_id": 42},
                           bqueue.Options(concurrency_key=bqueue.ConcurrencyKey("tenant:acme", to=2)))
    print(bqueue.wait(conn, h))                   # Outcome(outcome='ready', job_id=...)

See docs/clients.md in bq's repository.
"""

from ._db import DEFAULT_PREFIX, validate_prefix
from .health import Health, QueueHealth, health
from .inbox import InboxHandle, Outcome, WaitTimeout, enqueue, enqueue_many, outcome, wait
from .options import ConcurrencyKey, KeyLimit, Options, RateKey, Unique
from .policies import InvalidArgument, Policy, PolicyConflict, StoredPolicy, list_policies, sync_policies

__all__ = [
    "DEFAULT_PREFIX", "validate_prefix",
    "enqueue", "enqueue_many", "outcome", "wait", "InboxHandle", "Outcome", "WaitTimeout",
    "Options", "ConcurrencyKey", "KeyLimit", "RateKey", "Unique",
    "sync_policies", "list_policies", "Policy", "StoredPolicy", "PolicyConflict", "InvalidArgument",
    "health", "Health", "QueueHealth",
]
