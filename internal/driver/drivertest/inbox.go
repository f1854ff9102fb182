package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Inbox: the rows clients in other languages write, drained by Go
// processes (docs/clients.md).
var _ = add("inbox",
	test{"LockDecideCount", func(t *testing.T, f *fixture) {
		a1 := f.inboxRow("a", `{"n":1}`, `{"queue":"q"}`)
		f.inboxRow("b", `{"n":2}`, `{}`)
		a3 := f.inboxRow("a", `{"n":3}`, `{}`)
		f.wantPending(3)
		for _, c := range []struct {
			kinds []string
			want  bool
		}{{[]string{"a"}, true}, {[]string{"c", "b"}, true}, {[]string{"c"}, false}, {nil, false}} {
			if has, err := f.ex().InboxHasPending(f.ctx, c.kinds); has != c.want || err != nil {
				t.Errorf("InboxHasPending(%q) = %v, %v; want %v", c.kinds, has, err, c.want)
			}
		}
		var rows []driver.InboxRow
		f.tx(func(ex driver.Executor) (err error) {
			rows, err = ex.InboxLockPending(f.ctx, driver.InboxLockParams{Kinds: []string{"a", "c"}, Max: 10})
			if err != nil {
				return err
			}
			n, err := ex.InboxDecide(f.ctx, []driver.InboxOutcome{
				{ID: a1, Outcome: driver.InboxReady, JobID: 7},
				{ID: a3, Outcome: driver.InboxRefused, Detail: "decode args: bad"},
			})
			if n != 2 {
				t.Errorf("InboxDecide stamped %d rows, want 2", n)
			}
			return err
		})
		if len(rows) != 2 || rows[0].ID != a1 || rows[1].ID != a3 {
			t.Fatalf("InboxLockPending(a, c) = %+v, want rows %d and %d, oldest first", rows, a1, a3)
		}
		if r := rows[0]; r.Kind != "a" || string(r.Args) != `{"n":1}` || string(r.Options) != `{"queue":"q"}` {
			t.Errorf("row %d = %q %s %s, want a {\"n\":1} {\"queue\":\"q\"}", r.ID, r.Kind, r.Args, r.Options)
		}
		f.wantPending(1)
		f.wantDecided(a1, driver.InboxReady, 7, "")
		f.wantDecided(a3, driver.InboxRefused, 0, "decode args: bad")
		// A decided row is stamped once.
		if n, err := f.ex().InboxDecide(f.ctx, []driver.InboxOutcome{{ID: a1, Outcome: driver.InboxDiscarded}}); n != 0 || err != nil {
			t.Errorf("InboxDecide of a decided row = %d, %v; want 0, nil", n, err)
		}
		f.wantDecided(a1, driver.InboxReady, 7, "")
		f.tx(func(ex driver.Executor) error {
			rows, err := ex.InboxLockPending(f.ctx, driver.InboxLockParams{Kinds: []string{"a"}, Max: 10})
			if len(rows) != 0 {
				t.Errorf("InboxLockPending after the decisions = %+v, want none", rows)
			}
			return err
		})
	}},
	test{"LockOneByID", func(t *testing.T, f *fixture) {
		f.inboxRow("a", `{}`, `{}`)
		second := f.inboxRow("a", `{}`, `{}`)
		f.tx(func(ex driver.Executor) error {
			rows, err := ex.InboxLockPending(f.ctx, driver.InboxLockParams{Kinds: []string{"a"}, ID: second, Max: 10})
			if len(rows) != 1 || rows[0].ID != second {
				t.Errorf("InboxLockPending(ID %d) = %+v, want that row alone", second, rows)
			}
			return err
		})
		f.tx(func(ex driver.Executor) error {
			rows, err := ex.InboxLockPending(f.ctx, driver.InboxLockParams{Kinds: []string{"b"}, ID: second, Max: 1})
			if len(rows) != 0 {
				t.Errorf("InboxLockPending(ID %d, another kind) = %+v, want none", second, rows)
			}
			return err
		})
	}},
	test{"LockSkipsHeldRows", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		first := f.inboxRow("a", `{}`, `{}`)
		second := f.inboxRow("a", `{}`, `{}`)
		tx := f.begin()
		held, err := tx.InboxLockPending(f.ctx, driver.InboxLockParams{Kinds: []string{"a"}, Max: 1})
		f.must(err)
		if len(held) != 1 || held[0].ID != first {
			t.Fatalf("first InboxLockPending = %+v, want row %d", held, first)
		}
		f.tx(func(ex driver.Executor) error {
			rows, err := ex.InboxLockPending(f.quick(), driver.InboxLockParams{Kinds: []string{"a"}, Max: 10})
			if len(rows) != 1 || rows[0].ID != second {
				t.Errorf("InboxLockPending beside a transaction holding row %d = %+v, want row %d alone", first, rows, second)
			}
			return err
		})
		f.must(tx.Rollback(f.ctx))
	}},
	test{"DeleteDecided", func(t *testing.T, f *fixture) {
		done := f.inboxRow("a", `{}`, `{}`)
		pending := f.inboxRow("a", `{}`, `{}`)
		_, err := f.ex().InboxDecide(f.ctx, []driver.InboxOutcome{{ID: done, Outcome: driver.InboxDiscarded, Detail: "full"}})
		f.must(err)
		if n, err := f.ex().InboxDeleteDecided(f.ctx, time.Hour, 10); n != 0 || err != nil {
			t.Errorf("InboxDeleteDecided(1h) of a row decided just now = %d, %v; want 0", n, err)
		}
		time.Sleep(20 * time.Millisecond)
		if n, err := f.ex().InboxDeleteDecided(f.ctx, 5*time.Millisecond, 10); n != 1 || err != nil {
			t.Errorf("InboxDeleteDecided(5ms) = %d, %v; want 1 (the decided row, not the pending one)", n, err)
		}
		f.wantPending(1)
		if _, ok := f.inboxOutcome(pending); !ok {
			t.Errorf("the pending row %d was deleted", pending)
		}
	}},
)

// inboxRow writes a row as a client in another language does: kind,
// args and options, the rest by the columns' defaults.
func (f *fixture) inboxRow(kind, args, options string) int64 {
	f.t.Helper()
	table := f.d.Prefix() + "inbox"
	var id int64
	var err error
	switch f.d.Dialect() {
	case driver.Postgres:
		err = f.d.SQLDB().QueryRowContext(f.ctx, "INSERT INTO "+table+" (kind, args, options) VALUES ($1, $2, $3) RETURNING id",
			kind, args, options).Scan(&id)
	default:
		res, e := f.d.SQLDB().ExecContext(f.ctx, "INSERT INTO "+table+" (kind, args, options) VALUES (?, ?, ?)", kind, args, options)
		if err = e; err == nil {
			id, err = res.LastInsertId()
		}
	}
	f.must(err)
	return id
}

// inboxOutcome reads a row's outcome, job id and detail; ok is false
// when the row is gone.
func (f *fixture) inboxOutcome(id int64) (o driver.InboxOutcome, ok bool) {
	f.t.Helper()
	q := "SELECT coalesce(outcome, ''), coalesce(job_id, 0), coalesce(detail, '') FROM " + f.d.Prefix() + "inbox WHERE id = "
	if f.d.Dialect() == driver.Postgres {
		q += "$1"
	} else {
		q += "?"
	}
	err := f.d.SQLDB().QueryRowContext(context.Background(), q, id).Scan(&o.Outcome, &o.JobID, &o.Detail)
	if err != nil {
		return o, false
	}
	o.ID = id
	return o, true
}

func (f *fixture) wantDecided(id int64, outcome string, jobID int64, detail string) {
	f.t.Helper()
	got, ok := f.inboxOutcome(id)
	want := driver.InboxOutcome{ID: id, Outcome: outcome, JobID: jobID, Detail: detail}
	if !ok || got != want {
		f.t.Errorf("inbox row %d = %+v (found %v), want %+v", id, got, ok, want)
	}
}

func (f *fixture) wantPending(want int) {
	f.t.Helper()
	n, err := f.ex().InboxCountPending(f.ctx)
	f.must(err)
	if n != want {
		f.t.Errorf("InboxCountPending = %d, want %d", n, want)
	}
}
