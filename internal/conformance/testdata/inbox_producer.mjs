// A TypeScript producer for the conformance suite (inbox_test.go), the
// twin of inbox_producer.py: enqueues jobs with the TypeScript client
// (clients/typescript, built to dist/) into the database of a Go DSN, in
// transactions of three jobs each, one in five rolled back, racing the
// Go and Python producers on the same keys. Prints one JSON line per row
// it wrote: {"id", "kind", "key", "seq", "rolled_back"}.
//
//   node inbox_producer.mjs DSN TEST PRODUCER PER_KEY
//
// It needs pg or mysql on NODE_PATH (make test-typescript's).

import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const bq = require(path.join(here, "..", "..", "..", "clients", "typescript", "dist", "index.js"));

async function connect(dsn) {
  const u = new URL(dsn);
  if (u.protocol === "postgres:" || u.protocol === "postgresql:") {
    const pg = require("pg");
    const schema = u.searchParams.get("search_path");
    u.searchParams.delete("search_path");
    const c = new pg.Client({ connectionString: u.toString() });
    await c.connect();
    if (schema) await c.query(`SET search_path TO ${schema}`);
    return { c, query: (sql) => c.query(sql), end: () => c.end() };
  }
  if (u.protocol === "mysql:") {
    const mysql = require("mysql");
    const c = mysql.createConnection(dsn);
    await new Promise((resolve, reject) => c.connect((err) => (err ? reject(err) : resolve())));
    const query = (sql) => new Promise((resolve, reject) => c.query(sql, (err, rows) => (err ? reject(err) : resolve(rows))));
    return { c, query, end: () => new Promise((resolve) => c.end(() => resolve())) };
  }
  throw new Error(`unknown DSN ${dsn}`);
}

function args(test, key, seq) {
  return { Test: test, Key: key, Seq: seq, SleepMS: 10 + (seq % 25), Mode: "", N: 0 };
}

async function main() {
  const [dsn, test, producer, perKey] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
  const db = await connect(dsn);
  const begin = dsn.startsWith("mysql:") ? "START TRANSACTION" : "BEGIN";
  const items = [];
  for (let i = 0; i < perKey; i++) {
    for (let k = 0; k < 3; k++) items.push(["c.limit1", `k${k}`, undefined]);
    for (let k = 0; k < 2; k++) items.push(["c.discard1", `d${k}`, undefined]);
    items.push(["c.unkeyed", `u${i}`, { unique: { byArgs: true } }]);
  }
  const out = [];
  for (let start = 0; start < items.length; start += 3) {
    const batch = items.slice(start, start + 3);
    const rolledBack = Math.floor(start / 3) % 5 === 4;
    await db.query(begin);
    const rows = [];
    for (const [n, [kind, key, opts]] of batch.entries()) {
      // The unique rows' args are the same in every producer: Seq 0.
      const seq = kind === "c.unkeyed" ? 0 : producer * 100000 + start + n;
      const h = await bq.enqueue(db.c, kind, args(test, key, seq), opts);
      rows.push({ id: h.id, kind, key, seq, rolled_back: rolledBack });
    }
    await db.query(rolledBack ? "ROLLBACK" : "COMMIT");
    out.push(...rows);
  }
  await db.end();
  for (const r of out) console.log(JSON.stringify(r));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
