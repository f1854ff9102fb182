// health: what is waiting where, read in plain SQL: each queue's live
// jobs by state (as Go's Health.Queues counts them) and the rows waiting
// in the inbox, per kind (a pending row's queue is its definition's,
// which only the Go side knows, unless its options name one).

import { Conn, database, table } from "./db";
import { text } from "./enqueue";

/** One queue's live jobs by state (bq.QueueHealth's counts). */
export interface QueueHealth {
  queue: string;
  ready: number;
  running: number;
  scheduled: number;
  blocked: number;
  failed: number;
  /** PauseQueue stopped its claims; its ready jobs wait. */
  paused: boolean;
}

/** Pending inbox rows of one kind: enqueued, not yet decided by a Go process. */
export interface InboxKindHealth {
  kind: string;
  pending: number;
}

export interface Health {
  at: Date;
  /** Every queue with live jobs or a pause, ordered by name. */
  queues: QueueHealth[];
  /** Rows waiting in the inbox: a kind no live process defines stays here. */
  inboxPending: number;
  inbox: InboxKindHealth[];
}

/** health counts each queue's jobs by state and the inbox's pending rows. */
export async function health(conn: Conn): Promise<Health> {
  const db = database(conn);
  const p = (name: string) => table(db, name);
  const sum = (col: string) => (db.dialect === "postgres" ? `sum(${col})::int` : `CAST(sum(${col}) AS SIGNED)`);
  const counts = await db.query(`SELECT queue, ${sum("ready")} AS ready, ${sum("running")} AS running, ${sum("scheduled")} AS scheduled,
	${sum("blocked")} AS blocked, ${sum("failed")} AS failed FROM (
	SELECT queue, count(*) AS ready, 0 AS running, 0 AS scheduled, 0 AS blocked, 0 AS failed
		FROM ${p("ready_executions")} GROUP BY queue
	UNION ALL SELECT j.queue, 0, count(*), 0, 0, 0
		FROM ${p("claimed_executions")} c JOIN ${p("jobs")} j ON j.id = c.job_id GROUP BY j.queue
	UNION ALL SELECT queue, 0, 0, count(*), 0, 0 FROM ${p("scheduled_executions")} GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, count(*), 0 FROM ${p("blocked_executions")} GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, 0, count(*) FROM ${p("failed_executions")} GROUP BY queue
) t GROUP BY queue ORDER BY queue`);
  const paused = new Set((await db.query(`SELECT queue FROM ${p("paused_queues")}`)).rows.map((r) => text(r.queue)));
  const queues = new Map<string, QueueHealth>();
  for (const r of counts.rows) {
    const queue = text(r.queue);
    queues.set(queue, {
      queue, ready: Number(r.ready), running: Number(r.running), scheduled: Number(r.scheduled),
      blocked: Number(r.blocked), failed: Number(r.failed), paused: paused.has(queue),
    });
  }
  for (const queue of paused) {
    if (!queues.has(queue)) queues.set(queue, { queue, ready: 0, running: 0, scheduled: 0, blocked: 0, failed: 0, paused: true });
  }
  const inbox = (await db.query(`SELECT kind, count(*) AS n FROM ${p("inbox")} WHERE outcome IS NULL GROUP BY kind ORDER BY kind`))
    .rows.map((r) => ({ kind: text(r.kind), pending: Number(r.n) }));
  return {
    at: new Date(),
    queues: [...queues.values()].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0)),
    inboxPending: inbox.reduce((n, k) => n + k.pending, 0),
    inbox,
  };
}
