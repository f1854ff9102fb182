// Package bqtest helps test code that uses bq: a migrated SQLite client
// in one line (NewClient), assertions on the jobs a piece of code
// enqueued (RequireEnqueued, RequireNotEnqueued, RequireManyEnqueued,
// and their Tx forms, which read through the caller's open
// transaction), a job's function run with a real job context and no
// database (Work), and a way to run every ready job to the end (Drain).
//
// The assertions and Drain take any *bq.Client, on SQLite, PostgreSQL
// or MySQL alike. Every helper takes a testing.TB and reports through
// it: a failure names what was found instead of what was wanted.
// docs/testing.md walks through them.
package bqtest

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
	_ "github.com/bqueue/bq/drivers/sqlite" // NewClient's database
)

// NewClient returns a client on a fresh SQLite database in tb's
// temporary directory, migrated, and closed when the test ends. Its
// workers poll and its dispatcher runs every 50 ms, so Drain finishes
// promptly; it logs to tb.Log at Warn and above only (Logger). A file
// rather than an in-memory database lets the test hold a transaction
// open while workers run, as an application does. WithConfig gives it a
// Config of the test's own (periodic jobs, queues, middleware).
func NewClient(tb testing.TB, opts ...ClientOption) *bq.Client {
	tb.Helper()
	var o clientOptions
	for i, opt := range opts {
		if opt == nil {
			tb.Fatalf("bqtest.NewClient: option %d is nil: pass options such as bqtest.WithConfig(cfg), or leave it out", i)
		}
		opt(&o)
	}
	cfg := o.cfg
	if cfg.Logger == nil {
		cfg.Logger = Logger(tb)
	}
	cfg.PollInterval = cmp.Or(cfg.PollInterval, 50*time.Millisecond)
	cfg.DispatchInterval = cmp.Or(cfg.DispatchInterval, 50*time.Millisecond)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, 5*time.Second)
	if !o.gauges {
		cfg.NoGauges = true
	}
	ctx := context.Background()
	dsn := "sqlite://" + filepath.Join(tb.TempDir(), "jobs.db")
	client, err := bq.Open(ctx, dsn, cfg)
	if err != nil {
		tb.Fatalf("bqtest.NewClient: %v", err)
	}
	tb.Cleanup(func() {
		if err := client.Close(); err != nil {
			tb.Errorf("bqtest.NewClient: close the client: %v", err)
		}
	})
	if err := client.Migrate(ctx); err != nil {
		tb.Fatalf("bqtest.NewClient: migrate: %v", err)
	}
	return client
}

// ClientOption configures NewClient.
type ClientOption func(*clientOptions)

type clientOptions struct {
	cfg    bq.Config
	gauges bool
}

// WithConfig makes NewClient's client with cfg. The fields cfg leaves
// zero keep NewClient's test defaults: Logger (tb.Log at Warn), 50 ms
// PollInterval and DispatchInterval, a 5 s ShutdownTimeout; gauges stay
// off unless cfg's MeterProvider is set.
func WithConfig(cfg bq.Config) ClientOption {
	return func(o *clientOptions) { o.cfg, o.gauges = cfg, cfg.MeterProvider != nil && !cfg.NoGauges }
}

// Logger returns a logger for bq.Config.Logger that writes to tb.Log at
// Warn and above: a failing job or a reaped claim shows in the test's
// output, the Info lines of every Run ("bq started", "bq stopped") do
// not. Lines logged after the test ended, by a goroutine it left
// behind, are dropped rather than panicking in testing.
func Logger(tb testing.TB) *slog.Logger {
	w := &tbWriter{tb: tb}
	tb.Cleanup(w.stop) // registered before the caller's, so it runs after them
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn,
		// The test's output orders the lines; a timestamp only widens them.
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
}

// tbWriter writes log lines to a test's log while the test runs.
type tbWriter struct {
	mu   sync.Mutex
	tb   testing.TB
	done bool
}

var _ io.Writer = (*tbWriter)(nil)

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tbWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
