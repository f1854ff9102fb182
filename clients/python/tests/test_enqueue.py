"""enqueue, enqueue_many and wait against each database, with a bq Go
process admitting the rows: the outcomes are the Go enqueue's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

import bqueue
from conftest import Database


@dataclass
class Charge:
    tenant: str
    n: int


def count(conn, query: str) -> int:
    cur = conn.cursor()
    cur.execute(query)
    n = cur.fetchone()[0]
    cur.close()
    return int(n)


def check_outcomes(conn, want: dict) -> None:
    """Each handle's outcome is want's word, its detail holding want's text (None: any)."""
    for h, (word, detail) in want.items():
        got = bqueue.wait(conn, h)
        assert got.outcome == word, (h, got)
        if detail:
            assert detail in (got.detail or ""), (h, got)


def test_rolled_back_transaction_leaves_nothing(db: Database) -> None:
    conn = db.connect()
    cur = conn.cursor()
    cur.execute("CREATE TABLE orders (id INT NOT NULL)")
    conn.commit()
    cur.execute("INSERT INTO orders (id) VALUES (1)")
    h = bqueue.enqueue(conn, "py.charge", Charge("rb", 1))
    conn.rollback()
    assert count(conn, "SELECT count(*) FROM orders") == 0
    assert count(conn, "SELECT count(*) FROM bq_inbox") == 0
    with pytest.raises(LookupError):
        bqueue.outcome(conn, h)

    cur = conn.cursor()
    cur.execute("INSERT INTO orders (id) VALUES (2)")
    h = bqueue.enqueue(cur, "py.charge", Charge("ok", 2))  # a cursor does as well
    conn.commit()
    db.worker()
    got = bqueue.wait(conn, h)
    assert got.outcome == "ready" and got.job_id and got.stored
    assert count(conn, "SELECT count(*) FROM bq_jobs") == 1
    conn.commit()


def test_outside_a_transaction(db: Database) -> None:
    conn = db.connect(autocommit=True)
    db.worker()
    h = bqueue.enqueue(conn, "py.charge", {"tenant": "auto", "n": 1}, bqueue.Options(tags=["py"], metadata={"from": "python"}))
    got = bqueue.wait(conn, h)
    assert got.outcome == "ready", got


def test_outcomes_are_the_go_enqueues(db: Database) -> None:
    conn = db.connect()
    db.worker()
    # One slot per tenant, discarding the excess: the second is discarded.
    a, b = bqueue.enqueue_many(conn, "py.charge", [Charge("a", 1), Charge("a", 2)])
    dup1, dup2 = bqueue.enqueue_many(conn, "py.charge", [Charge("u", 1), Charge("u", 1)],
                                     bqueue.Options(unique=bqueue.Unique(by_args=True)))
    later = bqueue.enqueue(conn, "py.charge", Charge("later", 1), bqueue.Options(run_in=timedelta(hours=1)))
    blocked = bqueue.enqueue_many(conn, "py.charge", [Charge("k", 1), Charge("k", 2)], bqueue.Options(
        concurrency_key=bqueue.ConcurrencyKey("k", to=1, on_conflict="block"), priority=2))
    bad_type = bqueue.enqueue(conn, "py.charge", {"tenant": "x", "n": "one"})
    unknown = bqueue.enqueue(conn, "py.charge", {"tenant": "x", "n": 1, "amount": 5})
    missing = bqueue.enqueue(conn, "py.charge", {"tenant": "x"})
    bad_key = bqueue.enqueue(conn, "py.charge", Charge("x", 1),
                             bqueue.Options(concurrency_key=bqueue.ConcurrencyKey("x\x00y", to=1)))
    conn.commit()
    want = {
        a: ("ready", None), b: ("discarded", "no free slot"),
        dup1: ("ready", None), dup2: ("duplicate", None),
        later: ("scheduled", None),
        blocked[0]: ("ready", None), blocked[1]: ("blocked", None),
        bad_type: ("refused", "ChargeArgs.n"),  # the field, by name
        unknown: ("refused", 'unknown field "amount"'),
        missing: ("refused", 'field "n"'),
        bad_key: ("refused", "NUL"),
    }
    check_outcomes(conn, want)
    assert bqueue.wait(conn, dup2).job_id == bqueue.wait(conn, dup1).job_id


def test_bad_input_refused_before_the_database(db: Database) -> None:
    conn = db.connect()
    with pytest.raises(ValueError):
        bqueue.enqueue(conn, "py.charge", {}, prefix="Bad-Prefix")
    with pytest.raises(ValueError):
        bqueue.enqueue(conn, "", {})
    with pytest.raises(ValueError):
        from datetime import datetime
        bqueue.enqueue(conn, "py.charge", {}, bqueue.Options(run_at=datetime(2030, 1, 1)))  # no time zone
    with pytest.raises(TypeError):
        bqueue.enqueue(object(), "py.charge", {})
    with pytest.raises(TypeError):
        bqueue.enqueue(conn, "py.charge", {"x": object()})
    conn.rollback()


def test_slots(db: Database) -> None:
    conn = db.connect()
    db.worker()
    key = bqueue.ConcurrencyKey("s", to=3, on_conflict="block")
    heavy, blocked = bqueue.enqueue_many(conn, "py.charge", [Charge("s", 1), Charge("s", 2)], bqueue.Options(concurrency_key=key, slots=2))
    too_many = bqueue.enqueue(conn, "py.charge", Charge("s", 3), bqueue.Options(concurrency_key=key, slots=4))
    no_key = bqueue.enqueue(conn, "py.charge", Charge("s", 4), bqueue.Options(concurrency_key=bqueue.ConcurrencyKey("", to=3), slots=2))
    conn.commit()
    want = {
        heavy: ("ready", None), blocked: ("blocked", None),
        too_many: ("refused", "could never start: raise To to at least 4 or lower Slots"),
        no_key: ("refused", "give the job a Concurrency key, or drop Slots"),
    }
    check_outcomes(conn, want)
    with pytest.raises(ValueError, match="use 1 to 1000"):
        bqueue.Options(slots=1001).to_json()
    with pytest.raises(TypeError):
        bqueue.Options(slots=1.5).to_json()  # type: ignore[arg-type]
    assert bqueue.Options(slots=3).to_json() == '{"slots":3}'


def test_unknown_kind_waits_and_health_counts_it(db: Database) -> None:
    conn = db.connect()
    db.worker()
    h = bqueue.enqueue(conn, "py.nobody", {})
    ok = bqueue.enqueue(conn, "py.charge", Charge("h", 1))
    conn.commit()
    assert bqueue.wait(conn, ok).outcome == "ready"
    with pytest.raises(bqueue.WaitTimeout):
        bqueue.wait(conn, h, timeout=0.5)
    hl = bqueue.health(conn)
    conn.commit()
    assert hl.inbox_pending == 1
    assert [(q.queue, q.ready) for q in hl.queues] == [("py", 1)]


def test_depends_on(db: Database) -> None:
    conn = db.connect(autocommit=True)
    db.worker()
    first = bqueue.wait(conn, bqueue.enqueue(conn, "py.charge", Charge("dep-a", 1), bqueue.Options(run_in=timedelta(hours=1))))
    assert first.outcome == "scheduled" and first.job_id, first
    got = bqueue.wait(conn, bqueue.enqueue(conn, "py.charge", Charge("dep-b", 1), bqueue.Options(depends_on=[first.job_id])))
    assert got.outcome == "waiting" and got.stored and got.job_id, got
    missing = bqueue.wait(conn, bqueue.enqueue(conn, "py.charge", Charge("dep-c", 1), bqueue.Options(depends_on=[1 << 40])))
    assert missing.outcome == "refused" and "does not exist" in (missing.detail or ""), missing
    for bad in (bqueue.Options(depends_on=[0]), bqueue.Options(even_if_dependencies_fail=True)):
        with pytest.raises(ValueError):
            bad.to_json()
