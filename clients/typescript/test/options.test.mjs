// The options JSON exactly as the inbox contract spells it, and the
// refusals of bad input before any database is reached.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createRequire } from "node:module";

const bq = createRequire(import.meta.url)("../dist/index.js");

describe("encodeOptions", () => {
  it("is {} for no options", () => {
    assert.equal(bq.encodeOptions(), "{}");
    assert.equal(bq.encodeOptions({}), "{}");
  });

  it("maps every camelCase field to the contract's snake_case JSON", () => {
    const json = bq.encodeOptions({
      queue: "billing",
      priority: 5,
      runAt: new Date("2026-12-06T10:00:00Z"),
      concurrencyKey: { key: "tenant:acme", to: 2, onConflict: "block" },
      moreConcurrencyKeys: [{ key: "group/key", to: 1, onConflict: "discard" }],
      rateKey: { key: "api", limit: 10, periodMs: 1000 },
      unique: { byArgs: true, byQueue: true, byPeriodMs: 60000, byStates: ["ready", "running"] },
      metadata: { k: "v", a: "b" },
      tags: ["a", "b", "a"],
    });
    assert.deepEqual(JSON.parse(json), {
      queue: "billing",
      priority: 5,
      run_at: "2026-12-06T10:00:00.000Z",
      concurrency_key: { key: "tenant:acme", to: 2, on_conflict: "block" },
      more_concurrency_keys: [{ key: "group/key", to: 1, on_conflict: "discard" }],
      rate_key: { key: "api", limit: 10, period_ms: 1000 },
      unique: { by_args: true, by_queue: true, by_period_ms: 60000, by_states: ["ready", "running"] },
      metadata: { a: "b", k: "v" },
      tags: ["a", "b"],
    });
  });

  it("maps dependsOn and evenIfDependenciesFail, refusing bad ids and the flag alone", () => {
    assert.deepEqual(JSON.parse(bq.encodeOptions({ dependsOn: [41, 42], evenIfDependenciesFail: true })),
      { depends_on: [41, 42], even_if_dependencies_fail: true });
    assert.throws(() => bq.encodeOptions({ dependsOn: [0] }), /dependsOn holds 0/);
    assert.throws(() => bq.encodeOptions({ dependsOn: "41" }), /give an array of job ids/);
    assert.throws(() => bq.encodeOptions({ evenIfDependenciesFail: true }), /without dependsOn/);
  });

  it("passes run_in_ms, an RFC 3339 run_at string as given, and leaves unset fields out", () => {
    assert.equal(bq.encodeOptions({ runInMs: 30000 }), '{"run_in_ms":30000}');
    assert.equal(bq.encodeOptions({ runAt: "2026-12-06T11:00:00+01:00" }), '{"run_at":"2026-12-06T11:00:00+01:00"}');
    assert.equal(bq.encodeOptions({ concurrencyKey: { key: "k" } }), '{"concurrency_key":{"key":"k"}}');
    assert.equal(bq.encodeOptions({ rateKey: { key: "api" } }), '{"rate_key":{"key":"api","limit":0,"period_ms":0}}');
  });
});

/** refused asserts that fn throws an InvalidArgumentError whose message matches every pattern. */
function refused(fn, ...patterns) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof bq.InvalidArgumentError, `${e?.name}: ${e?.message}`);
    for (const p of patterns) assert.match(e.message, p);
    return true;
  });
}

describe("bad input is refused before the database", () => {
  // No connection is reached: a throwing stand-in proves it.
  const db = bq.postgres({ query: () => assert.fail("reached the database") });

  it("an empty kind, naming the fix", async () => {
    await assert.rejects(bq.enqueue(db, "", {}), (e) => e instanceof bq.InvalidArgumentError && /kind is "": give the job kind's name/.test(e.message));
  });

  it("args that are not an object", async () => {
    for (const args of [null, [1, 2], "x", 42]) {
      await assert.rejects(bq.enqueue(db, "k", args), (e) => e instanceof bq.InvalidArgumentError && /args is .*: give a plain object/.test(e.message));
    }
    await assert.rejects(bq.enqueueMany(db, "k", [{}, []]), /argsList\[1\] is an array/);
  });

  it("a bad on_conflict, naming the three words", () => {
    refused(() => bq.encodeOptions({ concurrencyKey: { key: "k", onConflict: "drop" } }),
      /options\.concurrencyKey\.onConflict is "drop": use "block" .*, "discard" .*, "replace" .* or "cancel_running"/);
    refused(() => bq.encodeOptions({ moreConcurrencyKeys: [{ key: "g/k", onConflict: "Block" }] }), /moreConcurrencyKeys\[0\]\.onConflict/);
  });

  it("queue names by Go's validateQueue", () => {
    for (const q of ["", "has space", "-lead", "x".repeat(129), "é"]) {
      refused(() => bq.encodeOptions({ queue: q }), /queue name .* is invalid: use 1 to 128 ASCII letters/);
    }
    bq.encodeOptions({ queue: "a-b_c.d:e9" });
  });

  it("keys by Go's validateKey, and a further key without its group", () => {
    refused(() => bq.encodeOptions({ concurrencyKey: { key: "a\0b" } }), /has a NUL byte/);
    refused(() => bq.encodeOptions({ concurrencyKey: { key: "x".repeat(2049) } }), /is 2049 bytes long.*bq\.MaxKeyBytes/);
    refused(() => bq.encodeOptions({ concurrencyKey: { key: "\ud800" } }), /not valid UTF-8/);
    refused(() => bq.encodeOptions({ moreConcurrencyKeys: [{ key: "bare" }] }), /has no group: a further key is a full key/);
    refused(() => bq.encodeOptions({ moreConcurrencyKeys: [{ key: "g/a" }, { key: "g/a" }] }), /names "g\/a" twice/);
  });

  it("limits, rates, priorities and schedules", () => {
    refused(() => bq.encodeOptions({ concurrencyKey: { key: "k", to: -1 } }), /to is -1: use 1 or more jobs at once per key, or 0 for the default/);
    refused(() => bq.encodeOptions({ rateKey: { key: "api", limit: 10 } }), /periodMs is 0: set it to the window/);
    refused(() => bq.encodeOptions({ rateKey: { key: "api", limit: 10001, periodMs: 1000 } }), /at most 10000 starts per period \(bq\.MaxRateLimit\)/);
    refused(() => bq.encodeOptions({ priority: 1.5 }), /priority is 1\.5/);
    refused(() => bq.encodeOptions({ slots: 1.5 }), /Slots is 1\.5/);
    refused(() => bq.encodeOptions({ slots: -1 }), /Slots is -1: use 1 to 1000 \(bq\.MaxSlots\), or 0 for 1/);
    refused(() => bq.encodeOptions({ slots: 1001 }), /Slots is 1001/);
    assert.deepEqual(JSON.parse(bq.encodeOptions({ slots: 3 })), { slots: 3 });
    refused(() => bq.encodeOptions({ runAt: new Date(), runInMs: 5 }), /both runAt and runInMs: give one/);
    refused(() => bq.encodeOptions({ runAt: "tomorrow" }), /RFC 3339/);
  });

  it("unique, metadata, tags and unknown fields", () => {
    refused(() => bq.encodeOptions({ unique: {} }), /unique sets no field/);
    refused(() => bq.encodeOptions({ unique: { byPeriodMs: 10 } }), /use 1000 \(1s\) or more/);
    refused(() => bq.encodeOptions({ unique: { byStates: ["done"] } }), /"done", no job state/);
    refused(() => bq.encodeOptions({ metadata: { "bad key": "v" } }), /metadata key "bad key" is invalid/);
    refused(() => bq.encodeOptions({ tags: ["ok", ""] }), /tag "" is invalid/);
    refused(() => bq.encodeOptions({ run_at: "2026-12-06T10:00:00Z" }), /options has no field "run_at": use queue, priority, slots, runAt/);
  });

  it("a bad table prefix", () => {
    refused(() => bq.postgres({ query() {} }, { prefix: "Bad-" }), /invalid table prefix "Bad-"/);
  });
});
