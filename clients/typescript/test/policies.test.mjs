// syncPolicies / listPolicies round trips by the rules of Go's
// SyncPolicies, and health's counts, on PostgreSQL and MariaDB.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { bq, bqCommand, dialects, exec, testDatabase } from "./helpers.mjs";

for (const dialect of dialects()) {
  describe(`policies and health on ${dialect}`, () => {
    let tdb, c;
    const q = (sql, params) => exec(dialect, c, sql, params);

    before(async () => {
      tdb = await testDatabase(dialect);
      c = await tdb.connect();
    });
    after(() => tdb?.drop());

    const strip = (ps) => ps.map(({ createdAt, updatedAt, ...p }) => p);

    it("round trips: created, listed by queue, read by Go's bq policy list", async () => {
      await bq.syncPolicies(c, "svc-a", [
        { queue: "mail", maxActive: 20, maxActivePerKey: 3 },
        { queue: "billing", maxBlocked: 100, maxStartsPerKey: 10, startsPeriodMs: 1000 },
      ]);
      const ps = await bq.listPolicies(c);
      assert.deepEqual(strip(ps), [
        { queue: "billing", namespace: "svc-a", maxActive: 0, maxActivePerKey: 0, maxBlocked: 100, maxStartsPerKey: 10, startsPeriodMs: 1000, maxWaitMs: 0, adaptiveMin: 0 },
        { queue: "mail", namespace: "svc-a", maxActive: 20, maxActivePerKey: 3, maxBlocked: 0, maxStartsPerKey: 0, startsPeriodMs: 0, maxWaitMs: 0, adaptiveMin: 0 },
      ]);
      for (const p of ps) {
        assert.ok(p.createdAt instanceof Date && Math.abs(p.createdAt.getTime() - Date.now()) < 60_000, `createdAt ${p.createdAt}`);
      }
      // The Go side reads what the client wrote.
      const goView = JSON.parse(bqCommand(["policy", "list", "--json", "--dsn", tdb.url]));
      const text = JSON.stringify(goView);
      assert.match(text, /"mail"/);
      assert.match(text, /svc-a/);
    });

    it("syncing the same set again writes nothing; a change updates; an omitted queue is pruned", async () => {
      const before = await bq.listPolicies(c);
      await new Promise((r) => setTimeout(r, 20));
      await bq.syncPolicies(c, "svc-a", [
        { queue: "mail", maxActive: 20, maxActivePerKey: 3 },
        { queue: "billing", maxBlocked: 100, maxStartsPerKey: 10, startsPeriodMs: 1000 },
      ]);
      assert.deepEqual(await bq.listPolicies(c), before, "unchanged rows, unchanged updated_at");
      await bq.syncPolicies(c, "svc-a", [{ queue: "mail", maxActive: 5, maxActivePerKey: 3 }]);
      const after = await bq.listPolicies(c);
      assert.deepEqual(strip(after), [
        { queue: "mail", namespace: "svc-a", maxActive: 5, maxActivePerKey: 3, maxBlocked: 0, maxStartsPerKey: 0, startsPeriodMs: 0, maxWaitMs: 0, adaptiveMin: 0 },
      ]);
      assert.ok(after[0].updatedAt > before[1].updatedAt, "updated_at moved");
      assert.equal(after[0].createdAt.getTime(), before[1].createdAt.getTime(), "created_at kept");
    });

    it("a queue owned by another namespace is refused, naming the owner and the fix, and nothing is written", async () => {
      const was = await bq.listPolicies(c);
      await assert.rejects(
        bq.syncPolicies(c, "svc-b", [{ queue: "reports", maxActive: 1 }, { queue: "mail", maxActive: 1 }]),
        (e) => {
          assert.ok(e instanceof bq.PolicyConflictError, e.message);
          assert.equal(e.queue, "mail");
          assert.equal(e.owner, "svc-a");
          assert.match(e.message, /queue "mail" belongs to namespace "svc-a", so namespace "svc-b" cannot set it: remove it from "svc-a"'s policies first/);
          return true;
        },
      );
      assert.deepEqual(await bq.listPolicies(c), was, "the transaction rolled back: no reports policy");
      await bq.syncPolicies(c, "svc-b", [{ queue: "reports", maxActive: 1 }]);
      await bq.syncPolicies(c, "svc-b", []); // prunes svc-b's only
      assert.deepEqual((await bq.listPolicies(c)).map((p) => p.queue), ["mail"]);
    });

    it("bad policies are refused before the database, every problem at once", async () => {
      await assert.rejects(
        bq.syncPolicies(c, "", [{ queue: "bad queue" }, { queue: "x", maxActive: -1 }, { queue: "x" }, { queue: "r", maxStartsPerKey: 5 }]),
        (e) => {
          assert.ok(e instanceof bq.InvalidArgumentError, e.message);
          assert.match(e.message, /the namespace is empty: name the owner/);
          assert.match(e.message, /queue name "bad queue" is invalid/);
          assert.match(e.message, /maxActive is -1: use 0 \(no limit\) or more/);
          assert.match(e.message, /queue "x" has two policies/);
          assert.match(e.message, /startsPeriodMs is 0: set it to the window.*or set maxStartsPerKey and startsPeriodMs both to 0 for no default rate/);
          return true;
        },
      );
    });

    it("maxWaitMs and adaptiveMin round trip, read by Go's bq policy list, and are refused where Go refuses them", async () => {
      await bq.syncPolicies(c, "svc-w", [{ queue: "waits", maxActivePerKey: 4, maxWaitMs: 1500, adaptiveMin: 2 }]);
      const got = (await bq.listPolicies(c)).find((p) => p.queue === "waits");
      assert.equal(got.maxWaitMs, 1500);
      assert.equal(got.adaptiveMin, 2);
      const goView = JSON.parse(bqCommand(["policy", "list", "--json", "--dsn", tdb.url])).find((p) => p.queue === "waits");
      assert.equal(goView.max_wait_us, 1500000);
      assert.equal(goView.adaptive_min, 2);
      await bq.syncPolicies(c, "svc-w", []);
      await assert.rejects(
        bq.syncPolicies(c, "svc-w", [{ queue: "w", maxWaitMs: -1 }, { queue: "v", maxActivePerKey: 2, adaptiveMin: 3 }]),
        (e) => {
          assert.ok(e instanceof bq.InvalidArgumentError, e.message);
          assert.match(e.message, /maxWaitMs is -1: use whole milliseconds.*or 0 for no bound/);
          assert.match(e.message, /Adaptive.Min 3 is above MaxActivePerKey 2: .*set Min at most 2/);
          return true;
        },
      );
    });

    it("works on a pool: the sync takes one connection for its transaction", async () => {
      const pool = tdb.pool();
      await bq.syncPolicies(pool, "svc-pool", [{ queue: "pooled", maxActivePerKey: 2 }]);
      assert.deepEqual((await bq.listPolicies(pool)).filter((p) => p.namespace === "svc-pool").map((p) => p.queue), ["pooled"]);
      await assert.rejects(bq.syncPolicies(pool, "svc-pool", [{ queue: "mail" }]), bq.PolicyConflictError);
      await bq.syncPolicies(pool, "svc-pool", []);
      const { id } = await bq.enqueue(pool, "pooled.job", {});
      assert.ok(id > 0);
      const h = await bq.health(pool);
      assert.equal(h.inbox.find((k) => k.kind === "pooled.job").pending, 1);
      await exec(dialect, c, `DELETE FROM bq_inbox WHERE kind = 'pooled.job'`);
    });

    it("health counts each queue's jobs and the inbox's pending rows per kind", async () => {
      const h0 = await bq.health(c);
      assert.equal(h0.inboxPending, 0);
      await bq.enqueueMany(c, "report.build", [{}, {}, {}]);
      const decided = await bq.enqueue(c, "mail.send", {});
      await q(`UPDATE bq_inbox SET outcome = 'refused', detail = 'x' WHERE id = ${dialect === "postgres" ? "$1" : "?"}`, [decided.id]);
      await q("INSERT INTO bq_paused_queues (queue, paused_at) VALUES ('frozen', " + (dialect === "postgres" ? "now()" : "0") + ")");
      const h = await bq.health(c);
      assert.equal(h.inboxPending, 3);
      assert.deepEqual(h.inbox, [{ kind: "report.build", pending: 3 }]);
      assert.deepEqual(h.queues, [{ queue: "frozen", ready: 0, running: 0, scheduled: 0, blocked: 0, failed: 0, paused: true }]);
      assert.ok(h.at instanceof Date);
    });
  });
}
