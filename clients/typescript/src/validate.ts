// The rules of bq's Go enqueue (job.go validateQueue / validateKey /
// validateTo, rate.go validateRate, unique.go, enqueue_labels.go and
// sizes) that a client can check before a row reaches the inbox. The Go
// side checks every rule again when it admits the row (a broken one ends
// as outcome "refused"); checking here turns a mistake into an exception
// at the call, where the stack trace points at it.

import { InvalidArgumentError } from "./errors";

/** The longest full concurrency key, Group + "/" + Key, in bytes (bq.MaxKeyBytes). */
export const MAX_KEY_BYTES = 2048;
/** The most concurrency keys one job carries, its first among them (bq.MaxConcurrencyKeys). */
export const MAX_CONCURRENCY_KEYS = 4;
/** The most starts per period a rate may allow (bq.MaxRateLimit). */
export const MAX_RATE_LIMIT = 10_000;
/** The largest args, as JSON bytes (bq.MaxArgsBytes). */
export const MAX_ARGS_BYTES = 1 << 20;
/** Metadata and tag bounds (bq.MaxMetadataEntries, MaxMetadataBytes, MaxTags, MaxLabelBytes). */
export const MAX_METADATA_ENTRIES = 32;
export const MAX_METADATA_BYTES = 4096;
export const MAX_TAGS = 16;
export const MAX_LABEL_BYTES = 64;
const MAX_QUEUE_BYTES = 128;
const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

const QUEUE_RULE = "use 1 to 128 ASCII letters, digits, '_', '-', '.' or ':', starting with a letter or digit";
const LABEL_RULE = "use 1 to 64 ASCII letters, digits, '_', '-', '.' or ':'";
const KEY_RULE = `keys (Group + "/" + Key) are valid UTF-8 without NUL bytes, at most ${MAX_KEY_BYTES} bytes (bq.MaxKeyBytes); hash a longer or binary key, e.g. hex of its SHA-256`;

/** The job states a unique spec may name (bq.Unique.ByStates). */
export const UNIQUE_STATES = ["scheduled", "ready", "blocked", "running", "completed", "failed", "discarded", "cancelled", "waiting"] as const;

/** quoted spells a value in a message as Go's %q would, near enough. */
export function quoted(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

export function fail(message: string): never {
  throw new InvalidArgumentError(message);
}

/**
 * utf8Length is the byte length of s as UTF-8, or -1 when s holds a lone
 * surrogate, which has no UTF-8 spelling.
 */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (d < 0xdc00 || d > 0xdfff) return -1;
      n += 4;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return -1;
    else n += 3;
  }
  return n;
}

function isWord(s: string, maxBytes: number, first: RegExp): boolean {
  return s.length >= 1 && s.length <= maxBytes && first.test(s[0]) && /^[A-Za-z0-9_.:-]+$/.test(s);
}

/** checkQueue is Go's validateQueue. */
export function checkQueue(q: unknown, what = "queue"): string {
  if (typeof q !== "string" || !isWord(q, MAX_QUEUE_BYTES, /[A-Za-z0-9]/)) {
    fail(`${what}: queue name ${quoted(q)} is invalid: ${QUEUE_RULE}`);
  }
  return q;
}

/** checkKey is Go's validateKey, for a key given to the client. */
export function checkKey(key: unknown, what: string): string {
  if (typeof key !== "string") fail(`${what} is ${quoted(key)}, not a string: give the key as text`);
  const n = utf8Length(key);
  if (n < 0) fail(`${what}: concurrency key ${quoted(key)} is not valid UTF-8: ${KEY_RULE}`);
  if (n > MAX_KEY_BYTES) fail(`${what}: concurrency key ${quoted(key)} is ${n} bytes long: ${KEY_RULE}`);
  if (key.includes("\0")) fail(`${what}: concurrency key ${quoted(key)} has a NUL byte: ${KEY_RULE}`);
  return key;
}

/** checkInt refuses what is not a whole number in [min, max]. */
export function checkInt(v: unknown, what: string, min: number, max: number, fix: string): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    fail(`${what} is ${quoted(v)}: ${fix}`);
  }
  return v;
}

/** checkTo is Go's validateTo: a limit per key, 0 for the default. */
export function checkTo(to: unknown, what: string): number {
  return checkInt(to, what, 0, INT32_MAX,
    "use 1 or more jobs at once per key, or 0 for the default (the queue policy's MaxActivePerKey, else 1)");
}

export function checkPriority(p: unknown): number {
  return checkInt(p, "priority", INT32_MIN, INT32_MAX, `use a whole number between ${INT32_MIN} and ${INT32_MAX}`);
}

/** MAX_SLOTS is bq.MaxSlots: the most slots a job takes of each of its keys. */
export const MAX_SLOTS = 1000;

/** checkSlots is the range rule of Go's Slots (the rules that need the job's keys are checked by the Go side). */
export function checkSlots(k: unknown): number {
  if (typeof k !== "number" || !Number.isInteger(k) || k < 0 || k > MAX_SLOTS) {
    fail(`Slots is ${quoted(k)}: use 1 to ${MAX_SLOTS} (bq.MaxSlots), or 0 for 1`);
  }
  return k;
}

/** checkOnConflict is Go's OnConflict: "block" (the default), "discard", "replace" or "cancel_running". */
export function checkOnConflict(v: unknown, what: string): "block" | "discard" | "replace" | "cancel_running" {
  if (v !== "block" && v !== "discard" && v !== "replace" && v !== "cancel_running") {
    fail(`${what} is ${quoted(v)}: use "block" (wait for the key's slot), "discard" (drop the job when the key is full), "replace" (take the place of the key's queued jobs) or "cancel_running" (and stop its running ones)`);
  }
  return v;
}

/**
 * checkRate is Go's validateRateNamed: both 0 (the queue policy's rate),
 * or 1 to MAX_RATE_LIMIT starts per whole period of at least 1 ms.
 */
export function checkRate(what: string, limitName: string, periodName: string, limit: number, periodMs: number, bothZero: string): void {
  if (limit === 0 && periodMs === 0) return;
  const errs: string[] = [];
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1) {
    errs.push(`${what} ${limitName} is ${quoted(limit)}: use 1 to ${MAX_RATE_LIMIT} starts per period`);
  } else if (limit > MAX_RATE_LIMIT) {
    errs.push(`${what} ${limitName} is ${limit}: at most ${MAX_RATE_LIMIT} starts per period (bq.MaxRateLimit); count over a shorter period`);
  }
  if (periodMs === 0) {
    errs.push(`${what} ${periodName} is 0: set it to the window the starts count in, e.g. 1000 for ${limit} starts a second`);
  } else if (typeof periodMs !== "number" || !Number.isInteger(periodMs) || periodMs < 1) {
    errs.push(`${what} ${periodName} is ${quoted(periodMs)}: use whole milliseconds, 1 or more`);
  }
  if (errs.length > 0) fail(`${errs.join("; ")} (or set ${limitName} and ${periodName} both to 0 ${bothZero})`);
}

/** checkLabel is Go's validateLabel: a metadata key or a tag. */
export function checkLabel(s: unknown, what: string): string {
  if (typeof s !== "string" || !isWord(s, MAX_LABEL_BYTES, /./)) fail(`${what} ${quoted(s)} is invalid: ${LABEL_RULE}`);
  return s;
}

/** checkKind refuses a kind no Go definition can have. */
export function checkKind(kind: unknown): string {
  if (typeof kind !== "string" || kind === "") {
    fail(`kind is ${quoted(kind)}: give the job kind's name as its Go definition has it, e.g. "billing.charge" for bq.Define("billing.charge", ...)`);
  }
  if (utf8Length(kind) < 0 || kind.includes("\0") || utf8Length(kind) > 255) {
    fail(`kind ${quoted(kind)} is not a job name: use the name of a Go definition (valid UTF-8, at most 255 bytes)`);
  }
  return kind;
}

/**
 * encodeArgs refuses args that are not a JSON object (bq decodes them
 * into the job's Go struct) and returns their JSON.
 */
export function encodeArgs(args: unknown, what = "args"): string {
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    fail(`${what} is ${args === null ? "null" : Array.isArray(args) ? "an array" : typeof args}: give a plain object, encoded as the JSON object the job's Go args type decodes (e.g. {orderId: 42} for struct{ OrderID int64 \`json:"orderId"\` })`);
  }
  let raw: string | undefined;
  try {
    raw = JSON.stringify(args);
  } catch (e) {
    fail(`${what} do not encode as JSON: ${(e as Error).message}: give plain data (no cycles, no BigInt)`);
  }
  if (raw === undefined || raw[0] !== "{") fail(`${what} do not encode as a JSON object: give a plain object`);
  const n = utf8Length(raw);
  if (n < 0) fail(`${what} hold a string that is not valid UTF-8 (a lone surrogate): give text`);
  if (n > MAX_ARGS_BYTES) {
    fail(`${what} encode to ${n} bytes of JSON, over the limit of ${MAX_ARGS_BYTES} (bq.MaxArgsBytes): keep large payloads in storage of your own and pass a reference (an id, a URL) in the args`);
  }
  return raw;
}
