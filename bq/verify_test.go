package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/testdb"
)

// bumpFree adds one free slot to key's semaphore behind bq's back, as a
// lost release or a hand-edited row would: the drift bq verify finds.
func bumpFree(t *testing.T, c *bq.Client, db, key string) {
	t.Helper()
	q := `UPDATE bq_semaphores SET value = value + 1 WHERE "key" = ?`
	switch db {
	case testdb.Postgres:
		q = `UPDATE bq_semaphores SET value = value + 1 WHERE "key" = $1`
	case testdb.MySQL:
		q = "UPDATE bq_semaphores SET value = value + 1 WHERE `key` = ?"
	}
	res, err := driver.ClientEngine(c).SQLDB().ExecContext(context.Background(), q, key)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("bump the semaphore of %q: %d rows updated, want 1", key, n)
	}
}

// TestVerifyCommand: bq verify says a consistent database has no drift
// and exits 0; a semaphore drifted by a raw UPDATE is reported (its key
// escaped as bq status writes keys) and exits 1, as text and JSON;
// --repair mends it (exit 0, "repaired") and a second run finds nothing.
func TestVerifyCommand(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			dsn, c := migratedClient(t, ctx, db)
			// Key a1 (limit 1): one ready holder, two blocked behind it;
			// a key with a terminal escape in it: one ready holder.
			const a1, odd = "cli_test.inspect/a1", "cli_test.inspect/x\x1b[2Jy"
			for _, account := range []string{"a1", "a1", "a1", "x\x1b[2Jy"} {
				if _, err := inspectJob.Enqueue(ctx, c, inspectArgs{Account: account}); err != nil {
					t.Fatal(err)
				}
			}

			code, out, errOut := bqCmd(t, ctx, "verify", "--dsn", dsn)
			if code != 0 || out != "checked 2 semaphores: no drift\n" || errOut != "" {
				t.Fatalf("bq verify of a consistent database: exit %d, stdout %q, stderr %q; want exit 0 and no drift", code, out, errOut)
			}

			bumpFree(t, c, db.name, a1)
			bumpFree(t, c, db.name, odd)
			code, out, errOut = bqCmd(t, ctx, "verify", "--dsn", dsn)
			t.Logf("bq verify after the drift:\n%s%s", out, errOut)
			if code != 1 {
				t.Errorf("bq verify with drift: exit %d, want 1", code)
			}
			wantIn(t, out, "checked 2 semaphores: 2 drifts, 0 repaired\n",
				"free  key cli_test.inspect/a1           free 1, want 0 (limit 1, 1 holders)\n",
				`free  key cli_test.inspect/x\u001b[2Jy  free 1, want 0 (limit 1, 1 holders)`+"\n")
			if strings.Contains(out, "\x1b") || strings.Contains(out, "  repaired") {
				t.Errorf("bq verify wrote a raw escape, or called unrepaired drift repaired:\n%q", out)
			}
			if want := "bq: verify: 2 drifts found; run 'bq verify --repair' to mend it\n"; errOut != want {
				t.Errorf("bq verify with drift: stderr %q, want %q", errOut, want)
			}

			code, out, _ = bqCmd(t, ctx, "verify", "--json", "--dsn", dsn)
			var doc map[string]any
			if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 {
				t.Fatalf("bq verify --json with drift: exit %d, %v\n%s", code, err, out)
			}
			wantSnakeCase(t, "", doc)
			var r bq.VerifyReport
			if err := json.Unmarshal([]byte(out), &r); err != nil || r.Semaphores != 2 || len(r.Drift) != 2 ||
				r.Drift[0] != (bq.Drift{Kind: bq.DriftFree, Key: a1, Detail: "free 1, want 0 (limit 1, 1 holders)"}) || r.Drift[1].Key != odd {
				t.Errorf("bq verify --json: %v, %+v\n%s", err, r, out)
			}
			if strings.Contains(out, "\x1b") {
				t.Errorf("bq verify --json wrote a raw escape:\n%q", out)
			}

			code, out, errOut = bqCmd(t, ctx, "verify", "--repair", "--dsn", dsn)
			if code != 0 || errOut != "" {
				t.Errorf("bq verify --repair: exit %d, stderr %q; want exit 0", code, errOut)
			}
			wantIn(t, out, "checked 2 semaphores: 2 drifts, 2 repaired\n",
				"free  key cli_test.inspect/a1           free 1, want 0 (limit 1, 1 holders)  repaired\n")
			k, err := c.KeyState(ctx, a1)
			if err != nil || k.Free != 0 || k.Blocked != 2 {
				t.Errorf("after --repair, key a1: %+v, %v; want 0 free and 2 blocked", k, err)
			}

			code, out, errOut = bqCmd(t, ctx, "verify", "--dsn", dsn)
			if code != 0 || out != "checked 2 semaphores: no drift\n" || errOut != "" {
				t.Errorf("bq verify after --repair: exit %d, stdout %q, stderr %q; want exit 0 and no drift", code, out, errOut)
			}
			code, out, _ = bqCmd(t, ctx, "verify", "--json", "--dsn", dsn)
			if code != 0 || !strings.Contains(out, `"drift": []`) {
				t.Errorf("bq verify --json without drift: exit %d; want 0 and an empty drift list:\n%s", code, out)
			}
		})
	}
}

// TestVerifyUsage: bq verify takes no argument.
func TestVerifyUsage(t *testing.T) {
	code, out, errOut := bqCmd(t, context.Background(), "verify", "--dsn", "sqlite::memory:", "all")
	want := "bq verify: unexpected argument \"all\"\nrun 'bq verify -h' for its flags\n"
	if code != 2 || errOut != want || out != "" {
		t.Errorf("bq verify all: exit %d, stderr %q; want exit 2 and %q", code, errOut, want)
	}
}

// TestPrintVerify: an unreaped claim is written by its job, with its key
// escaped; repaired drift says so and the rest does not.
func TestPrintVerify(t *testing.T) {
	var buf bytes.Buffer
	err := printVerify(&buf, &bq.VerifyReport{Semaphores: 1, Drift: []bq.Drift{
		{Kind: bq.DriftStuck, Key: "g/k", Detail: "1 free slots while 3 jobs wait in its line", Repaired: true},
		{Kind: bq.DriftUnreaped, JobID: 42, Key: "g/\u202ek", Detail: "claimed 2026-01-02T03:04:05Z by a process silent past 30s"},
		{Kind: bq.DriftUnreaped, JobID: 43, Detail: "claimed 2026-01-02T03:04:05Z by a process silent past 30s"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := "checked 1 semaphore: 3 drifts, 1 repaired\n" +
		"stuck     key g/k                 1 free slots while 3 jobs wait in its line  repaired\n" +
		"unreaped  job 42 (key g/\\u202ek)  claimed 2026-01-02T03:04:05Z by a process silent past 30s\n" +
		"unreaped  job 43                  claimed 2026-01-02T03:04:05Z by a process silent past 30s\n"
	if buf.String() != want {
		t.Errorf("printVerify:\n%s\nwant:\n%s", buf.String(), want)
	}
}
