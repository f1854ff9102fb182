package bqtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/bqtest"
	"github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/drivers/postgres"
	"github.com/bqueue/bq/drivers/sqlite"
	"github.com/bqueue/bq/internal/testdb"
)

// The assertions, their Tx forms and Drain work on a client of any
// database: the same test on each.
func TestHelpersOnEveryDatabase(t *testing.T) {
	for _, kind := range testdb.Selected(t) {
		t.Run(kind, func(t *testing.T) {
			client, err := bq.Open(context.Background(), testdb.Fresh(t, kind), bq.Config{
				Logger: bqtest.Logger(t), PollInterval: 50 * time.Millisecond, DispatchInterval: 50 * time.Millisecond, NoGauges: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.Close() })
			ctx := withClient(context.Background(), client)
			if err := client.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			must(Charge.Enqueue(ctx, client, ChargeArgs{OrderID: 5}))
			must(Charge.Enqueue(ctx, client, ChargeArgs{OrderID: 5}))

			tx, commit, rollback := begin(ctx, t, client)
			defer rollback()
			must(Email.EnqueueTx(ctx, client, tx, EmailArgs{To: "tx@example.com"}, bq.WithMetadata(map[string]string{"tenant": "acme"})))
			bqtest.RequireEnqueuedTx(ctx, t, client, tx, Email, &bqtest.Opts{Metadata: map[string]string{"tenant": "acme"}})
			bqtest.RequireManyEnqueuedTx(ctx, t, client, tx, []bqtest.Expectation{
				bqtest.Expect(Charge, &bqtest.Opts{State: bq.StateReady, Key: "bqtest.charge/5"}),
				bqtest.Expect(Charge, &bqtest.Opts{State: bq.StateBlocked}),
				bqtest.Expect(Email, &bqtest.Opts{Args: EmailArgs{To: "tx@example.com"}}),
			})
			bqtest.RequireNotEnqueued(ctx, t, client, Email, nil) // not committed yet
			mustFail(t, func(tb testing.TB) { bqtest.RequireEnqueued(ctx, tb, client, Email, nil) },
				`no job of kind "bqtest.email"; jobs enqueued: bqtest.charge(2)`)
			if err := commit(); err != nil {
				t.Fatal(err)
			}

			bqtest.Drain(ctx, t, client)
			done := &bqtest.Opts{State: bq.StateCompleted}
			bqtest.RequireManyEnqueued(ctx, t, client, []bqtest.Expectation{
				bqtest.Expect(Charge, done), bqtest.Expect(Charge, done),
				bqtest.Expect(Email, &bqtest.Opts{State: bq.StateCompleted, Args: EmailArgs{To: "tx@example.com"}}),
				bqtest.Expect(Email, &bqtest.Opts{State: bq.StateCompleted, Args: EmailArgs{To: "order-5", Subject: "receipt"}}),
				bqtest.Expect(Email, done),
			})
		})
	}
}

// begin opens a transaction of the caller's on client's database.
func begin(ctx context.Context, t *testing.T, client *bq.Client) (tx bq.Tx, commit func() error, rollback func()) {
	t.Helper()
	switch d := client.Driver().(type) {
	case *postgres.Driver:
		pgTx := must(d.Pool().Begin(ctx))
		return postgres.Tx(pgTx), func() error { return pgTx.Commit(ctx) }, func() { _ = pgTx.Rollback(ctx) }
	case *mysql.Driver:
		sqlTx := must(d.DB().BeginTx(ctx, nil))
		return mysql.Tx(sqlTx), sqlTx.Commit, func() { _ = sqlTx.Rollback() }
	case *sqlite.Driver:
		sqlTx := must(d.DB().BeginTx(ctx, nil))
		return sqlite.Tx(sqlTx), sqlTx.Commit, func() { _ = sqlTx.Rollback() }
	}
	t.Fatalf("no transaction for a %T", client.Driver())
	return nil, nil, nil
}

// The Tx forms read through the transaction client.InTx hands its
// function, on any database: no driver named.
func TestHelpersInTx(t *testing.T) {
	for _, kind := range testdb.Selected(t) {
		t.Run(kind, func(t *testing.T) {
			client, err := bq.Open(context.Background(), testdb.Fresh(t, kind), bq.Config{Logger: bqtest.Logger(t), NoGauges: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.Close() })
			ctx := context.Background()
			if err := client.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			rollBack := errors.New("roll back")
			err = client.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
				must(Email.EnqueueTx(ctx, client, tx, EmailArgs{To: "intx@example.com"}))
				bqtest.RequireEnqueuedTx(ctx, t, client, tx, Email, &bqtest.Opts{Args: EmailArgs{To: "intx@example.com"}})
				bqtest.RequireManyEnqueuedTx(ctx, t, client, tx, []bqtest.Expectation{bqtest.Expect(Email, nil)})
				bqtest.RequireNotEnqueuedTx(ctx, t, client, tx, Charge, nil)
				return rollBack
			})
			if !errors.Is(err, rollBack) {
				t.Fatalf("InTx = %v, want its function's error", err)
			}
			bqtest.RequireNotEnqueued(ctx, t, client, Email, nil)
		})
	}
}
