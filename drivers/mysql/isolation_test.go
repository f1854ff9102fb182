package mysql

import (
	"context"
	"testing"

	"github.com/bqueue/bq/internal/sqlexec"
)

// TestTransactionsReadCommitted checks that bq's transactions run at READ
// COMMITTED, whether Begin leaves it to the session (a pool Open set up)
// or sets it (a pool of the caller's, at the server's REPEATABLE READ): a
// second read sees what another session committed after the first.
func TestTransactionsReadCommitted(t *testing.T) {
	ctx := context.Background()
	u := testURL(t)
	opened, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	if !opened.e().srv.readCommitted {
		t.Fatal("Open set the sessions' isolation, but Begin does not know it")
	}
	plain := New(plainDB(t, u))
	if plain.e().srv.readCommitted {
		t.Fatal("New cannot know a pool's isolation")
	}
	other := plainDB(t, u)
	for name, e := range map[string]*engine{"Open": opened.e(), "New": plain.e()} {
		tx, err := e.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		db := tx.(interface{ DB() sqlexec.DB }).DB()
		var before, after int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM bq_paused_queues").Scan(&before); err != nil {
			t.Fatal(err)
		}
		if _, err := other.ExecContext(ctx, "INSERT INTO bq_paused_queues (queue, paused_at) VALUES (?, 0)", name); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM bq_paused_queues").Scan(&after); err != nil {
			t.Fatal(err)
		}
		tx.Rollback(ctx)
		if after != before+1 {
			t.Errorf("%s: a transaction's second read saw %d rows after %d, though another session committed one between: not READ COMMITTED",
				name, after, before)
		}
	}
}
