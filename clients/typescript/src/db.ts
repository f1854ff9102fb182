// What the client needs of a database connection, and the adapters from
// the drivers users already have: pg (node-postgres) and mysql (or
// mysql2, whose callback and promise query() both fit). The client
// never opens a connection of its own: it runs on the caller's, inside
// the caller's transaction when there is one.

import { InvalidArgumentError } from "./errors";

export type Dialect = "postgres" | "mysql";

/** A pg Client, PoolClient or Pool: what the client calls of it. */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;
}

/**
 * A mysql (or mysql2) Connection, PoolConnection or Pool: query with a
 * callback (mysql, mysql2) or returning a promise of [rows, fields]
 * (mysql2/promise). escapeId tells it from a pg client.
 */
export interface MysqlQueryable {
  query(sql: string, values: unknown[], callback?: (err: Error | null, results?: any) => void): unknown;
  escapeId(id: string): string;
}

export type Queryable = PgQueryable | MysqlQueryable;

/** One statement's answer, the same from both drivers. */
export interface Result {
  rows: Record<string, unknown>[];
  /** Rows written (pg rowCount, mysql affectedRows). */
  affected: number;
  /** mysql's first generated id of an INSERT. */
  insertId: number;
}

const BRAND = Symbol.for("bq.Database");

/** A connection with its dialect and bq's table prefix: what every call takes (or a bare pg/mysql connection, prefix bq_). */
export interface Database {
  readonly [BRAND]: true;
  readonly dialect: Dialect;
  /** The table-name prefix of bq's tables, as the Go side's Config.Prefix (default "bq_"). */
  readonly prefix: string;
  /** The connection or pool given. */
  readonly conn: Queryable;
  query(sql: string, params?: unknown[]): Promise<Result>;
}

export interface DatabaseOptions {
  /** bq's table prefix (Go's Config.Prefix, `bq migrate --prefix`); default "bq_". */
  prefix?: string;
}

/** What the calls accept: a Database, or a bare pg / mysql connection or pool. */
export type Conn = Database | Queryable;

export const DEFAULT_PREFIX = "bq_";

function checkPrefix(prefix: string): string {
  if (typeof prefix !== "string" || !/^[a-z][a-z0-9_]{0,30}$/.test(prefix)) {
    throw new InvalidArgumentError(`invalid table prefix ${JSON.stringify(prefix)}: use lower-case letters, digits and underscores, starting with a letter (at most 31 characters), e.g. "bq_", as bq migrate --prefix took it`);
  }
  return prefix;
}

function thenable(v: unknown): v is Promise<unknown> {
  return v !== null && typeof v === "object" && typeof (v as { then?: unknown }).then === "function";
}

function pgQuery(conn: PgQueryable) {
  return async (sql: string, params: unknown[] = []): Promise<Result> => {
    const r = await conn.query(sql, params);
    return { rows: r.rows, affected: r.rowCount ?? 0, insertId: 0 };
  };
}

function mysqlQuery(conn: MysqlQueryable) {
  return (sql: string, params: unknown[] = []): Promise<Result> =>
    new Promise<Result>((resolve, reject) => {
      const done = (results: any) => {
        if (Array.isArray(results)) resolve({ rows: results, affected: 0, insertId: 0 });
        else resolve({ rows: [], affected: Number(results?.affectedRows ?? 0), insertId: Number(results?.insertId ?? 0) });
      };
      const ret = conn.query(sql, params, (err, results) => (err ? reject(err) : done(results)));
      // mysql2/promise ignores the callback and answers [rows, fields].
      if (thenable(ret)) ret.then((r) => done((r as unknown[])[0]), reject);
    });
}

/** postgres wraps a pg Client, PoolClient or Pool, with bq's table prefix. */
export function postgres(conn: PgQueryable, options: DatabaseOptions = {}): Database {
  if (conn === null || typeof conn !== "object" || typeof conn.query !== "function") {
    throw new InvalidArgumentError("postgres(conn): conn has no query(): pass a pg Client, PoolClient or Pool");
  }
  return { [BRAND]: true, dialect: "postgres", prefix: checkPrefix(options.prefix ?? DEFAULT_PREFIX), conn, query: pgQuery(conn) };
}

/** mysql wraps a mysql or mysql2 Connection, PoolConnection or Pool, with bq's table prefix. */
export function mysql(conn: MysqlQueryable, options: DatabaseOptions = {}): Database {
  if (conn === null || typeof conn !== "object" || typeof conn.query !== "function") {
    throw new InvalidArgumentError("mysql(conn): conn has no query(): pass a mysql or mysql2 Connection, PoolConnection or Pool");
  }
  return { [BRAND]: true, dialect: "mysql", prefix: checkPrefix(options.prefix ?? DEFAULT_PREFIX), conn, query: mysqlQuery(conn) };
}

/**
 * database returns conn as a Database: itself when wrapped already, else
 * a mysql connection (it has escapeId) or a pg one, with prefix bq_.
 */
export function database(conn: Conn): Database {
  if (conn !== null && typeof conn === "object" && (conn as Database)[BRAND]) return conn as Database;
  if (conn === null || typeof conn !== "object" || typeof (conn as Queryable).query !== "function") {
    throw new InvalidArgumentError(`conn is ${conn === null ? "null" : typeof conn}: pass a pg Client/PoolClient/Pool or a mysql Connection/Pool (or wrap one with postgres(conn, {prefix}) or mysql(conn, {prefix}))`);
  }
  if (typeof (conn as MysqlQueryable).escapeId === "function") return mysql(conn as MysqlQueryable);
  return postgres(conn as PgQueryable);
}

/** A connection the caller lends for one transaction, and how to give it back. */
interface Lent {
  db: Database;
  release(): void;
}

function call<T>(fn: (cb: (err: Error | null, v?: T) => void) => unknown): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const ret = fn((err, v) => (err ? reject(err) : resolve(v as T)));
    if (thenable(ret)) ret.then((v) => resolve(v as T), reject);
  });
}

/** lend takes one connection of a pool (pg Pool, mysql Pool), or conn itself. */
async function lend(db: Database): Promise<Lent> {
  const c = db.conn as any;
  const wrap = (conn: Queryable) => (db.dialect === "postgres" ? postgres(conn as PgQueryable, db) : mysql(conn as MysqlQueryable, db));
  if (db.dialect === "postgres" && typeof c.connect === "function" && "totalCount" in c) {
    const client = await c.connect();
    return { db: wrap(client), release: () => client.release() };
  }
  if (db.dialect === "mysql" && typeof c.getConnection === "function") {
    const conn = await call<any>((cb) => c.getConnection(cb));
    return { db: wrap(conn), release: () => conn.release() };
  }
  return { db, release: () => {} };
}

/**
 * inTransaction runs fn in a transaction of its own, on conn or on a
 * connection of the pool conn is, and commits it; any error rolls it
 * back. conn must not be inside a transaction of the caller's: BEGIN
 * there would commit it on MySQL and be ignored on PostgreSQL.
 */
export async function inTransaction<T>(conn: Conn, fn: (db: Database) => Promise<T>): Promise<T> {
  const lent = await lend(database(conn));
  const db = lent.db;
  try {
    await db.query(db.dialect === "postgres" ? "BEGIN" : "START TRANSACTION");
    let out: T;
    try {
      out = await fn(db);
    } catch (e) {
      await db.query("ROLLBACK").catch(() => {});
      throw e;
    }
    await db.query("COMMIT");
    return out;
  } finally {
    lent.release();
  }
}

/** table names a bq table with db's prefix. */
export function table(db: Database, name: string): string {
  return db.prefix + name;
}
