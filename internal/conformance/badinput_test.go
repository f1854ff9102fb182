package conformance

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

var _ = register(
	scenario{"InvalidSpecs", testInvalidSpecs},
	scenario{"BadDSN", testBadDSN},
	scenario{"Unmigrated", testUnmigrated},
	scenario{"UnknownKindFailsTheJob", testUnknownKind},
	scenario{"UndecodableArgsFailTheJob", testUndecodableArgs},
	scenario{"ConcurrentMigrations", testConcurrentMigrations},
)

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func testInvalidSpecs(t *testing.T, h *harness) {
	ctx := context.Background()
	noop := func(context.Context, Args) error { return nil }
	cases := []struct {
		name string
		opts bq.JobOptions[Args]
		want []string
	}{
		{"negative To", bq.JobOptions[Args]{Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: -1}}, []string{"To is -1", "1 or more"}},
		{"negative Duration", bq.JobOptions[Args]{Concurrency: &bq.Concurrency[Args]{Key: keyOf, Duration: -time.Second}}, []string{"Duration is -1s", "positive"}},
		{"nil Key", bq.JobOptions[Args]{Concurrency: &bq.Concurrency[Args]{To: 2}}, []string{"Key is nil"}},
		{"negative MaxAttempts", bq.JobOptions[Args]{MaxAttempts: -3}, []string{"MaxAttempts is -3"}},
	}
	for _, c := range cases {
		j := bq.Define("c.invalid."+c.name, noop, c.opts)
		if !errors.Is(j.Err(), bq.ErrInvalidJob) {
			t.Errorf("%s: Err() = %v, want ErrInvalidJob", c.name, j.Err())
		}
		_, err := j.Enqueue(ctx, h.client, Args{Key: "k"})
		if !errors.Is(err, bq.ErrInvalidJob) {
			t.Errorf("%s: Enqueue error %v, want ErrInvalidJob", c.name, err)
		}
		wantErr(t, err, c.want...)
	}
	_, err := limit1Job.Enqueue(ctx, h.client, Args{Key: "k"}, bq.WithConcurrencyKey("k", 0))
	if !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("WithConcurrencyKey(k, 0): %v, want ErrInvalidJob", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored by invalid enqueues", n)
	}
}

func testBadDSN(t *testing.T, h *harness) {
	ctx := context.Background()
	_, err := bq.Open(ctx, "")
	wantErr(t, err, "DSN is empty", "sqlite://")
	_, err = bq.Open(ctx, "mongodb://localhost/x")
	wantErr(t, err, "unknown DSN", "mongodb")
	_, err = bq.Open(ctx, "postgres://nobody:secret@127.0.0.1:1/none?connect_timeout=2")
	wantErr(t, err, "PostgreSQL")
	if err != nil && strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q leaks the password", err)
	}
	_, err = bq.Open(ctx, "sqlite:///nonexistent-dir-bq/sub/x.db")
	wantErr(t, err, "SQLite")
}

func testUnmigrated(t *testing.T, h *harness) {
	ctx := context.Background()
	for _, db := range selected(t) {
		if db.name != h.db {
			continue
		}
		c, err := bq.Open(ctx, db.fresh(t), testConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = unkeyedJob.Enqueue(ctx, c, Args{})
		if !errors.Is(err, bq.ErrNotMigrated) {
			t.Errorf("Enqueue on an unmigrated database: %v, want ErrNotMigrated", err)
		}
		wantErr(t, err, "Migrate")
		if err := c.Run(ctx); !errors.Is(err, bq.ErrNotMigrated) {
			t.Errorf("Run on an unmigrated database: %v, want ErrNotMigrated", err)
		}
	}
}

// insertRaw stores a job as another binary might have, bypassing Define.
func insertRaw(t *testing.T, h *harness, kind, args string) int64 {
	t.Helper()
	ctx := context.Background()
	j := &driver.NewJob{Kind: kind, Queue: "default", Args: []byte(args), MaxAttempts: 3, ScheduledAt: time.Now()}
	err := driver.InTx(ctx, h.driver(), func(ex driver.Executor) error {
		_, _, err := lifecycle.Enqueue(ctx, ex, []*driver.NewJob{j}, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

func testUnknownKind(t *testing.T, h *harness) {
	id := insertRaw(t, h, "c.nobody.defines.this", `{}`)
	worker(h, 1)
	h.waitState(id, bq.StateFailed)
	info := jobInfo(t, h, id)
	if !strings.Contains(info.LastError, `unknown job kind "c.nobody.defines.this"`) {
		t.Errorf("error %q: want it to name the unknown kind", info.LastError)
	}
}

func testUndecodableArgs(t *testing.T, h *harness) {
	id := insertRaw(t, h, "c.once", `{"Seq": "not a number"}`)
	worker(h, 1)
	h.waitState(id, bq.StateFailed)
	info := jobInfo(t, h, id)
	if !strings.Contains(info.LastError, `decode args of job kind "c.once"`) {
		t.Errorf("error %q: want it to say the args did not decode", info.LastError)
	}
	if info.Attempts != 1 {
		t.Errorf("attempts %d: args that cannot decode must not be retried", info.Attempts)
	}
}

// testConcurrentMigrations: processes starting at once may all migrate a
// fresh database; each waits for the others (PostgreSQL: an advisory
// lock; MySQL: a named server lock; SQLite: a lock file), so none fails
// half-way on a table another just created.
func testConcurrentMigrations(t *testing.T, h *harness) {
	for _, db := range selected(t) {
		if db.name != h.db {
			continue
		}
		dsn := db.fresh(t)
		var cmds []*exec.Cmd
		for range 4 {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "BQ_HELPER=migrate", "BQ_DSN="+dsn)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("a migrating process failed: %v", err)
			}
		}
		if _, err := unkeyedJob.Enqueue(context.Background(), h.clientAt(dsn), Args{}); err != nil {
			t.Errorf("enqueue after the migrations: %v", err)
		}
	}
}
