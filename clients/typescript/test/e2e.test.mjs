// End to end: jobs enqueued from TypeScript are admitted by a bq Go
// process (test/e2eworker, one job kind, a limit of 1 per tenant, jobs
// that hold their slot) and the client reads each row's outcome: ready,
// blocked, discarded per the key's limit, refused for args that do not
// decode. Runs only where the tree holds issue 40's Go side (its inbox
// migration); skipped otherwise.
//
//   BQ_E2E_WORKER   a built e2eworker (make test-typescript builds one); else it is built here
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { bq, dialects, repoRoot, testDatabase } from "./helpers.mjs";

const kind = "ts.e2e.hold";

/** worker returns the e2eworker binary, building it unless BQ_E2E_WORKER names one. */
function worker() {
  if (process.env.BQ_E2E_WORKER) return { bin: process.env.BQ_E2E_WORKER, cleanup() {} };
  const dir = mkdtempSync(path.join(os.tmpdir(), "bq-ts-e2e-"));
  const bin = path.join(dir, "e2eworker");
  execFileSync("go", ["build", "-o", bin, "./clients/typescript/test/e2eworker"], { cwd: repoRoot, stdio: "inherit" });
  return { bin, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

for (const dialect of dialects()) {
  describe(`end to end on ${dialect}`, () => {
    let tdb, c, proc, built, stderr = "";

    before(async () => {
      tdb = await testDatabase(dialect);
      c = await tdb.connect();
      built = worker();
      proc = spawn(built.bin, [tdb.url], { stdio: ["ignore", "ignore", "pipe"] });
      proc.stderr.on("data", (d) => (stderr += d));
    });
    after(async () => {
      if (proc && proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGKILL");
        await exited;
      }
      built?.cleanup();
      await tdb?.drop();
    });

    const decided = async (h) => {
      try {
        return await bq.wait(c, h.id, { timeoutMs: 30_000 });
      } catch (e) {
        throw new Error(`${e.message}\nworker stderr:\n${stderr}`);
      }
    };

    it("admits per the key's limit: ready, then blocked, then discarded; another key ready", async () => {
      const first = await decided(await bq.enqueue(c, kind, { tenant: "acme" }));
      assert.equal(first.outcome, "ready", JSON.stringify(first));
      assert.ok(first.jobId > 0);
      const second = await decided(await bq.enqueue(c, kind, { tenant: "acme" }));
      assert.equal(second.outcome, "blocked", JSON.stringify(second));
      assert.ok(second.jobId > first.jobId);
      const third = await decided(await bq.enqueue(c, kind, { tenant: "acme" }, { concurrencyKey: { key: "acme", to: 1, onConflict: "discard" } }));
      assert.equal(third.outcome, "discarded", JSON.stringify(third));
      assert.equal(third.jobId, null);
      assert.ok(third.detail, "a discard says why");
      const other = await decided(await bq.enqueue(c, kind, { tenant: "globex" }));
      assert.equal(other.outcome, "ready", JSON.stringify(other));
    });

    it("enqueueMany in a committed transaction is admitted in order; a rolled-back one never", async () => {
      const begin = dialect === "postgres" ? "BEGIN" : "START TRANSACTION";
      const q = (sql) => (dialect === "postgres" ? c.query(sql) : new Promise((res, rej) => c.query(sql, (e) => (e ? rej(e) : res()))));
      await q(begin);
      const gone = await bq.enqueue(c, kind, { tenant: "initech" });
      await q("ROLLBACK");
      await q(begin);
      const hs = await bq.enqueueMany(c, kind, [{ tenant: "umbrella" }, { tenant: "umbrella" }]);
      await q("COMMIT");
      const outcomes = [];
      for (const h of hs) outcomes.push((await decided(h)).outcome);
      assert.deepEqual(outcomes, ["ready", "blocked"]);
      await assert.rejects(bq.wait(c, gone.id, { timeoutMs: 0 }), bq.InboxRowNotFoundError);
    });

    it("a job waiting for another (dependsOn) is stored waiting; an unknown id is refused", async () => {
      const first = await decided(await bq.enqueue(c, kind, { tenant: "deps" }, { runInMs: 3_600_000 }));
      assert.equal(first.outcome, "scheduled", JSON.stringify(first));
      const next = await decided(await bq.enqueue(c, kind, { tenant: "deps" }, { dependsOn: [first.jobId] }));
      assert.equal(next.outcome, "waiting", JSON.stringify(next));
      assert.ok(next.jobId > first.jobId);
      const missing = await decided(await bq.enqueue(c, kind, { tenant: "deps" }, { dependsOn: [2 ** 40] }));
      assert.equal(missing.outcome, "refused", JSON.stringify(missing));
      assert.match(missing.detail, /does not exist/);
    });

    it("args that do not decode are refused, the detail naming the field", async () => {
      const r = await decided(await bq.enqueue(c, kind, { tenant: "acme", bogus: 1 }));
      assert.equal(r.outcome, "refused", JSON.stringify(r));
      assert.match(r.detail, /bogus/);
    });

    it("health sees the admitted jobs and an empty inbox", async () => {
      const h = await bq.health(c);
      const q = h.queues.find((x) => x.queue === "ts-e2e");
      assert.ok(q, JSON.stringify(h));
      assert.equal(q.ready + q.running, 3, JSON.stringify(q)); // acme, globex, umbrella hold a slot each
      assert.equal(q.blocked, 2);
      assert.equal(h.inboxPending, 0);
    });
  });
}
