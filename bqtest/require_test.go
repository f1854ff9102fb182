package bqtest_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/bqtest"
	"github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/drivers/sqlite"
)

// RequireEnqueued returns the one job matching every field of Opts.
func TestRequireEnqueuedMatchesEveryOption(t *testing.T) {
	ctx := context.Background()
	client := bqtest.NewClient(t)
	before := time.Now().Add(-time.Second)
	res := must(Email.Enqueue(ctx, client, EmailArgs{To: "ann@example.com"}, bq.Queue("bqtest-urgent"), bq.Priority(5),
		bq.WithMetadata(map[string]string{"tenant": "acme"}), bq.WithTags("welcome"), bq.In(time.Hour),
		bq.WithConcurrencyKey("ann", 1)))
	must(Email.Enqueue(ctx, client, EmailArgs{To: "bob@example.com"}))

	got := bqtest.RequireEnqueued(ctx, t, client, Email, &bqtest.Opts{
		Queue: "bqtest-urgent", Priority: new(5), State: bq.StateScheduled, Key: "bqtest.email/ann",
		Metadata: map[string]string{"tenant": "acme"}, Tags: []string{"mail", "welcome"},
		ScheduledAfter: before.Add(time.Hour), ScheduledBefore: time.Now().Add(time.Hour + time.Second),
		Args: EmailArgs{To: "ann@example.com"},
	})
	if got.ID != res.ID {
		t.Errorf("RequireEnqueued returned job %d, want %d", got.ID, res.ID)
	}
	got = bqtest.RequireEnqueued(ctx, t, client, Email, &bqtest.Opts{
		Args: func(a EmailArgs) bool { return a.To == "bob@example.com" },
	})
	if got.Queue != "bqtest-mail" {
		t.Errorf("the func matched job %d on queue %q, want bob's on bqtest-mail", got.ID, got.Queue)
	}
}

// Every failure names what was found instead of what was wanted.
func TestRequireEnqueuedSaysWhatItFound(t *testing.T) {
	ctx := context.Background()
	client := bqtest.NewClient(t)
	must(Email.Enqueue(ctx, client, EmailArgs{To: "ann@example.com"}))
	must(Email.Enqueue(ctx, client, EmailArgs{To: "bob@example.com"}, bq.Priority(3)))
	must(Charge.Enqueue(ctx, client, ChargeArgs{OrderID: 7}))

	for _, c := range []struct {
		name  string
		opts  *bqtest.Opts
		wants []string
	}{
		{"queue", &bqtest.Opts{Queue: "other"}, []string{`2 jobs of kind "bqtest.email", none matching`, `queue is "bqtest-mail", want "other"`}},
		{"priority", &bqtest.Opts{Priority: new(9)}, []string{"priority is 0, want 9", "priority is 3, want 9"}},
		{"state", &bqtest.Opts{State: bq.StateCompleted}, []string{"state is ready, want completed"}},
		{"key", &bqtest.Opts{Key: "g/k"}, []string{`key is "", want "g/k"`}},
		{"metadata", &bqtest.Opts{Metadata: map[string]string{"tenant": "acme"}}, []string{`want tenant="acme"`}},
		{"tags", &bqtest.Opts{Tags: []string{"vip"}}, []string{`tags are ["mail"], want "vip" among them`}},
		{"scheduled after", &bqtest.Opts{ScheduledAfter: time.Now().Add(time.Hour)}, []string{"before ScheduledAfter"}},
		{"scheduled before", &bqtest.Opts{ScheduledBefore: time.Now().Add(-time.Hour)}, []string{"after ScheduledBefore"}},
		{"args", &bqtest.Opts{Args: EmailArgs{To: "cy@example.com"}}, []string{`args are {"to":"ann@example.com"}, want {"to":"cy@example.com"}`}},
		{"args func", &bqtest.Opts{Args: func(a EmailArgs) bool { return false }}, []string{"fail the Opts.Args func"}},
		{"args type", &bqtest.Opts{Args: "ann"}, []string{"Opts.Args is a string: use a bqtest_test.EmailArgs to match args exactly, or a func(bqtest_test.EmailArgs) bool"}},
		{"several", nil, []string{`2 jobs of kind "bqtest.email" match, want one`, "use RequireManyEnqueued"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustFail(t, func(tb testing.TB) { bqtest.RequireEnqueued(ctx, tb, client, Email, c.opts) }, c.wants...)
		})
	}
	t.Run("bad state", func(t *testing.T) {
		mustFail(t, func(tb testing.TB) { bqtest.RequireEnqueued(ctx, tb, client, Email, &bqtest.Opts{State: "done"}) },
			`expectation 0: Opts.State: unknown job state "done": use one of scheduled, blocked`)
	})
	t.Run("empty window", func(t *testing.T) {
		now := time.Now()
		mustFail(t, func(tb testing.TB) {
			bqtest.RequireEnqueued(ctx, tb, client, Email, &bqtest.Opts{ScheduledAfter: now, ScheduledBefore: now.Add(-time.Second)})
		}, "the window holds no job; swap them")
	})
	t.Run("no such kind", func(t *testing.T) {
		mustFail(t, func(tb testing.TB) { bqtest.RequireEnqueued(ctx, tb, client, Report, nil) },
			`no job of kind "bqtest.report"; jobs enqueued: bqtest.charge(1), bqtest.email(2)`)
	})
	t.Run("empty database", func(t *testing.T) {
		mustFail(t, func(tb testing.TB) { bqtest.RequireEnqueued(ctx, tb, bqtest.NewClient(t), Report, nil) },
			`no job of kind "bqtest.report"; no jobs enqueued at all`)
	})
	t.Run("nil client", func(t *testing.T) {
		mustFail(t, func(tb testing.TB) { bqtest.RequireEnqueued(ctx, tb, nil, Report, nil) }, "the client is nil")
	})
}

func TestRequireNotEnqueued(t *testing.T) {
	ctx := context.Background()
	client := bqtest.NewClient(t)
	must(Email.Enqueue(ctx, client, EmailArgs{To: "ann@example.com"}))

	mustPass(t, func(tb testing.TB) { bqtest.RequireNotEnqueued(ctx, tb, client, Report, nil) })
	mustPass(t, func(tb testing.TB) {
		bqtest.RequireNotEnqueued(ctx, tb, client, Email, &bqtest.Opts{Args: EmailArgs{To: "bob@example.com"}})
	})
	mustFail(t, func(tb testing.TB) {
		bqtest.RequireNotEnqueued(ctx, tb, client, Email, &bqtest.Opts{Queue: "bqtest-mail"})
	},
		`found a matching job of kind "bqtest.email": job 1 bqtest.email [ready] queue "bqtest-mail"`, `args {"to":"ann@example.com"}`)
}

// RequireManyEnqueued wants the jobs of the kinds it names exactly, in
// the order they were enqueued, and ignores other kinds.
func TestRequireManyEnqueued(t *testing.T) {
	ctx := context.Background()
	client := bqtest.NewClient(t)
	must(Charge.Enqueue(ctx, client, ChargeArgs{OrderID: 1}))
	must(Email.Enqueue(ctx, client, EmailArgs{To: "ann@example.com"}))
	must(Charge.Enqueue(ctx, client, ChargeArgs{OrderID: 2}))
	must(Report.Enqueue(ctx, client, struct{}{}))

	jobs := bqtest.RequireManyEnqueued(ctx, t, client, []bqtest.Expectation{
		bqtest.Expect(Charge, &bqtest.Opts{Args: ChargeArgs{OrderID: 1}}),
		bqtest.Expect(Email, nil),
		bqtest.Expect(Charge, &bqtest.Opts{Key: "bqtest.charge/2"}),
	})
	if len(jobs) != 3 || jobs[0].Kind != "bqtest.charge" || jobs[1].Kind != "bqtest.email" {
		t.Errorf("RequireManyEnqueued returned %v", jobs)
	}

	mustFail(t, func(tb testing.TB) {
		bqtest.RequireManyEnqueued(ctx, tb, client, []bqtest.Expectation{bqtest.Expect(Email, nil), bqtest.Expect(Charge, nil), bqtest.Expect(Charge, nil)})
	}, "want 3 jobs (bqtest.email, bqtest.charge, bqtest.charge), found 3 (bqtest.charge, bqtest.email, bqtest.charge)",
		`expectation 0: job 1: kind is "bqtest.charge", want "bqtest.email"`)
	mustFail(t, func(tb testing.TB) {
		bqtest.RequireManyEnqueued(ctx, tb, client, []bqtest.Expectation{bqtest.Expect(Charge, nil)})
	}, "job 3 is unexpected: job 3 bqtest.charge")
	mustFail(t, func(tb testing.TB) {
		bqtest.RequireManyEnqueued(ctx, tb, client, []bqtest.Expectation{bqtest.Expect(Report, nil), bqtest.Expect(Report, nil)})
	}, `expectation 1: want a job of kind "bqtest.report", found none`)
	mustFail(t, func(tb testing.TB) {
		bqtest.RequireManyEnqueued(ctx, tb, client, []bqtest.Expectation{bqtest.Expect(Report, &bqtest.Opts{Args: 3})})
	}, "expectation 0: Opts.Args is a int")
	mustFail(t, func(tb testing.TB) { bqtest.RequireManyEnqueued(ctx, tb, client, nil) }, "no expectations")
	mustFail(t, func(tb testing.TB) { bqtest.RequireManyEnqueued(ctx, tb, client, []bqtest.Expectation{{}}) },
		"expectation 0 is empty: make it with bqtest.Expect(job, opts)")
}

// The Tx forms read through the caller's transaction: they see the jobs
// it enqueued before commit, which no other connection does.
func TestRequireEnqueuedTxSeesUncommittedJobs(t *testing.T) {
	ctx := context.Background()
	client := bqtest.NewClient(t)
	db := client.Driver().(*sqlite.Driver).DB()
	tx := must(db.BeginTx(ctx, nil))
	defer func() { _ = tx.Rollback() }()
	must(Email.EnqueueTx(ctx, client, sqlite.Tx(tx), EmailArgs{To: "ann@example.com"}))

	bqtest.RequireEnqueuedTx(ctx, t, client, sqlite.Tx(tx), Email, &bqtest.Opts{Args: EmailArgs{To: "ann@example.com"}})
	bqtest.RequireManyEnqueuedTx(ctx, t, client, sqlite.Tx(tx), []bqtest.Expectation{bqtest.Expect(Email, nil)})
	bqtest.RequireNotEnqueuedTx(ctx, t, client, sqlite.Tx(tx), Report, nil)
	bqtest.RequireNotEnqueued(ctx, t, client, Email, nil) // outside tx: not committed
	mustFail(t, func(tb testing.TB) { bqtest.RequireNotEnqueuedTx(ctx, tb, client, sqlite.Tx(tx), Email, nil) }, "found a matching job")
	mustFail(t, func(tb testing.TB) { bqtest.RequireEnqueuedTx(ctx, tb, client, nil, Email, nil) }, "the transaction is nil")
	mustFail(t, func(tb testing.TB) { bqtest.RequireEnqueuedTx(ctx, tb, client, sqlite.Tx((*sql.Tx)(nil)), Email, nil) },
		"bqtest.RequireEnqueuedTx: the transaction sqlite.Tx wraps is nil: begin one on the client's database, or use bqtest.RequireEnqueued")

	mustFail(t, func(tb testing.TB) { bqtest.RequireManyEnqueuedTx(ctx, tb, client, mysql.Tx(tx), nil) },
		"bqtest.RequireManyEnqueuedTx: the transaction is mysql's (mysql.Tx), the client runs on sqlite")

	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	bqtest.RequireNotEnqueued(ctx, t, client, Email, nil)
}
