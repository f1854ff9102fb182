package bqtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/bqtest"
)

// NewClient's client logs Warn and above to the test, not the Info lines
// of every Run.
func TestNewClientIsQuiet(t *testing.T) {
	ctx := context.Background()
	_, said := record(t, func(tb testing.TB) {
		client := bqtest.NewClient(tb)
		must(Email.Enqueue(ctx, client, EmailArgs{To: "quiet@example.com"}))
		bqtest.Drain(ctx, tb, client)
		bqtest.RequireEnqueued(ctx, tb, client, Email, &bqtest.Opts{Args: EmailArgs{To: "quiet@example.com"}})
	})
	if strings.Contains(said, "bq started") || strings.Contains(said, "bq stopped") {
		t.Errorf("NewClient's client logged Info lines to the test:\n%s", said)
	}
	_, said = record(t, func(tb testing.TB) {
		log := bqtest.Logger(tb)
		log.Info("bq started")
		log.Warn("job failed", "job_id", 7)
	})
	if strings.Contains(said, "bq started") || !strings.Contains(said, "level=WARN msg=\"job failed\" job_id=7") {
		t.Errorf("bqtest.Logger wrote %q; want the Warn line only", said)
	}
}

// WithConfig's Config reaches the client: its queues are the ones
// worked (a job of a queue it leaves out is left ready, which Drain
// reports), and the fields it leaves zero keep the test defaults (Drain
// finishes promptly).
func TestNewClientWithConfig(t *testing.T) {
	ctx := context.Background()
	mustFail(t, func(tb testing.TB) {
		client := bqtest.NewClient(tb, bqtest.WithConfig(bq.Config{Queues: map[string]int{"elsewhere": 1}}))
		must(Email.Enqueue(ctx, client, EmailArgs{To: "left@example.com"}))
		bqtest.Drain(ctx, tb, client, bqtest.DrainTimeout(time.Second))
	}, `queue "bqtest-mail": ready 1`)

	client := bqtest.NewClient(t, bqtest.WithConfig(bq.Config{Queues: map[string]int{"bqtest-mail": 2}}))
	must(Email.Enqueue(ctx, client, EmailArgs{To: "worked@example.com"}))
	start := time.Now()
	bqtest.Drain(ctx, t, client)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Drain took %s with WithConfig's client: the test defaults were lost", took)
	}
	bqtest.RequireEnqueued(ctx, t, client, Email, &bqtest.Opts{Args: EmailArgs{To: "worked@example.com"}, State: bq.StateCompleted})
}
