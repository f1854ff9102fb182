package bq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/drivers/sqlite"
)

type ExportArgs struct {
	Tenant string
	Report string
}

func noop(context.Context, ExportArgs) error { return nil }

// Export runs at most 2 at once per tenant; the rest wait blocked.
var Export = bq.Define("example.export", noop, bq.JobOptions[ExportArgs]{
	Queue: "exports",
	Concurrency: &bq.Concurrency[ExportArgs]{
		Key: func(a ExportArgs) string { return a.Tenant },
		To:  2,
	},
})

// Refresh keeps at most one per report; duplicates are discarded.
var Refresh = bq.Define("example.refresh", noop, bq.JobOptions[ExportArgs]{
	Concurrency: &bq.Concurrency[ExportArgs]{
		Key:        func(a ExportArgs) string { return a.Report },
		OnConflict: bq.Discard,
	},
})

// Two kinds in one Group share one limit per key.
var (
	ChargeCard = bq.Define("example.charge-card", noop, bq.JobOptions[ExportArgs]{
		Concurrency: &bq.Concurrency[ExportArgs]{Key: func(a ExportArgs) string { return a.Tenant }, Group: "payments"},
	})
	RefundCard = bq.Define("example.refund-card", noop, bq.JobOptions[ExportArgs]{
		Concurrency: &bq.Concurrency[ExportArgs]{Key: func(a ExportArgs) string { return a.Tenant }, Group: "payments"},
	})
)

// exampleClient opens a migrated SQLite database in a temporary directory.
func exampleClient() (*bq.Client, func()) { return exampleClientWith(bq.Config{}) }

// A key with To: 2 admits two jobs; the third waits blocked for a slot.
func Example_block() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	for range 3 {
		res, _ := Export.Enqueue(ctx, client, ExportArgs{Tenant: "acme"})
		fmt.Println(res.State)
	}
	// Output:
	// ready
	// ready
	// blocked
}

// With OnConflict: Discard a duplicate is not stored at all.
func Example_discard() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	first, _ := Refresh.Enqueue(ctx, client, ExportArgs{Report: "sales"})
	second, _ := Refresh.Enqueue(ctx, client, ExportArgs{Report: "sales"})
	fmt.Println(first.State, second.State, second.ID)
	// Output: ready discarded 0
}

// Job kinds that name the same Group share one limit per key.
func Example_sharedGroup() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	charge, _ := ChargeCard.Enqueue(ctx, client, ExportArgs{Tenant: "acme"})
	refund, _ := RefundCard.Enqueue(ctx, client, ExportArgs{Tenant: "acme"})
	fmt.Println(charge.State, refund.State)
	// Output: ready blocked
}

// A scheduled job's key is checked when it becomes due, not at enqueue.
func Example_scheduled() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	res, _ := Export.Enqueue(ctx, client, ExportArgs{Tenant: "acme"}, bq.In(time.Hour))
	info, _ := client.Job(ctx, res.ID)
	fmt.Println(res.State, info.State)
	// Output: scheduled scheduled
}

// EnqueueTx writes the job inside your transaction: it exists only if
// the transaction commits.
func Example_transactionalEnqueue() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	db := client.Driver().(*sqlite.Driver).DB()

	tx, _ := db.BeginTx(ctx, nil)
	res, _ := Export.EnqueueTx(ctx, client, sqlite.Tx(tx), ExportArgs{Tenant: "acme"})
	_ = tx.Rollback()
	_, err := client.Job(ctx, res.ID)
	fmt.Println("after rollback:", err != nil)

	tx, _ = db.BeginTx(ctx, nil)
	res, _ = Export.EnqueueTx(ctx, client, sqlite.Tx(tx), ExportArgs{Tenant: "acme"})
	_ = tx.Commit()
	info, _ := client.Job(ctx, res.ID)
	fmt.Println("after commit:", info.State)
	// Output:
	// after rollback: true
	// after commit: ready
}

// Per-enqueue keys attach a limit at enqueue time.
func Example_withConcurrencyKey() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	for range 2 {
		res, _ := Refresh.Enqueue(ctx, client, ExportArgs{Report: "r"}, bq.WithConcurrencyKey("tenant:acme", 1, bq.Block))
		fmt.Println(res.State)
	}
	// Output:
	// ready
	// blocked
}
