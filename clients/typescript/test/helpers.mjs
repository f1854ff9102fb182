// Test databases for the client's tests: each test file gets a database
// of its own (bq_ts_<random>) on the shared PostgreSQL and MariaDB
// servers, with bq's tables made by bq's own migrations (`bq migrate
// up`), dropped at the end.
//
//   BQ_TEST_DRIVERS        which databases (comma list; sqlite is ignored), default postgres,mysql
//   BQ_TEST_POSTGRES_DSN   default postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//   BQ_TEST_MYSQL_DSN      default mysql://root@127.0.0.1:3306/test
//   BQ_BIN                 a built bq binary (make test-typescript builds one); else `go run ./bq`

import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";

import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
export const bq = require("../dist/index.js");
const pg = require("pg");
const mysql = require("mysql");

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

const dsns = {
  postgres: process.env.BQ_TEST_POSTGRES_DSN || "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
  mysql: process.env.BQ_TEST_MYSQL_DSN || "mysql://root@127.0.0.1:3306/test",
};

/** dialects lists the databases to test on. */
export function dialects() {
  const want = (process.env.BQ_TEST_DRIVERS || "postgres,mysql").split(",").map((s) => s.trim());
  return ["postgres", "mysql"].filter((d) => want.includes(d));
}

/** withDatabase swaps the database name of a URL. */
function withDatabase(url, name) {
  const u = new URL(url);
  u.pathname = "/" + name;
  return u.toString();
}

/** connect opens a connection to url: a pg Client or a mysql Connection, connected. */
export async function connect(dialect, url) {
  if (dialect === "postgres") {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    return c;
  }
  const c = mysql.createConnection(url);
  await new Promise((resolve, reject) => c.connect((err) => (err ? reject(err) : resolve())));
  return c;
}

export async function close(dialect, c) {
  if (c.pool) c = c.pool;
  if (dialect === "postgres") return c.end();
  return new Promise((resolve) => c.end(() => resolve()));
}

/** exec runs sql with params on a bare connection of either driver. */
export function exec(dialect, c, sql, params = []) {
  if (dialect === "postgres") return c.query(sql, params).then((r) => r.rows);
  return new Promise((resolve, reject) => c.query(sql, params, (err, rows) => (err ? reject(err) : resolve(rows))));
}

/** bqCommand runs the bq CLI from the repository root. */
export function bqCommand(args) {
  const [cmd, pre] = process.env.BQ_BIN ? [process.env.BQ_BIN, []] : ["go", ["run", "./bq"]];
  return execFileSync(cmd, [...pre, ...args], { cwd: repoRoot, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/**
 * testDatabase creates a database of its own on dialect's server and
 * migrates it with bq's migrations. It returns its url, a connect() to
 * it and drop().
 */
export async function testDatabase(dialect) {
  const name = "bq_ts_" + randomBytes(6).toString("hex");
  const admin = await connect(dialect, dsns[dialect]);
  try {
    await exec(dialect, admin, `CREATE DATABASE ${name}`);
  } finally {
    await close(dialect, admin);
  }
  const url = withDatabase(dsns[dialect], name);
  bqCommand(["migrate", "up", "--dsn", url]);
  const opened = [];
  return {
    dialect,
    name,
    url,
    async connect() {
      const c = await connect(dialect, url);
      opened.push(c);
      return c;
    },
    /** pool opens a pg Pool or a mysql Pool on the database. */
    pool() {
      const p = dialect === "postgres" ? new pg.Pool({ connectionString: url, max: 2 }) : mysql.createPool(url + (url.includes("?") ? "&" : "?") + "connectionLimit=2");
      opened.push({ pool: p });
      return p;
    },
    async drop() {
      for (const c of opened) await close(dialect, c).catch(() => {});
      const a = await connect(dialect, dsns[dialect]);
      if (dialect === "postgres") {
        // A pg Pool's end() resolves before its connections' backends have
        // gone; dropping WITH (FORCE) then would terminate one still being
        // closed, and pg raises that on a client nobody listens to any more
        // (an uncaught exception). Wait for them to go first.
        for (let i = 0; i < 100; i++) {
          const [{ n }] = await exec(dialect, a, "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1", [name]);
          if (n === 0) break;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      const force = dialect === "postgres" ? " WITH (FORCE)" : "";
      await exec(dialect, a, `DROP DATABASE IF EXISTS ${name}${force}`).finally(() => close(dialect, a));
    },
  };
}

/** counting wraps a connection so that its query() calls are counted (the statements sent). */
export function counting(c) {
  const seen = [];
  const wrapped = Object.create(c);
  wrapped.query = (sql, ...rest) => {
    seen.push(sql);
    return c.query(sql, ...rest);
  };
  return { conn: wrapped, seen };
}

