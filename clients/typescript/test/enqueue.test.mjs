// enqueue / enqueueMany / wait on PostgreSQL and MariaDB: in and out of
// the caller's transaction, one statement per call, the NOTIFY sent at
// commit only, the row's columns as the inbox contract has them.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { bq, counting, dialects, exec, testDatabase } from "./helpers.mjs";

for (const dialect of dialects()) {
  describe(`enqueue on ${dialect}`, () => {
    let tdb, c, other;
    const q = (sql, params) => exec(dialect, c, sql, params);
    const rows = (sql, params) => exec(dialect, other, sql, params);
    const begin = dialect === "postgres" ? "BEGIN" : "START TRANSACTION";
    const mark = (n) => (dialect === "postgres" ? `$${n}` : "?");

    before(async () => {
      tdb = await testDatabase(dialect);
      c = await tdb.connect();
      other = await tdb.connect();
    });
    after(() => tdb?.drop());

    it("inserts one row outside a transaction, with kind, args and options as given", async () => {
      const h = await bq.enqueue(c, "billing.charge", { orderId: 42 }, { queue: "billing", concurrencyKey: { key: "acme", to: 2, onConflict: "discard" } });
      assert.ok(Number.isSafeInteger(h.id) && h.id > 0);
      const [row] = await rows(`SELECT kind, args, options, outcome, job_id, detail, created_at FROM bq_inbox WHERE id = ${mark(1)}`, [h.id]);
      assert.equal(row.kind, "billing.charge");
      assert.deepEqual(JSON.parse(row.args), { orderId: 42 });
      assert.equal(row.options, '{"queue":"billing","concurrency_key":{"key":"acme","to":2,"on_conflict":"discard"}}');
      assert.equal(row.outcome, null);
      assert.equal(row.job_id, null);
      assert.ok(row.created_at, "created_at has its default");
    });

    it("inside the caller's transaction: invisible until commit", async () => {
      await q(begin);
      const h = await bq.enqueue(c, "tx.job", { n: 1 });
      assert.equal((await rows(`SELECT id FROM bq_inbox WHERE id = ${mark(1)}`, [h.id])).length, 0, "seen before commit");
      await q("COMMIT");
      assert.equal((await rows(`SELECT id FROM bq_inbox WHERE id = ${mark(1)}`, [h.id])).length, 1);
    });

    it("a rolled-back transaction leaves no inbox row", async () => {
      await q(begin);
      const one = await bq.enqueue(c, "rolled.back", { n: 1 });
      const many = await bq.enqueueMany(c, "rolled.back", [{ n: 2 }, { n: 3 }]);
      await q("ROLLBACK");
      const ids = [one.id, ...many.map((h) => h.id)];
      assert.equal((await rows(`SELECT count(*) AS n FROM bq_inbox WHERE kind = 'rolled.back'`))[0].n, dialect === "postgres" ? "0" : 0);
      for (const id of ids) {
        await assert.rejects(bq.wait(other, id, { timeoutMs: 0 }), bq.InboxRowNotFoundError);
      }
    });

    it("enqueueMany inserts every row in one statement, ids in the list's order", async () => {
      const { conn, seen } = counting(c);
      await bq.enqueueMany(conn, "warm.up", [{}, {}]); // MySQL's one-time capability read is not counted
      seen.length = 0;
      const list = Array.from({ length: 25 }, (_, i) => ({ i }));
      const hs = await bq.enqueueMany(conn, "many.job", list, { priority: 3, tags: ["bulk"] });
      assert.equal(seen.length, 1, `statements: ${seen.join(" | ")}`);
      assert.equal(hs.length, 25);
      const got = await rows(`SELECT id, args, options FROM bq_inbox WHERE kind = 'many.job' ORDER BY id`);
      assert.deepEqual(got.map((r) => Number(r.id)), hs.map((h) => h.id));
      assert.deepEqual(got.map((r) => JSON.parse(r.args).i), list.map((a) => a.i));
      for (const r of got) assert.equal(r.options, '{"priority":3,"tags":["bulk"]}');
      assert.deepEqual(await bq.enqueueMany(conn, "many.job", []), []);
      assert.equal(seen.length, 1, "an empty list sends nothing");
    });

    it("enqueue is one statement too", async () => {
      const { conn, seen } = counting(c);
      await bq.enqueue(conn, "one.job", { a: 1 });
      assert.equal(seen.length, 1, `statements: ${seen.join(" | ")}`);
    });

    it("wait returns the outcome the Go side stamps, and times out on a pending row", async () => {
      const h = await bq.enqueue(c, "waited.job", {});
      await assert.rejects(bq.wait(other, h.id, { timeoutMs: 30 }), (e) => e instanceof bq.WaitTimeoutError && /still pending after 30 ms: is a bq process running/.test(e.message));
      const waiting = bq.wait(other, h.id, { timeoutMs: 5000, pollMs: 10 });
      setTimeout(() => q(`UPDATE bq_inbox SET outcome = 'blocked', job_id = 77 WHERE id = ${mark(1)}`, [h.id]), 50);
      assert.deepEqual(await waiting, { outcome: "blocked", jobId: 77, detail: null });
      await q(`UPDATE bq_inbox SET outcome = 'discarded', job_id = NULL, detail = 'key full' WHERE id = ${mark(1)}`, [h.id]);
      assert.deepEqual(await bq.wait(other, h.id, { timeoutMs: 0 }), { outcome: "discarded", jobId: null, detail: "key full" });
    });

    it("a prefix other than bq_ names other tables", async () => {
      const db = dialect === "postgres" ? bq.postgres(c, { prefix: "other_" }) : bq.mysql(c, { prefix: "other_" });
      await assert.rejects(bq.enqueue(db, "k", {}), /other_inbox/);
    });

    if (dialect === "postgres") {
      it("NOTIFY <prefix>inbox reaches a listener only when the transaction commits", async () => {
        const heard = [];
        other.on("notification", (n) => heard.push(n.channel));
        await other.query("LISTEN bq_inbox");
        const settle = async () => {
          await new Promise((r) => setTimeout(r, 150));
          await other.query("SELECT 1"); // delivers what arrived meanwhile
        };
        await q("BEGIN");
        await bq.enqueue(c, "notified.job", {});
        await bq.enqueueMany(c, "notified.job", [{}, {}]);
        await settle();
        assert.deepEqual(heard, [], "heard before commit");
        await q("COMMIT");
        await settle();
        assert.deepEqual(heard, ["bq_inbox"], "one notification at commit (PostgreSQL folds equal ones)");
        await q("BEGIN");
        await bq.enqueue(c, "notified.job", {});
        await q("ROLLBACK");
        await settle();
        assert.deepEqual(heard, ["bq_inbox"], "a rolled-back transaction notifies nobody");
        await bq.enqueue(c, "notified.job", {}); // autocommit: the statement's own transaction
        await settle();
        assert.deepEqual(heard, ["bq_inbox", "bq_inbox"]);
        await other.query("UNLISTEN *");
      });
    }
  });
}
