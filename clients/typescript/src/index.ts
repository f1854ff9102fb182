// bq's TypeScript client: enqueue jobs for bq's Go processes through the
// inbox table, from PostgreSQL (pg) or MySQL/MariaDB (mysql, mysql2), in
// the caller's transaction. See README.md.

export { postgres, mysql, database, inTransaction, DEFAULT_PREFIX } from "./db";
export type { Conn, Database, DatabaseOptions, Dialect, MysqlQueryable, PgQueryable, Queryable } from "./db";
export { enqueue, enqueueMany, wait } from "./enqueue";
export type { InboxHandle, Outcome, OutcomeWord, WaitOptions } from "./enqueue";
export { encodeOptions } from "./options";
export type { ConcurrencyKey, EnqueueOptions, KeyLimit, OnConflict, RateKey, Unique, UniqueState } from "./options";
export { syncPolicies, listPolicies } from "./policies";
export type { Policy, StoredPolicy } from "./policies";
export { health } from "./health";
export type { Health, InboxKindHealth, QueueHealth } from "./health";
export { BqError, InboxRowNotFoundError, InvalidArgumentError, PolicyConflictError, WaitTimeoutError } from "./errors";
export { MAX_ARGS_BYTES, MAX_CONCURRENCY_KEYS, MAX_KEY_BYTES, MAX_RATE_LIMIT, MAX_SLOTS } from "./validate";
