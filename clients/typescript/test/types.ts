// Compiled, never run (make test-typescript: tsc -p test): the public
// API's types as a user's code meets them. Each @ts-expect-error line must
// stay an error: a mistake the compiler catches before the client does.
import * as bq from "../dist/index";

declare const client: { query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }> };
declare const conn: { query(sql: string, values: unknown[], cb?: (err: Error | null, r?: any) => void): unknown; escapeId(id: string): string };

export async function uses(): Promise<string> {
  const h: bq.InboxHandle = await bq.enqueue(client, "billing.charge", { orderId: 42 }, {
    queue: "billing", priority: 5, runInMs: 1000,
    concurrencyKey: { key: "acme", to: 2, onConflict: "discard" },
    moreConcurrencyKeys: [{ key: "exports/global", to: 10 }],
    rateKey: { key: "api", limit: 10, periodMs: 1000 },
    unique: { byArgs: true, byStates: ["ready", "running"] },
    metadata: { requestId: "r1" }, tags: ["a"],
  });
  const hs: bq.InboxHandle[] = await bq.enqueueMany(bq.mysql(conn, { prefix: "app_" }), "k", [{}, { a: 1 }]);
  const o: bq.Outcome = await bq.wait(client, h.id, { timeoutMs: 10 });
  const ps: bq.StoredPolicy[] = await bq.listPolicies(conn);
  await bq.syncPolicies(client, "svc", [{ queue: "mail", maxActive: 20, maxActivePerKey: 3 }]);
  const health: bq.Health = await bq.health(client);
  // @ts-expect-error: onConflict is "block" or "discard"
  await bq.enqueue(client, "k", {}, { concurrencyKey: { key: "x", onConflict: "drop" } });
  // @ts-expect-error: options are camelCase; run_at is the JSON's name
  await bq.enqueue(client, "k", {}, { run_at: "2026-12-06T10:00:00Z" });
  // @ts-expect-error: a unique state is a job state
  await bq.enqueue(client, "k", {}, { unique: { byStates: ["done"] } });
  // @ts-expect-error: args are an object
  await bq.enqueue(client, "k", 42);
  // @ts-expect-error: a policy names its queue
  await bq.syncPolicies(client, "svc", [{ maxActive: 1 }]);
  return `${hs.length} ${o.outcome} ${o.jobId ?? ""} ${o.detail ?? ""} ${ps.length} ${health.inboxPending}`;
}
