package bqtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/bqtest"
	"github.com/bqueue/bq/drivers/sqlite"
)

// The application's jobs, as the examples test them.
type WelcomeArgs struct {
	UserID int64 `json:"user_id"`
}

type InvoiceArgs struct {
	Account string `json:"account"`
}

var (
	welcomed atomic.Int64 // welcome mails sent

	Welcome = bq.Define("example.welcome", func(ctx context.Context, a WelcomeArgs) error {
		meta, _ := bq.JobFromContext(ctx)
		if meta.Attempt > 3 {
			return bq.Permanent(errors.New("mail server refuses us"))
		}
		welcomed.Add(1)
		return nil
	}, bq.JobOptions[WelcomeArgs]{Queue: "example-mail"})

	Invoice = bq.Define("example.invoice", func(ctx context.Context, a InvoiceArgs) error {
		meta, _ := bq.JobFromContext(ctx)
		fmt.Printf("invoice %s: attempt %d, key %s, tenant %s\n", a.Account, meta.Attempt, meta.Key, meta.Metadata["tenant"])
		return nil
	}, bq.JobOptions[InvoiceArgs]{
		Queue:       "example-billing",
		Concurrency: &bq.Concurrency[InvoiceArgs]{Key: func(a InvoiceArgs) string { return a.Account }},
	})
)

// signUp is the code under test: it stores a user and enqueues their
// welcome mail in the same transaction.
func signUp(ctx context.Context, client *bq.Client, tx *sql.Tx, userID int64) error {
	_, err := Welcome.EnqueueTx(ctx, client, sqlite.Tx(tx), WelcomeArgs{UserID: userID}, bq.WithTags("signup"))
	return err
}

// In a test, t is the *testing.T; the examples run with a stand-in.
func ExampleRequireEnqueued() {
	runAsTest(func(t testing.TB) {
		ctx := context.Background()
		client := bqtest.NewClient(t)
		_, _ = Welcome.Enqueue(ctx, client, WelcomeArgs{UserID: 42}, bq.WithTags("signup"))

		job := bqtest.RequireEnqueued(ctx, t, client, Welcome, &bqtest.Opts{
			Args: WelcomeArgs{UserID: 42},
			Tags: []string{"signup"},
		})
		fmt.Println(job.Kind, job.Queue, job.State)
	})
	// Output: example.welcome example-mail ready
}

// A failure says what was found instead.
func ExampleRequireEnqueued_failure() {
	runAsTest(func(t testing.TB) {
		ctx := context.Background()
		client := bqtest.NewClient(t)
		_, _ = Welcome.Enqueue(ctx, client, WelcomeArgs{UserID: 42})

		bqtest.RequireEnqueued(ctx, t, client, Welcome, &bqtest.Opts{
			Args: func(a WelcomeArgs) bool { return a.UserID == 7 },
		})
		bqtest.RequireEnqueued(ctx, t, client, Invoice, nil) // not reached: the first failure ends the test
	})
	// Output:
	// FAIL: bqtest.RequireEnqueued: 1 job of kind "example.welcome", none matching:
	//   job 1: args {"user_id":42} fail the Opts.Args func
}

func ExampleRequireNotEnqueued() {
	runAsTest(func(t testing.TB) {
		ctx := context.Background()
		client := bqtest.NewClient(t)
		_, _ = Invoice.Enqueue(ctx, client, InvoiceArgs{Account: "acme"})

		bqtest.RequireNotEnqueued(ctx, t, client, Welcome, nil)
		bqtest.RequireNotEnqueued(ctx, t, client, Invoice, &bqtest.Opts{Key: "example.invoice/globex"})
		fmt.Println("no welcome mail, no invoice for globex")
	})
	// Output: no welcome mail, no invoice for globex
}

// The jobs of the kinds named, in the order they were enqueued; other
// kinds are ignored.
func ExampleRequireManyEnqueued() {
	runAsTest(func(t testing.TB) {
		ctx := context.Background()
		client := bqtest.NewClient(t)
		_, _ = Invoice.Enqueue(ctx, client, InvoiceArgs{Account: "acme"})
		_, _ = Welcome.Enqueue(ctx, client, WelcomeArgs{UserID: 1})
		_, _ = Invoice.Enqueue(ctx, client, InvoiceArgs{Account: "acme"}, bq.In(time.Hour))

		jobs := bqtest.RequireManyEnqueued(ctx, t, client, []bqtest.Expectation{
			bqtest.Expect(Invoice, &bqtest.Opts{State: bq.StateReady}),
			bqtest.Expect(Welcome, nil),
			bqtest.Expect(Invoice, &bqtest.Opts{State: bq.StateScheduled, ScheduledAfter: time.Now().Add(59 * time.Minute)}),
		})
		fmt.Println(len(jobs), "jobs")
	})
	// Output: 3 jobs
}

// The Tx forms read through the caller's transaction, before it commits.
func ExampleRequireEnqueuedTx() {
	runAsTest(func(t testing.TB) {
		ctx := context.Background()
		client := bqtest.NewClient(t)
		tx, err := client.Driver().(*sqlite.Driver).DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := signUp(ctx, client, tx, 42); err != nil {
			t.Fatal(err)
		}

		bqtest.RequireEnqueuedTx(ctx, t, client, sqlite.Tx(tx), Welcome, &bqtest.Opts{Args: WelcomeArgs{UserID: 42}})
		bqtest.RequireNotEnqueued(ctx, t, client, Welcome, nil) // outside tx: not committed
		fmt.Println("enqueued inside the transaction")
	})
	// Output: enqueued inside the transaction
}

// Work runs the job's function with the job context the options give,
// without a database.
func ExampleWork() {
	runAsTest(func(t testing.TB) {
		ctx := context.Background()
		err := bqtest.Work(ctx, t, Invoice, InvoiceArgs{Account: "acme"},
			bqtest.WithAttempt(2), bqtest.WithMetadata(map[string]string{"tenant": "acme-eu"}))
		fmt.Println("error:", err)

		err = bqtest.Work(ctx, t, Welcome, WelcomeArgs{UserID: 1}, bqtest.WithAttempt(4))
		fmt.Println("attempt 4:", err)
	})
	// Output:
	// invoice acme: attempt 2, key example.invoice/acme, tenant acme-eu
	// error: <nil>
	// attempt 4: mail server refuses us
}

// Drain runs every job that is ready, and those they make ready, to the
// end; jobs due later stay scheduled.
func ExampleDrain() {
	runAsTest(func(t testing.TB) {
		ctx := context.Background()
		client := bqtest.NewClient(t)
		welcomed.Store(0)
		for id := range int64(3) {
			_, _ = Welcome.Enqueue(ctx, client, WelcomeArgs{UserID: id})
		}
		_, _ = Welcome.Enqueue(ctx, client, WelcomeArgs{UserID: 99}, bq.In(time.Hour))

		bqtest.Drain(ctx, t, client)
		fmt.Println("welcomed", welcomed.Load(), "users")
		bqtest.RequireEnqueued(ctx, t, client, Welcome, &bqtest.Opts{State: bq.StateScheduled})
	})
	// Output: welcomed 3 users
}
