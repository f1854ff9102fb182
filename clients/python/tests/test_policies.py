"""sync_policies, list_policies: Go's rules, and Go's follow-up (a raised
per-key limit promotes blocked jobs)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

import bqueue
from bqueue import Policy
from conftest import Database


def test_sync_list_and_conflict(db: Database) -> None:
    conn = db.connect()
    bqueue.sync_policies(conn, "svc", [Policy("mail", max_active=20, max_active_per_key=3),
                                       Policy("calls", max_starts_per_key=10, starts_period=timedelta(seconds=1))])
    conn.commit()
    got = bqueue.list_policies(conn)
    assert [(p.queue, p.namespace, p.max_active, p.max_active_per_key, p.max_starts_per_key, p.starts_period) for p in got] == [
        ("calls", "svc", 0, 0, 10, timedelta(seconds=1)), ("mail", "svc", 20, 3, 0, None)]
    assert got[0].created_at is not None and got[0].updated_at is not None
    with pytest.raises(bqueue.PolicyConflict, match='queue "mail" belongs to namespace "svc"'):
        bqueue.sync_policies(conn, "other", [Policy("mail", max_active=1)])
    conn.rollback()
    # The namespace's unlisted policies are pruned; the same set again writes nothing.
    bqueue.sync_policies(conn, "svc", [Policy("mail", max_active=20, max_active_per_key=3)])
    conn.commit()
    before = bqueue.list_policies(conn)
    bqueue.sync_policies(conn, "svc", [Policy("mail", max_active=20, max_active_per_key=3)])
    conn.commit()
    assert bqueue.list_policies(conn) == before and [p.queue for p in before] == ["mail"]
    conn.commit()
    with pytest.raises(bqueue.InvalidArgument, match="namespace is empty"):
        bqueue.sync_policies(conn, "", [])
    with pytest.raises(bqueue.InvalidArgument, match="MaxStartsPerKey"):
        bqueue.sync_policies(conn, "svc", [Policy("x", max_starts_per_key=0, starts_period=timedelta(seconds=1))])
    with pytest.raises(bqueue.InvalidArgument, match="queue name"):
        bqueue.sync_policies(conn, "svc", [Policy("bad queue")])
    conn.rollback()


def test_max_wait_and_adaptive(db: Database) -> None:
    """Policy.MaxWait and Policy.Adaptive: stored and read back as Go's
    SyncPolicies stores them, refused where Go refuses them."""
    conn = db.connect()
    bqueue.sync_policies(conn, "svc", [Policy("mw", max_active_per_key=4, max_wait=timedelta(milliseconds=1500), adaptive_min=2)])
    conn.commit()
    got = bqueue.list_policies(conn)
    assert [(p.queue, p.max_wait, p.adaptive_min) for p in got] == [("mw", timedelta(milliseconds=1500), 2)]
    bqueue.sync_policies(conn, "svc", [Policy("mw", max_active_per_key=4)])
    conn.commit()
    assert [(p.max_wait, p.adaptive_min) for p in bqueue.list_policies(conn)] == [(None, 0)]
    conn.commit()
    with pytest.raises(bqueue.InvalidArgument, match="MaxWait -1 day.*0 for no bound"):
        bqueue.sync_policies(conn, "svc", [Policy("x", max_wait=timedelta(seconds=-1))])
    with pytest.raises(bqueue.InvalidArgument, match="Adaptive.Min 5 is above MaxActivePerKey 4"):
        bqueue.sync_policies(conn, "svc", [Policy("x", max_active_per_key=4, adaptive_min=5)])
    with pytest.raises(bqueue.InvalidArgument, match="Adaptive.Min -1"):
        bqueue.sync_policies(conn, "svc", [Policy("x", adaptive_min=-1)])
    conn.rollback()


def test_raised_per_key_limit_promotes(db: Database) -> None:
    conn = db.connect()
    db.worker()
    bqueue.sync_policies(conn, "svc", [Policy("pyq", max_active_per_key=1)])
    hs = bqueue.enqueue_many(conn, "py.perkey", [{"tenant": "t", "n": i} for i in range(3)])
    conn.commit()
    assert [bqueue.wait(conn, h).outcome for h in hs] == ["ready", "blocked", "blocked"]
    bqueue.sync_policies(conn, "svc", [Policy("pyq", max_active_per_key=3)])
    conn.commit()
    deadline = time.monotonic() + 15
    while True:
        q = {x.queue: x for x in bqueue.health(conn).queues}["pyq"]
        conn.commit()
        if (q.ready, q.blocked) == (3, 0) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert (q.ready, q.blocked) == (3, 0), q
