package bq_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/drivers/sqlite"
	"github.com/bqueue/bq/internal/testdb"
)

type orderArgs struct{ Order int }

var shipOrder = bq.Define("intx.ship", func(context.Context, orderArgs) error { return nil }, bq.JobOptions[orderArgs]{})

// execTx runs stmt in the raw transaction inside tx, whichever database
// it is on: the application's own statements beside bq's enqueues.
func execTx(ctx context.Context, tx bq.Tx, stmt string) error {
	switch raw := bq.RawTx(tx).(type) {
	case pgx.Tx:
		_, err := raw.Exec(ctx, stmt)
		return err
	case *sql.Tx:
		_, err := raw.ExecContext(ctx, stmt)
		return err
	default:
		return fmt.Errorf("bq.RawTx returned a %T", raw)
	}
}

// orders counts the application's rows and shipOrder's jobs, committed.
func orders(ctx context.Context, t *testing.T, c *bq.Client) (rows, jobs int) {
	t.Helper()
	err := c.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
		const q = "SELECT count(*) FROM intx_orders"
		switch raw := bq.RawTx(tx).(type) {
		case pgx.Tx:
			return raw.QueryRow(ctx, q).Scan(&rows)
		case *sql.Tx:
			return raw.QueryRowContext(ctx, q).Scan(&rows)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	page, err := c.ListJobs(ctx, bq.JobFilter{Kinds: []string{shipOrder.Name()}})
	if err != nil {
		t.Fatal(err)
	}
	return rows, len(page.Jobs)
}

// InTx runs the application's statements and bq's enqueues in one
// transaction on every database, with no type switch on the driver:
// committed when fn returns nil, rolled back when it returns an error
// (returned as it is) or panics (the panic goes on).
func TestInTx(t *testing.T) {
	for _, kind := range testdb.Selected(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			c := migratedClient(t, kind)
			if err := c.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
				return execTx(ctx, tx, "CREATE TABLE intx_orders (id INT NOT NULL)")
			}); err != nil {
				t.Fatal(err)
			}

			var seen int
			err := c.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
				if err := execTx(ctx, tx, "INSERT INTO intx_orders (id) VALUES (1)"); err != nil {
					return err
				}
				if _, err := shipOrder.EnqueueTx(ctx, c, tx, orderArgs{Order: 1}); err != nil {
					return err
				}
				if _, err := shipOrder.EnqueueManyTx(ctx, c, tx, []orderArgs{{Order: 1}}); err != nil {
					return err
				}
				page, err := c.ListJobsTx(ctx, tx, bq.JobFilter{Kinds: []string{shipOrder.Name()}})
				seen = len(page.Jobs)
				return err
			})
			if err != nil {
				t.Fatalf("InTx: %v", err)
			}
			if rows, jobs := orders(ctx, t, c); seen != 2 || rows != 1 || jobs != 2 {
				t.Fatalf("after a committed InTx: ListJobsTx saw %d jobs, then %d rows and %d jobs committed; want 2, 1 and 2", seen, rows, jobs)
			}

			boom := errors.New("boom")
			err = c.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
				if err := execTx(ctx, tx, "INSERT INTO intx_orders (id) VALUES (2)"); err != nil {
					return err
				}
				if _, err := shipOrder.EnqueueTx(ctx, c, tx, orderArgs{Order: 2}); err != nil {
					return err
				}
				return boom
			})
			if err != boom {
				t.Fatalf("InTx whose fn failed = %v, want fn's error as it is", err)
			}
			if rows, jobs := orders(ctx, t, c); rows != 1 || jobs != 2 {
				t.Fatalf("after a failed InTx: %d rows, %d jobs; want 1 and 2 (rolled back)", rows, jobs)
			}

			func() {
				defer func() {
					if r := recover(); r != "kaboom" {
						t.Fatalf("InTx whose fn panicked: recovered %v, want the panic to go on", r)
					}
				}()
				_ = c.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
					if err := execTx(ctx, tx, "INSERT INTO intx_orders (id) VALUES (3)"); err != nil {
						return err
					}
					if _, err := shipOrder.EnqueueTx(ctx, c, tx, orderArgs{Order: 3}); err != nil {
						return err
					}
					panic("kaboom")
				})
			}()
			if rows, jobs := orders(ctx, t, c); rows != 1 || jobs != 2 {
				t.Fatalf("after a panicking InTx: %d rows, %d jobs; want 1 and 2 (rolled back)", rows, jobs)
			}

			// fn ending the transaction itself is named in the error.
			err = c.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
				switch raw := bq.RawTx(tx).(type) {
				case pgx.Tx:
					return raw.Commit(ctx)
				case *sql.Tx:
					return raw.Commit()
				}
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), "do not commit or roll back") {
				t.Errorf("InTx whose fn committed itself = %v, want an error saying not to", err)
			}
			if err := c.InTx(ctx, nil); err == nil || !strings.Contains(err.Error(), "nil") {
				t.Errorf("InTx(nil) = %v, want an error", err)
			}
		})
	}
}

// RawTx returns what a driver's Tx wrapped, and nil for a Tx no driver
// made.
func TestRawTx(t *testing.T) {
	var sqlTx sql.Tx
	if got := bq.RawTx(sqlite.Tx(&sqlTx)); got != &sqlTx {
		t.Errorf("RawTx(sqlite.Tx(tx)) = %v, want tx", got)
	}
	if got := bq.RawTx(nil); got != nil {
		t.Errorf("RawTx(nil) = %v, want nil", got)
	}
}

// A raw pgx.Tx passed where a bq.Tx is wanted fails to compile with an
// error naming the wrappers.
func TestRawTxDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goTool, "build", "-o", os.DevNull, "./testdata/rawtx").CombinedOutput()
	if err == nil {
		t.Fatalf("go build ./testdata/rawtx passed; want a compile error\n%s", out)
	}
	for _, want := range []string{"pgx.Tx does not implement bq.Tx (missing method MadeByPostgresTxMySQLTxOrSQLiteTx)",
		"*sql.Tx does not implement bq.Tx (missing method MadeByPostgresTxMySQLTxOrSQLiteTx)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go build ./testdata/rawtx says\n%s\nwant %q", out, want)
		}
	}
}

// TestRolledBackJobID pins what getting-started.md says of a rolled-back
// job's id (issue 38, item 7): PostgreSQL and MySQL never give it again
// (their counters move on at the insert), SQLite gives it to the next job
// stored (its AUTOINCREMENT counter rolls back with the transaction).
func TestRolledBackJobID(t *testing.T) {
	for _, kind := range testdb.Selected(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			c := migratedClient(t, kind)
			if _, err := shipOrder.Enqueue(ctx, c, orderArgs{Order: 1}); err != nil {
				t.Fatal(err)
			}
			var rolledBack int64
			errRollBack := errors.New("roll back")
			err := c.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
				res, err := shipOrder.EnqueueTx(ctx, c, tx, orderArgs{Order: 2})
				if err != nil {
					return err
				}
				rolledBack = res.ID
				return errRollBack
			})
			if !errors.Is(err, errRollBack) || rolledBack == 0 {
				t.Fatalf("InTx = %v, id %d: want the job enqueued, then rolled back", err, rolledBack)
			}
			res, err := shipOrder.Enqueue(ctx, c, orderArgs{Order: 3})
			if err != nil {
				t.Fatal(err)
			}
			if reused := res.ID == rolledBack; reused != (kind == testdb.SQLite) {
				t.Errorf("the job after the rolled-back job %d got id %d: reused %v, want reused only on SQLite (getting-started.md says so)",
					rolledBack, res.ID, reused)
			}
		})
	}
}
