package bq

import (
	"context"
	"strings"
	"testing"

	"github.com/bqueue/bq/internal/driver"

	"github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/drivers/postgres"
	"github.com/bqueue/bq/drivers/sqlite"
)

type fakeTx struct{}

func (fakeTx) TxDialect() string                  { return "sqlite" }
func (fakeTx) MadeByPostgresTxMySQLTxOrSQLiteTx() {}

type fakeDriver struct{}

func (fakeDriver) Dialect() string { return "sqlite" }
func (fakeDriver) Close() error    { return nil }

// EnqueueTx takes only a transaction a driver wrapped, of the client's
// database; anything else is refused with what to pass instead.
func TestEnqueueTxRefusesOtherTransactions(t *testing.T) {
	ctx := context.Background()
	c := openMemory(t)
	job := Define("face.enqueue-tx", func(context.Context, struct{}) error { return nil }, JobOptions[struct{}]{})
	sqlTx, err := c.Driver().(*sqlite.Driver).DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlTx.Rollback()
	for _, tc := range []struct {
		name string
		tx   Tx
		want string
	}{
		{"nil", nil, "the transaction is nil"},
		{"a wrapped nil", postgres.Tx(nil), "the transaction postgres.Tx wraps is nil"},
		{"a zero WrappedTx", sqlite.WrappedTx{}, "wraps is nil"},
		{"another database's", mysql.Tx(sqlTx), "the transaction is mysql's (mysql.Tx), the client runs on sqlite"},
		{"not a driver's", fakeTx{}, "bq.fakeTx is no transaction a bq driver wrapped"},
	} {
		if _, err := job.EnqueueTx(ctx, c, tc.tx, struct{}{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("EnqueueTx with %s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if res, err := job.EnqueueTx(ctx, c, sqlite.Tx(sqlTx), struct{}{}); err != nil || res.ID == 0 {
		t.Errorf("EnqueueTx with sqlite.Tx: %+v, %v", res, err)
	}
}

// NewClient takes only a driver a driver package made.
func TestNewClientRefusesOtherDrivers(t *testing.T) {
	var nilDriver *postgres.Driver
	for _, d := range []Driver{fakeDriver{}, &sqlite.Driver{}, nilDriver} {
		if _, err := NewClient(d, Config{}); err == nil || !strings.Contains(err.Error(), "is not a driver bq made") {
			t.Errorf("NewClient(%T): %v, want it refused", d, err)
		}
	}
}

// TestOneJobStateType: the driver names the states by bq.JobState's
// values (its JobState is no type of its own); they cannot drift apart.
func TestOneJobStateType(t *testing.T) {
	for public, internal := range map[JobState]driver.JobState{
		StateScheduled: driver.StateScheduled, StateReady: driver.StateReady, StateBlocked: driver.StateBlocked,
		StateRunning: driver.StateRunning, StateCompleted: driver.StateCompleted, StateDiscarded: driver.StateDiscarded,
		StateFailed: driver.StateFailed, StateCancelled: driver.StateCancelled,
	} {
		if string(public) != internal {
			t.Errorf("bq.JobState %q is %q in the driver", public, internal)
		}
	}
}
