package bq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/bqueue/bq"
)

type tenantKey struct{}

// Greet is a job whose own middleware runs inside the client's.
var Greet = bq.Define("example.greet", func(ctx context.Context, a ExportArgs) error {
	job, _ := bq.JobFromContext(ctx)
	fmt.Println("job: hello", a.Tenant, "tenant metadata", job.Metadata["tenant"])
	return nil
}, bq.JobOptions[ExportArgs]{
	Queue: "greetings",
	Middleware: []bq.WorkerMiddleware{func(ctx context.Context, job bq.JobMeta, next func(context.Context) error) error {
		fmt.Println("greet middleware: before")
		return next(ctx)
	}},
})

// exampleClientWith opens a migrated SQLite database with cfg.
func exampleClientWith(cfg bq.Config) (*bq.Client, func()) {
	dir, _ := os.MkdirTemp("", "bq-example")
	ctx := context.Background()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	client, err := bq.Open(ctx, "sqlite://"+filepath.Join(dir, "jobs.db"), cfg)
	if err != nil {
		panic(err)
	}
	if err := client.Migrate(ctx); err != nil {
		panic(err)
	}
	return client, func() { client.Close(); os.RemoveAll(dir) }
}

// An enqueue hook copies the tenant of the request's context into each
// job's metadata; a worker middleware wraps every run, outside the
// definition's own.
func ExampleWorkerMiddleware() {
	tenantHook := func(ctx context.Context, job *bq.PendingJob) error {
		if t, ok := ctx.Value(tenantKey{}).(string); ok {
			job.Metadata["tenant"] = t
		}
		return nil
	}
	logRuns := func(ctx context.Context, job bq.JobMeta, next func(context.Context) error) error {
		fmt.Println("client middleware: start", job.Kind, "attempt", job.Attempt)
		err := next(ctx)
		fmt.Println("client middleware: done, error:", err)
		return err
	}
	client, done := exampleClientWith(bq.Config{
		Queues:           map[string]int{"greetings": 1},
		EnqueueHooks:     []bq.EnqueueHook{tenantHook},
		WorkerMiddleware: []bq.WorkerMiddleware{logRuns},
	})
	defer done()
	ctx := context.WithValue(context.Background(), tenantKey{}, "acme")
	res, err := Greet.Enqueue(ctx, client, ExportArgs{Tenant: "acme"})
	if err != nil {
		panic(err)
	}
	run, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- client.Run(run) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if info, _ := client.Job(ctx, res.ID); info != nil && info.State == bq.StateCompleted {
			break
		}
	}
	stop()
	<-stopped
	// Output:
	// client middleware: start example.greet attempt 1
	// greet middleware: before
	// job: hello acme tenant metadata acme
	// client middleware: done, error: <nil>
}

// errNotFound is what a job returns for input that will never succeed.
var errNotFound = errors.New("not found")

// reporter sends failures to an error tracker, and makes "not found"
// permanent so that it is not retried.
type reporter struct{ log *slog.Logger }

func (r reporter) HandleError(ctx context.Context, job bq.JobMeta, err error) bq.ErrorAction {
	r.log.Error("job attempt failed", "job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt, "error", err)
	return bq.ErrorAction{Permanent: errors.Is(err, errNotFound)}
}

func (r reporter) HandlePanic(ctx context.Context, job bq.JobMeta, v any, stack string) bq.ErrorAction {
	r.log.Error("job panicked", "job_id", job.ID, "kind", job.Kind, "panic", v, "stack", stack)
	// A panic is a bug: stop retrying the job until it is fixed.
	return bq.ErrorAction{Permanent: true}
}

// An ErrorHandler sees every failed attempt and panic, and may make the
// failure permanent or a snooze.
func ExampleErrorHandler() {
	cfg := bq.Config{ErrorHandler: reporter{log: slog.Default()}}
	_ = cfg // bq.Open(ctx, dsn, cfg)
}
