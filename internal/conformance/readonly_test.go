package conformance

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/drivers/sqlite"
)

var _ = register(
	scenario{"ReadOnlyDatabaseRefusedClearly", testReadOnly},
)

// testReadOnly: a client whose database takes no writes (PostgreSQL's
// default_transaction_read_only, as on a standby; MariaDB's read-only
// transactions; SQLite's query_only) refuses an enqueue and a pause with
// ErrReadOnly, whose message names the fix, stores nothing, and leaves a
// writable client of the same database working.
func testReadOnly(t *testing.T, h *harness) {
	ctx := context.Background()
	var ro *bq.Client
	sep := "?"
	if strings.Contains(h.dsn, "?") {
		sep = "&"
	}
	switch h.db {
	case "postgres":
		ro = h.clientAt(h.dsn + sep + "default_transaction_read_only=on")
	case "mysql":
		ro = h.clientAt(h.dsn + sep + "tx_read_only=1")
	case "sqlite":
		path, err := sqlite.ParseURL(h.dsn)
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", sqlite.DSN(path)+"&_pragma=query_only(1)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		ro, err = bq.NewClient(sqlite.New(db), testConfig())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ro.Close() })
	default:
		t.Fatalf("no read-only connection for %s", h.db)
	}
	_, err := unkeyedJob.Enqueue(ctx, ro, Args{Test: h.test})
	if !errors.Is(err, bq.ErrReadOnly) || !strings.Contains(err.Error(), "point bq at the primary") {
		t.Errorf("enqueue on a read-only database: %v; want ErrReadOnly naming the fix", err)
	}
	if err := ro.PauseQueue(ctx, "default"); !errors.Is(err, bq.ErrReadOnly) {
		t.Errorf("pause on a read-only database: %v; want ErrReadOnly", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`) + h.count(`SELECT count(*) FROM bq_paused_queues`); n != 0 {
		t.Errorf("%d rows stored through the read-only client, want none", n)
	}
	if res, err := unkeyedJob.Enqueue(ctx, h.client, Args{Test: h.test}); err != nil || res.State != bq.StateReady {
		t.Errorf("enqueue through the writable client: %+v, %v", res, err)
	}
}
