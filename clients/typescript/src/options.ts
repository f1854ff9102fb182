// The options of one enqueue, typed and documented in camelCase, and
// their JSON in the inbox row's `options` column, in the snake_case of
// the inbox contract (docs/clients.md; specs/inbox.md). Each field
// mirrors one of bq's Go EnqueueOptions; every field is optional.

import {
  checkInt, checkKey, checkLabel, checkOnConflict, checkPriority, checkSlots, checkQueue, checkRate, checkTo, fail, quoted,
  MAX_CONCURRENCY_KEYS, MAX_METADATA_BYTES, MAX_METADATA_ENTRIES, MAX_TAGS, UNIQUE_STATES, utf8Length,
} from "./validate";

/** What a job does when its key has no free slot: wait in the key's line, or be dropped. */
/** "replace" and "cancel_running" are for a job's one key only (Go refuses them beside further keys). */
export type OnConflict = "block" | "discard" | "replace" | "cancel_running";

/** A job state a unique spec may name. */
export type UniqueState = (typeof UNIQUE_STATES)[number];

/** bq.WithConcurrencyKey: the job's key and limit, replacing its definition's. */
export interface ConcurrencyKey {
  /** The bare key; bq adds the definition's Group (by default the job's name). "" means no limit for this job. */
  key: string;
  /** Jobs of the key at once; 0 or absent takes the default (the queue policy's MaxActivePerKey, else 1). */
  to?: number;
  /** Overrides the definition's OnConflict (default "block"). */
  onConflict?: OnConflict;
}

/** bq.KeyLimit: a further key of the job (bq.WithMoreConcurrencyKeys). */
export interface KeyLimit {
  /** The full key, Group + "/" + key, as SetKeyLimit takes it; "" drops the limit. */
  key: string;
  /** The key's limit; 0 or absent takes the default. */
  to?: number;
  /** "block" (default) or "discard" when this key is full. */
  onConflict?: OnConflict;
}

/** bq.WithRateKey: rate-limit the job under key (starts per period, not jobs at once). */
export interface RateKey {
  /** "" means no rate limit for this job. */
  key: string;
  /** Starts per period, 1 to 10,000; 0 with periodMs 0 keeps the definition's or the queue policy's rate. */
  limit?: number;
  /** The window, in whole milliseconds. */
  periodMs?: number;
}

/** bq.Unique: an enqueue finding a job of the same unique key in one of byStates inserts nothing (outcome "duplicate"). Set at least one field. */
export interface Unique {
  /** Adds the args (as JSON) to the key. */
  byArgs?: boolean;
  /** Adds the queue to the key. */
  byQueue?: boolean;
  /** Adds the period of the job's scheduled time, floored to a multiple of this many ms (at least 1000). */
  byPeriodMs?: number;
  /** The states of an existing job that make a new one a duplicate; default scheduled, ready, blocked, running, completed. */
  byStates?: UniqueState[];
}

/** The options of one enqueue (bq's EnqueueOptions). */
export interface EnqueueOptions {
  /** bq.Queue: overrides the definition's queue. */
  queue?: string;
  /** bq.Priority: higher runs first. */
  priority?: number;
  /** bq.Slots: how many slots of each of its concurrency keys the job takes (1 to 1000; 0 for 1). */
  slots?: number;
  /** bq.At: run no earlier than this instant (a Date, or an RFC 3339 string). */
  runAt?: Date | string;
  /** bq.In: run no earlier than this many ms after the Go side admits the row. */
  runInMs?: number;
  /** bq.WithConcurrencyKey. */
  concurrencyKey?: ConcurrencyKey;
  /** bq.WithMoreConcurrencyKeys: replaces the definition's further keys. */
  moreConcurrencyKeys?: KeyLimit[];
  /** bq.WithRateKey. */
  rateKey?: RateKey;
  /** bq.WithUnique. */
  unique?: Unique;
  /** bq.WithMetadata: string pairs stored with the job. */
  metadata?: Record<string, string>;
  /** bq.WithTags: added after the definition's tags. */
  tags?: string[];
  /** bq.DependsOn: the ids of stored jobs this one waits for. */
  dependsOn?: number[];
  /** bq.EvenIfDependenciesFail: run once they ended, however. */
  evenIfDependenciesFail?: boolean;
}

const KNOWN = new Set(["queue", "priority", "slots", "runAt", "runInMs", "concurrencyKey", "moreConcurrencyKeys", "rateKey", "unique", "metadata", "tags",
  "dependsOn", "evenIfDependenciesFail"]);

/** refuseUnknown refuses fields a typo or a snake_case name slipped in (plain JS callers). */
function refuseUnknown(o: object, known: string[], what: string): void {
  for (const k of Object.keys(o)) {
    if (!known.includes(k) && (o as Record<string, unknown>)[k] !== undefined) {
      fail(`${what} has no field ${quoted(k)}: use ${known.join(", ")}`);
    }
  }
}

function keyJSON(k: ConcurrencyKey | KeyLimit, what: string, full: boolean): Record<string, unknown> {
  if (k === null || typeof k !== "object") fail(`${what} is ${quoted(k)}: give {key, to?, onConflict?}`);
  refuseUnknown(k, ["key", "to", "onConflict"], what);
  const key = checkKey(k.key, `${what}.key`);
  if (full && key !== "" && key.indexOf("/") < 1) {
    fail(`${what}.key ${quoted(key)} has no group: a further key is a full key, Group + "/" + key, e.g. "export/${key}"`);
  }
  const out: Record<string, unknown> = { key };
  if (k.to !== undefined) out.to = checkTo(k.to, `${what}.to`);
  if (k.onConflict !== undefined) out.on_conflict = checkOnConflict(k.onConflict, `${what}.onConflict`);
  return out;
}

function runAtJSON(at: Date | string): string {
  if (at instanceof Date) {
    if (Number.isNaN(at.getTime())) fail("runAt is an invalid Date: give a valid Date or an RFC 3339 string");
    return at.toISOString();
  }
  const rfc3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
  if (typeof at !== "string" || !rfc3339.test(at) || Number.isNaN(Date.parse(at))) {
    fail(`runAt is ${quoted(at)}: give a Date or an RFC 3339 string with a zone, e.g. "2026-12-06T10:00:00Z"`);
  }
  return at;
}

function uniqueJSON(u: Unique): Record<string, unknown> {
  if (u === null || typeof u !== "object") fail(`unique is ${quoted(u)}: give {byArgs?, byQueue?, byPeriodMs?, byStates?}`);
  refuseUnknown(u, ["byArgs", "byQueue", "byPeriodMs", "byStates"], "unique");
  if (!u.byArgs && !u.byQueue && !u.byPeriodMs && !(u.byStates && u.byStates.length > 0)) {
    fail("unique sets no field: set byArgs, byPeriodMs, byQueue or byStates (or leave unique out)");
  }
  const out: Record<string, unknown> = {};
  if (u.byArgs !== undefined) out.by_args = u.byArgs === true;
  if (u.byQueue !== undefined) out.by_queue = u.byQueue === true;
  if (u.byPeriodMs !== undefined && u.byPeriodMs !== 0) {
    out.by_period_ms = checkInt(u.byPeriodMs, "unique.byPeriodMs", 1000, Number.MAX_SAFE_INTEGER,
      "use 1000 (1s) or more, or 0 to leave time out of the key");
  }
  if (u.byStates !== undefined) {
    if (!Array.isArray(u.byStates)) fail(`unique.byStates is ${quoted(u.byStates)}: give an array of job states`);
    u.byStates.forEach((s, i) => {
      if (!(UNIQUE_STATES as readonly string[]).includes(s)) {
        fail(`unique.byStates[${i}] is ${quoted(s)}, no job state: use ${UNIQUE_STATES.join(", ")}`);
      }
      if (u.byStates!.indexOf(s) < i) fail(`unique.byStates[${i}] repeats ${quoted(s)}: name each state once`);
    });
    out.by_states = [...u.byStates];
  }
  return out;
}

function metadataJSON(md: Record<string, string>): Record<string, string> {
  if (md === null || typeof md !== "object" || Array.isArray(md)) fail(`metadata is ${quoted(md)}: give an object of string values`);
  const keys = Object.keys(md).sort();
  if (keys.length > MAX_METADATA_ENTRIES) {
    fail(`metadata has ${keys.length} entries: a job carries at most ${MAX_METADATA_ENTRIES} (bq.MaxMetadataEntries); keep the rest in the job's args`);
  }
  const out: Record<string, string> = {};
  for (const k of keys) {
    checkLabel(k, "metadata key");
    const v = md[k];
    if (typeof v !== "string" || utf8Length(v) < 0 || v.includes("\0")) {
      fail(`metadata value of ${quoted(k)} is not valid UTF-8 text without NUL bytes: store text, e.g. hex or base64 of binary data`);
    }
    out[k] = v;
  }
  const n = utf8Length(JSON.stringify(out));
  if (n > MAX_METADATA_BYTES) {
    fail(`metadata is ${n} bytes as JSON: a job carries at most ${MAX_METADATA_BYTES} (bq.MaxMetadataBytes); keep large values in the job's args`);
  }
  return out;
}

/**
 * encodeOptions checks options by bq's Go rules where a client can and
 * returns the JSON of the inbox row's `options` column ("{}" for none).
 */
export function encodeOptions(options: EnqueueOptions = {}): string {
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    fail(`options is ${quoted(options)}: give an object of EnqueueOptions, or leave it out`);
  }
  refuseUnknown(options, [...KNOWN], "options");
  const o = options;
  const out: Record<string, unknown> = {};
  if (o.queue !== undefined) out.queue = checkQueue(o.queue, "options.queue");
  if (o.priority !== undefined) out.priority = checkPriority(o.priority);
  if (o.slots !== undefined) out.slots = checkSlots(o.slots);
  if (o.runAt !== undefined && o.runInMs !== undefined) {
    fail("options set both runAt and runInMs: give one (runAt for an instant, runInMs for a delay)");
  }
  if (o.runAt !== undefined) out.run_at = runAtJSON(o.runAt);
  if (o.runInMs !== undefined) {
    out.run_in_ms = checkInt(o.runInMs, "options.runInMs", 0, Number.MAX_SAFE_INTEGER, "use a whole number of milliseconds, 0 or more");
  }
  if (o.concurrencyKey !== undefined) out.concurrency_key = keyJSON(o.concurrencyKey, "options.concurrencyKey", false);
  if (o.moreConcurrencyKeys !== undefined) {
    const more = o.moreConcurrencyKeys;
    if (!Array.isArray(more)) fail(`options.moreConcurrencyKeys is ${quoted(more)}: give an array of {key, to?, onConflict?}`);
    if (more.length > MAX_CONCURRENCY_KEYS) {
      fail(`options.moreConcurrencyKeys has ${more.length} keys: a job carries at most ${MAX_CONCURRENCY_KEYS} (bq.MaxConcurrencyKeys), its first among them`);
    }
    out.more_concurrency_keys = more.map((k, i) => keyJSON(k, `options.moreConcurrencyKeys[${i}]`, true));
    const named = more.map((k) => k.key).filter((k) => k !== "");
    named.forEach((k, i) => {
      if (named.indexOf(k) < i) fail(`options.moreConcurrencyKeys names ${quoted(k)} twice: give each key once`);
    });
  }
  if (o.rateKey !== undefined) {
    const r = o.rateKey;
    if (r === null || typeof r !== "object") fail(`options.rateKey is ${quoted(r)}: give {key, limit?, periodMs?}`);
    refuseUnknown(r, ["key", "limit", "periodMs"], "options.rateKey");
    const key = checkKey(r.key, "options.rateKey.key");
    const limit = r.limit ?? 0;
    const periodMs = r.periodMs ?? 0;
    checkRate("options.rateKey", "limit", "periodMs", limit, periodMs, "for the definition's or the queue policy's rate");
    out.rate_key = { key, limit, period_ms: periodMs };
  }
  if (o.unique !== undefined) out.unique = uniqueJSON(o.unique);
  if (o.metadata !== undefined) out.metadata = metadataJSON(o.metadata);
  if (o.tags !== undefined) {
    if (!Array.isArray(o.tags)) fail(`options.tags is ${quoted(o.tags)}: give an array of strings`);
    o.tags.forEach((t) => checkLabel(t, "tag"));
    const tags = o.tags.filter((t, i) => o.tags!.indexOf(t) === i);
    if (tags.length > MAX_TAGS) fail(`options.tags has ${tags.length} tags: a job carries at most ${MAX_TAGS} (bq.MaxTags), its definition's included`);
    out.tags = tags;
  }
  if (o.dependsOn !== undefined) {
    if (!Array.isArray(o.dependsOn)) fail(`options.dependsOn is ${quoted(o.dependsOn)}: give an array of job ids`);
    for (const id of o.dependsOn) {
      if (!Number.isSafeInteger(id) || id <= 0) fail(`options.dependsOn holds ${quoted(id)}: give the ids (positive integers) of stored jobs, e.g. an outcome's jobId`);
    }
    out.depends_on = o.dependsOn;
  }
  if (o.evenIfDependenciesFail) {
    if (!o.dependsOn || o.dependsOn.length === 0) fail("options.evenIfDependenciesFail without dependsOn: name the jobs it waits for");
    out.even_if_dependencies_fail = true;
  }
  return JSON.stringify(out);
}
