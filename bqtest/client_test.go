package bqtest_test

import (
	"context"
	"strings"
	"testing"

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
