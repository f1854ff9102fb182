// syncPolicies / listPolicies: bq's stored queue policies, read and
// written in plain SQL on the policies table by the rules of Go's
// Client.SyncPolicies and ListPolicies (policy.go): desired state per
// namespace, pruned, a queue owned by another namespace refused.

import { Conn, Database, database, inTransaction, table } from "./db";
import { PolicyConflictError } from "./errors";
import { text } from "./enqueue";
import { checkInt, checkQueue, checkRate, fail, quoted } from "./validate";

/** An operations limit for one queue (bq.Policy). Absent or 0 fields set no limit. */
export interface Policy {
  queue: string;
  /** Running jobs of the queue across every process. */
  maxActive?: number;
  /** The limit of keyed jobs of the queue whose definition sets no Concurrency.To. */
  maxActivePerKey?: number;
  /** Each key's backlog cap: further enqueues of a key with that many waiting are discarded. */
  maxBlocked?: number;
  /** Default rate of the queue's rated jobs: starts per startsPeriodMs (set both, or neither). */
  maxStartsPerKey?: number;
  startsPeriodMs?: number;
  /**
   * Backpressure of keyed jobs whose definition sets no Concurrency.MaxWait:
   * a job due now expected to wait longer for its slot is refused (whole
   * milliseconds; a Go policy's sub-millisecond part reads as a fraction).
   */
  maxWaitMs?: number;
  /** Adaptive limits for keyed jobs whose definition sets no Concurrency.Adaptive: the floor a throttled key's limit falls to (Adaptive.Min); 0 for off. */
  adaptiveMin?: number;
}

/** A policy as the database holds it (bq.StoredPolicy). */
export interface StoredPolicy extends Required<Policy> {
  namespace: string;
  createdAt: Date;
  updatedAt: Date;
}

const INT32_MAX = 2147483647;
const COLUMNS = "queue, namespace, max_active, max_active_per_key, max_blocked, max_starts_per_key, starts_period_ms, max_wait_us, adaptive_min, created_at, updated_at";

type Limits = Required<Omit<Policy, "queue">>;

function limitsOf(p: Policy): Limits {
  return {
    maxActive: p.maxActive ?? 0, maxActivePerKey: p.maxActivePerKey ?? 0, maxBlocked: p.maxBlocked ?? 0,
    maxStartsPerKey: p.maxStartsPerKey ?? 0, startsPeriodMs: p.startsPeriodMs ?? 0, maxWaitMs: p.maxWaitMs ?? 0,
    adaptiveMin: p.adaptiveMin ?? 0,
  };
}

/** checkPolicies is Go's validatePolicies: every problem at once. */
function checkPolicies(namespace: string, policies: Policy[]): void {
  const errs: string[] = [];
  const note = (f: () => void) => {
    try {
      f();
    } catch (e) {
      errs.push((e as Error).message);
    }
  };
  if (typeof namespace !== "string" || namespace === "") {
    errs.push("the namespace is empty: name the owner of these policies, e.g. the service that syncs them");
  }
  if (!Array.isArray(policies)) fail(`sync policies: policies is ${quoted(policies)}: give an array of Policy (empty to remove the namespace's)`);
  const seen = new Set<string>();
  for (const p of policies) {
    if (p === null || typeof p !== "object") {
      errs.push(`a policy is ${quoted(p)}: give {queue, maxActive?, maxActivePerKey?, maxBlocked?, maxStartsPerKey?, startsPeriodMs?, maxWaitMs?, adaptiveMin?}`);
      continue;
    }
    if (seen.has(p.queue)) errs.push(`queue ${quoted(p.queue)} has two policies: give each queue one`);
    seen.add(p.queue);
    note(() => checkQueue(p.queue, "Policy.queue"));
    const l = limitsOf(p);
    for (const f of ["maxActive", "maxActivePerKey", "maxBlocked"] as const) {
      note(() => checkInt(l[f], `queue ${quoted(p.queue)}: ${f}`, 0, INT32_MAX, "use 0 (no limit) or more"));
    }
    note(() => checkInt(l.maxWaitMs, `queue ${quoted(p.queue)}: maxWaitMs`, 0, Number.MAX_SAFE_INTEGER / 1000,
      "use whole milliseconds (the longest a job may be expected to wait for its slot), or 0 for no bound"));
    note(() => checkInt(l.adaptiveMin, `queue ${quoted(p.queue)}: adaptiveMin`, 0, INT32_MAX,
      "use 1 or more (the lowest a throttled key's limit falls to), or 0 for no adaptive limits"));
    if (l.maxActivePerKey > 0 && l.adaptiveMin > l.maxActivePerKey) {
      errs.push(`queue ${quoted(p.queue)}: Adaptive.Min ${l.adaptiveMin} is above MaxActivePerKey ${l.maxActivePerKey}: the limit could never fall; set Min at most ${l.maxActivePerKey}`);
    }
    note(() => checkRate(`queue ${quoted(p.queue)}: Policy`, "maxStartsPerKey", "startsPeriodMs", l.maxStartsPerKey, l.startsPeriodMs,
      "for no default rate"));
  }
  if (errs.length > 0) fail(`sync policies: ${errs.join("; ")}`);
}

function stamp(db: Database, v: unknown): Date {
  if (v instanceof Date) return v;
  return new Date(Number(v) / 1000); // MySQL: Unix microseconds
}

function storedOf(db: Database, r: Record<string, unknown>): StoredPolicy {
  return {
    queue: text(r.queue), namespace: text(r.namespace), maxActive: Number(r.max_active), maxActivePerKey: Number(r.max_active_per_key),
    maxBlocked: Number(r.max_blocked), maxStartsPerKey: Number(r.max_starts_per_key), startsPeriodMs: Number(r.starts_period_ms),
    maxWaitMs: Number(r.max_wait_us) / 1000, adaptiveMin: Number(r.adaptive_min),
    createdAt: stamp(db, r.created_at), updatedAt: stamp(db, r.updated_at),
  };
}

function same(have: StoredPolicy, want: Limits): boolean {
  return have.maxActive === want.maxActive && have.maxActivePerKey === want.maxActivePerKey && have.maxBlocked === want.maxBlocked &&
    have.maxStartsPerKey === want.maxStartsPerKey && have.startsPeriodMs === want.startsPeriodMs &&
    have.maxWaitMs === want.maxWaitMs && have.adaptiveMin === want.adaptiveMin;
}

/** bind spells the nth placeholder (from 1) of db's dialect. */
function bind(db: Database, n: number): string {
  return db.dialect === "postgres" ? `$${n}` : "?";
}

/**
 * syncPolicies makes the stored policies of namespace exactly policies,
 * in one transaction of its own (on conn, or a connection of the pool
 * conn is; not inside a transaction of yours): new ones are created,
 * changed ones updated, and those of namespace not listed deleted.
 * A queue whose policy belongs to another namespace is refused with a
 * PolicyConflictError and nothing is written. Syncing the same set again
 * writes nothing.
 *
 * Unlike Go's SyncPolicies, it does not re-resolve at once the limits of
 * jobs already waiting: a changed maxActivePerKey or rate reaches a key
 * at its next admission or release on the Go side.
 */
export async function syncPolicies(conn: Conn, namespace: string, policies: Policy[]): Promise<void> {
  checkPolicies(namespace, policies);
  const queues = policies.map((p) => p.queue);
  await inTransaction(conn, async (db) => {
    const t = table(db, "policies");
    const now = db.dialect === "postgres" ? new Date() : Date.now() * 1000;
    const marks = queues.map((_, i) => bind(db, i + 2)).join(", ");
    const lock = db.dialect === "postgres"
      ? `SELECT ${COLUMNS} FROM ${t} WHERE namespace = $1 OR queue = ANY($2::text[]) ORDER BY queue FOR UPDATE`
      : `SELECT ${COLUMNS} FROM ${t} WHERE namespace = ?${queues.length > 0 ? ` OR queue IN (${marks})` : ""} ORDER BY queue FOR UPDATE`;
    const stored = (await db.query(lock, db.dialect === "postgres" ? [namespace, queues] : [namespace, ...queues])).rows.map((r) => storedOf(db, r));
    const byQueue = new Map(stored.map((s) => [s.queue, s]));
    for (const p of policies) {
      const want = limitsOf(p);
      const have = byQueue.get(p.queue);
      const limits = [want.maxActive, want.maxActivePerKey, want.maxBlocked, want.maxStartsPerKey, want.startsPeriodMs,
        want.maxWaitMs * 1000, want.adaptiveMin];
      if (have && have.namespace !== namespace) {
        throw new PolicyConflictError(`sync policies of namespace ${quoted(namespace)}: queue policy owned by another namespace: queue ${quoted(p.queue)} belongs to namespace ${quoted(have.namespace)}, so namespace ${quoted(namespace)} cannot set it: remove it from ${quoted(have.namespace)}'s policies first`, p.queue, have.namespace);
      } else if (have && same(have, want)) {
        continue;
      } else if (have) {
        const set = ["max_active", "max_active_per_key", "max_blocked", "max_starts_per_key", "starts_period_ms", "max_wait_us",
          "adaptive_min", "updated_at"].map((c, i) => `${c} = ${bind(db, i + 1)}`).join(", ");
        await db.query(`UPDATE ${t} SET ${set} WHERE queue = ${bind(db, 9)}`, [...limits, now, p.queue]);
      } else if (!(await insertPolicy(db, t, [p.queue, namespace, ...limits, now, now]))) {
        throw new PolicyConflictError(`sync policies of namespace ${quoted(namespace)}: queue policy owned by another namespace: queue ${quoted(p.queue)} got a policy from another namespace meanwhile`, p.queue, "");
      }
    }
    for (const s of stored) {
      if (s.namespace === namespace && !queues.includes(s.queue)) {
        await db.query(`DELETE FROM ${t} WHERE queue = ${bind(db, 1)}`, [s.queue]);
      }
    }
  });
}

/** insertPolicy inserts a row, or reports false when the queue has one already. */
async function insertPolicy(db: Database, t: string, values: unknown[]): Promise<boolean> {
  const marks = values.map((_, i) => bind(db, i + 1)).join(", ");
  const sql = `INSERT INTO ${t} (${COLUMNS}) VALUES (${marks})`;
  if (db.dialect === "postgres") {
    return (await db.query(`${sql} ON CONFLICT (queue) DO NOTHING`, values)).affected === 1;
  }
  try {
    await db.query(sql, values);
    return true;
  } catch (e) {
    // ER_DUP_ENTRY (1062): mysql and mysql2 both name it errno.
    if ((e as { errno?: number }).errno === 1062) return false;
    throw e;
  }
}

/** listPolicies returns every stored policy, ordered by queue. */
export async function listPolicies(conn: Conn): Promise<StoredPolicy[]> {
  const db = database(conn);
  const r = await db.query(`SELECT ${COLUMNS} FROM ${table(db, "policies")} ORDER BY queue`);
  return r.rows.map((row) => storedOf(db, row));
}
