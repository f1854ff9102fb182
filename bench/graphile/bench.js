// Graphile Worker's drain beside bq's, for make bench (bench/matrix): a
// fresh schema, --jobs no-op jobs enqueued 1,000 at a time (addJobs),
// then a runner of --slots concurrency working them, timed from its start
// until the last completion has deleted its job (Graphile deletes a job
// when it completes). One JSON line on stdout, as bq bench --json prints.
//
// Its best settings are the defaults here (the settings Graphile's docs
// give for throughput, and those an external harness measured it with):
// localQueue 2,000 jobs fetched ahead, refetchDelay 10 ms, and
// completeJobBatchDelay 0 (completions batched as they come, with no
// wait). --local-queue 0 --complete-batch-delay -1 runs it as shipped.
"use strict";
const crypto = require("crypto");
const { Pool } = require("pg");
const { run, makeWorkerUtils, Logger } = require("graphile-worker");

function flag(name, def) {
  const i = process.argv.indexOf("--" + name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}

async function main() {
  const dsn = flag("dsn", process.env.BQ_TEST_POSTGRES_DSN);
  if (!dsn) throw new Error("--dsn postgres://... is required");
  const jobs = Number(flag("jobs", "20000"));
  const slots = Number(flag("slots", "100"));
  const localQueue = Number(flag("local-queue", "2000"));
  const refetchMS = Number(flag("refetch-ms", "10"));
  const completeDelay = Number(flag("complete-batch-delay", "0"));
  const schema = "gw_" + crypto.randomBytes(6).toString("hex");
  const logger = new Logger(() => () => {});
  const pool = new Pool({ connectionString: dsn, max: 4 });
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  try {
    const utils = await makeWorkerUtils({ pgPool: pool, schema, logger });
    await utils.migrate();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < jobs; i += 1000) {
      const specs = [];
      for (let j = i; j < Math.min(jobs, i + 1000); j++) specs.push({ identifier: "noop", payload: {} });
      await utils.addJobs(specs);
    }
    const enqS = Number(process.hrtime.bigint() - t0) / 1e9;
    let ran = 0;
    let allRan;
    const ranAll = new Promise((resolve) => (allRan = resolve));
    const t1 = process.hrtime.bigint();
    const runner = await run({
      connectionString: dsn,
      schema,
      concurrency: slots,
      noHandleSignals: true,
      logger,
      taskList: {
        noop: async () => {
          if (++ran === jobs) allRan();
        },
      },
      preset: {
        worker: {
          localQueue: localQueue > 0 ? { size: localQueue, refetchDelay: { durationMs: refetchMS } } : undefined,
          completeJobBatchDelay: completeDelay,
          failJobBatchDelay: completeDelay,
        },
      },
    });
    await ranAll;
    for (;;) {
      const { rows } = await pool.query(`SELECT EXISTS (SELECT 1 FROM ${schema}._private_jobs) AS left`);
      if (!rows[0].left) break;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const workS = Number(process.hrtime.bigint() - t1) / 1e9;
    await runner.stop();
    await utils.release();
    console.log(JSON.stringify({
      system: "graphile-worker", mode: "drain", driver: "postgres", jobs, slots,
      local_queue: localQueue, refetch_ms: refetchMS, complete_batch_delay_ms: completeDelay,
      enqueue_per_s: jobs / enqS, work_per_s: jobs / workS, enqueue_s: enqS, work_s: workS,
    }));
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    await pool.end();
  }
}

main().catch((e) => {
  console.error("graphile bench:", e);
  process.exit(1);
});
