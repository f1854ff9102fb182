// enqueue and enqueueMany insert inbox rows (kind, args, options) on the
// caller's connection, so inside its transaction when it has one; wait
// polls a row until a bq Go process has decided it.
//
// On PostgreSQL the same statement runs pg_notify('<prefix>inbox', ''):
// one statement, so even outside a transaction the row and the wake-up
// commit together, and a rolled-back transaction sends nothing (NOTIFY
// is delivered at commit).

import { Conn, Database, database, table } from "./db";
import { InboxRowNotFoundError, InvalidArgumentError, WaitTimeoutError } from "./errors";
import { EnqueueOptions, encodeOptions } from "./options";
import { checkKind, encodeArgs } from "./validate";

/** The inbox row of one enqueue: wait(conn, handle.id) reads its outcome. */
export interface InboxHandle {
  id: number;
}

/**
 * What became of a row (EnqueueResult's words): ready, blocked,
 * scheduled, waiting (for the jobs of dependsOn) or cancelled (one of
 * them had failed) (jobId is the stored job); discarded (detail says why);
 * duplicate (jobId is the job it duplicates); refused (detail is the
 * error: bad options, args that do not decode, a refused key...).
 */
export type OutcomeWord = "ready" | "blocked" | "scheduled" | "waiting" | "cancelled" | "discarded" | "duplicate" | "refused";

export interface Outcome {
  outcome: OutcomeWord;
  jobId: number | null;
  detail: string | null;
}

export interface WaitOptions {
  /** Give up after this many ms (default 30000) with a WaitTimeoutError. 0: read once. */
  timeoutMs?: number;
  /** The first pause between reads, doubling up to 1 s (default 50). */
  pollMs?: number;
}

/**
 * enqueue inserts one job for bq's Go processes to admit: kind names a
 * Go definition (bq.Define), args is the object its args type decodes,
 * options are the enqueue's (see EnqueueOptions). Pass the connection of
 * your open transaction to enqueue inside it: the row exists only if it
 * commits. Returns the inbox row's id; wait() reads what became of it.
 */
export async function enqueue(conn: Conn, kind: string, args: object, options?: EnqueueOptions): Promise<InboxHandle> {
  const [handle] = await insert(database(conn), checkKind(kind), [encodeArgs(args)], encodeOptions(options));
  return handle;
}

/**
 * enqueueMany inserts one job per element of argsList, all with the same
 * kind and options, in one multi-row INSERT; the handles are in the
 * order of argsList. An empty list inserts nothing.
 */
export async function enqueueMany(conn: Conn, kind: string, argsList: object[], options?: EnqueueOptions): Promise<InboxHandle[]> {
  if (!Array.isArray(argsList)) {
    throw new InvalidArgumentError(`argsList is ${typeof argsList}: give an array of args objects, one per job`);
  }
  const k = checkKind(kind);
  const args = argsList.map((a, i) => encodeArgs(a, `argsList[${i}]`));
  const opts = encodeOptions(options);
  if (args.length === 0) return [];
  return insert(database(conn), k, args, opts);
}

async function insert(db: Database, kind: string, args: string[], options: string): Promise<InboxHandle[]> {
  const inbox = table(db, "inbox");
  let ids: number[];
  if (db.dialect === "postgres") {
    // The notify runs once (an uncorrelated subquery); ORDER BY n keeps
    // the ids in argsList's order.
    const r = await db.query(
      `WITH ins AS (INSERT INTO ${inbox} (kind, args, options)
	SELECT $1::text, a, $3::text FROM unnest($2::text[]) WITH ORDINALITY AS t(a, n) ORDER BY n RETURNING id)
SELECT ins.id FROM ins CROSS JOIN (SELECT pg_notify($4, '')) AS notified ORDER BY ins.id`,
      [kind, args, options, inbox],
    );
    ids = r.rows.map((row) => Number(row.id));
  } else {
    const values = args.map(() => "(?, ?, ?)").join(", ");
    const params = args.flatMap((a) => [kind, a, options]);
    const sql = `INSERT INTO ${inbox} (kind, args, options) VALUES ${values}`;
    // One row: LAST_INSERT_ID is its id, whatever the server.
    const caps = args.length === 1 ? { returning: false, increment: 1 } : await mysqlCaps(db);
    if (caps.returning) {
      const r = await db.query(`${sql} RETURNING id`, params);
      ids = r.rows.map((row) => Number(row.id));
    } else {
      // MySQL has no RETURNING: a multi-row INSERT of known size takes
      // its ids in one block from the first (LAST_INSERT_ID), spaced by
      // auto_increment_increment.
      const r = await db.query(sql, params);
      ids = args.map((_, i) => r.insertId + i * caps.increment);
    }
  }
  if (ids.length !== args.length) {
    throw new Error(`insert into ${inbox}: ${args.length} rows sent, ${ids.length} ids returned`);
  }
  return ids.map((id) => ({ id }));
}

interface MysqlCaps {
  returning: boolean;
  increment: number;
}

const capsOf = new WeakMap<object, Promise<MysqlCaps>>();

/** mysqlCaps reads once per connection whether INSERT ... RETURNING works (MariaDB 10.5+). */
function mysqlCaps(db: Database): Promise<MysqlCaps> {
  let caps = capsOf.get(db.conn);
  if (!caps) {
    caps = db.query("SELECT VERSION() AS v, @@auto_increment_increment AS inc").then((r) => {
      const v = String(r.rows[0].v);
      const m = /^(\d+)\.(\d+)/.exec(v);
      const returning = /mariadb/i.test(v) && m !== null && (Number(m[1]) > 10 || (Number(m[1]) === 10 && Number(m[2]) >= 5));
      return { returning, increment: Number(r.rows[0].inc) || 1 };
    });
    capsOf.set(db.conn, caps);
    caps.catch(() => capsOf.delete(db.conn));
  }
  return caps;
}

/** text reads a column that a driver may hand back as a Buffer (MySQL's binary columns). */
export function text(v: unknown): string {
  return typeof v === "string" ? v : String(v);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * wait reads inbox row id until a bq Go process has decided it and
 * returns the decision. Call it on a connection outside the transaction
 * that enqueued (after its commit): the Go side sees only committed rows.
 * Decided rows are kept for a while (the fleet's retention), then
 * deleted.
 */
export async function wait(conn: Conn, id: number, options: WaitOptions = {}): Promise<Outcome> {
  const db = database(conn);
  if (!Number.isSafeInteger(id) || id < 1) {
    throw new InvalidArgumentError(`wait: id is ${JSON.stringify(id)}: give the id of an InboxHandle that enqueue returned`);
  }
  const timeoutMs = options.timeoutMs ?? 30_000;
  let pause = Math.max(options.pollMs ?? 50, 1);
  const deadline = Date.now() + timeoutMs;
  const inbox = table(db, "inbox");
  const sql = `SELECT outcome, job_id, detail FROM ${inbox} WHERE id = ${db.dialect === "postgres" ? "$1" : "?"}`;
  for (;;) {
    const r = await db.query(sql, [id]);
    if (r.rows.length === 0) {
      throw new InboxRowNotFoundError(`wait: ${inbox} has no row ${id}: its transaction did not commit (or rolled back), or it was decided long ago and deleted after the retention`, id);
    }
    const row = r.rows[0];
    if (row.outcome !== null && row.outcome !== undefined) {
      return {
        outcome: text(row.outcome) as OutcomeWord,
        jobId: row.job_id === null || row.job_id === undefined ? null : Number(row.job_id),
        detail: row.detail === null || row.detail === undefined ? null : text(row.detail),
      };
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new WaitTimeoutError(`wait: inbox row ${id} is still pending after ${timeoutMs} ms: is a bq process running that defines its kind (a Client with workers, or bq dispatcher), on the same database and prefix ${JSON.stringify(db.prefix)}? bq status counts the rows waiting in the inbox`, id);
    }
    await sleep(Math.min(pause, left));
    pause = Math.min(pause * 2, 1000);
  }
}
