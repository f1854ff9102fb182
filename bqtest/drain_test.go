package bqtest_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/bqtest"
)

// Drain runs jobs, the jobs they enqueue and the blocked jobs their
// completions promote, and leaves jobs due later.
func TestDrainRunsEverythingReady(t *testing.T) {
	client := bqtest.NewClient(t)
	ctx := withClient(context.Background(), client)
	sent.Delete("order-11")
	for range 3 { // one key, limit 1: two of them wait blocked
		must(Charge.Enqueue(ctx, client, ChargeArgs{OrderID: 11}))
	}
	later := must(Report.Enqueue(ctx, client, struct{}{}, bq.In(time.Hour)))
	bqtest.RequireManyEnqueued(ctx, t, client, []bqtest.Expectation{
		bqtest.Expect(Charge, &bqtest.Opts{State: bq.StateReady}),
		bqtest.Expect(Charge, &bqtest.Opts{State: bq.StateBlocked}),
		bqtest.Expect(Charge, &bqtest.Opts{State: bq.StateBlocked}),
	})

	_, said := record(t, func(tb testing.TB) { bqtest.Drain(ctx, tb, client) })
	if !strings.Contains(said, "bqtest.Drain: left 1 scheduled job due later") {
		t.Errorf("Drain said %q; want it to say it left the scheduled job", said)
	}
	done := &bqtest.Opts{State: bq.StateCompleted}
	bqtest.RequireManyEnqueued(ctx, t, client, []bqtest.Expectation{
		bqtest.Expect(Charge, done), bqtest.Expect(Charge, done), bqtest.Expect(Charge, done),
		bqtest.Expect(Email, &bqtest.Opts{State: bq.StateCompleted, Args: EmailArgs{To: "order-11", Subject: "receipt"}}),
		bqtest.Expect(Email, done), bqtest.Expect(Email, done),
	})
	if n, _ := sent.Load("order-11"); n == nil || n.(*atomic.Int64).Load() != 3 {
		t.Errorf("order-11's receipt sent %v times, want 3", n)
	}
	bqtest.RequireEnqueued(ctx, t, client, Report, &bqtest.Opts{State: bq.StateScheduled})
	if info := must(client.Job(ctx, later.ID)); info.State != bq.StateScheduled {
		t.Errorf("the job due in an hour is %s, want scheduled", info.State)
	}

	// The client runs again, for a second Drain.
	must(Email.Enqueue(ctx, client, EmailArgs{To: "second@example.com"}))
	bqtest.Drain(ctx, t, client)
	bqtest.RequireEnqueued(ctx, t, client, Email, &bqtest.Opts{State: bq.StateCompleted, Args: EmailArgs{To: "second@example.com"}})
}

// A Drain that times out fails naming what is left.
func TestDrainReportsWhatIsLeft(t *testing.T) {
	client := bqtest.NewClient(t)
	ctx := context.Background()
	if err := client.PauseQueue(ctx, "bqtest-reports"); err != nil {
		t.Fatal(err)
	}
	res := must(Report.Enqueue(ctx, client, struct{}{}))
	start := time.Now()
	mustFail(t, func(tb testing.TB) { bqtest.Drain(ctx, tb, client, bqtest.DrainTimeout(300*time.Millisecond)) },
		"bqtest.Drain: work left after 300ms:",
		`queue "bqtest-reports" (paused): ready 1, running 0, blocked 0, scheduled 0, failed 0`,
		"job 1 bqtest.report [ready]")
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("Drain gave up after %s, before its timeout", waited)
	}
	if info := must(client.Job(ctx, res.ID)); info.State != bq.StateReady {
		t.Errorf("the paused queue's job is %s, want ready", info.State)
	}
	mustFail(t, func(tb testing.TB) { bqtest.Drain(ctx, tb, client, bqtest.DrainTimeout(0)) }, "DrainTimeout(0s): use a positive duration")
	mustFail(t, func(tb testing.TB) { bqtest.Drain(ctx, tb, nil) }, "the client is nil")

	unmigrated := must(bq.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "jobs.db"), bq.Config{Logger: bqtest.Logger(t)}))
	defer unmigrated.Close()
	mustFail(t, func(tb testing.TB) { bqtest.Drain(ctx, tb, unmigrated) }, "bqtest.Drain: the client stopped before the work ended:", "run client.Migrate(ctx)")
}

var flakyRuns atomic.Int64

// Flaky fails every attempt; its retries wait DefaultBackoff.
var Flaky = bq.Define("bqtest.flaky", func(context.Context, struct{}) error {
	flakyRuns.Add(1)
	return errBoom
}, bq.JobOptions[struct{}]{Queue: "bqtest-flaky", MaxAttempts: 5})

// A failed attempt's retry is due later: Drain leaves it scheduled,
// having run the job once.
func TestDrainLeavesRetriesDueLater(t *testing.T) {
	client := bqtest.NewClient(t)
	ctx := context.Background()
	flakyRuns.Store(0)
	res := must(Flaky.Enqueue(ctx, client, struct{}{}))
	_, said := record(t, func(tb testing.TB) { bqtest.Drain(ctx, tb, client) })
	if !strings.Contains(said, "left 1 scheduled job due later") {
		t.Errorf("Drain said %q; want it to say it left the retry", said)
	}
	info := must(client.Job(ctx, res.ID))
	if info.State != bq.StateScheduled || info.Attempts != 1 || info.LastError != "boom" || flakyRuns.Load() != 1 {
		t.Errorf("after Drain the flaky job is %s after %d attempts (%q), run %d times; want scheduled for its retry after one",
			info.State, info.Attempts, info.LastError, flakyRuns.Load())
	}
}

// Drain runs a job waiting for another (DependsOn) once that one
// completed, and a workflow's tasks in order.
func TestDrainRunsDependents(t *testing.T) {
	client := bqtest.NewClient(t)
	ctx := context.Background()
	first := must(Report.Enqueue(ctx, client, struct{}{}))
	next := must(Report.Enqueue(ctx, client, struct{}{}, bq.DependsOn(first.ID)))
	if next.State != bq.StateWaiting {
		t.Fatalf("the dependent: %+v, want waiting", next)
	}
	wf, err := bq.NewWorkflow("drain").Add("a", Report.Item(struct{}{})).Add("b", Report.Item(struct{}{}), "a").Enqueue(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	bqtest.Drain(ctx, t, client)
	for _, id := range []int64{first.ID, next.ID, wf.Tasks["a"].ID, wf.Tasks["b"].ID} {
		if info := must(client.Job(ctx, id)); info.State != bq.StateCompleted {
			t.Errorf("job %d is %s after Drain, want completed", id, info.State)
		}
	}
}
