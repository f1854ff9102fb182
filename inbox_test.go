package bq_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/testdb"
)

type inboxArgs struct {
	Tenant string `json:"tenant"`
	N      int    `json:"n"`
	Note   string `json:"note,omitempty"`
}

// inboxCharge is a job kind other languages enqueue through the inbox:
// limited to one at once per tenant, discarding the excess.
var inboxCharge = bq.Define("inbox.charge", func(context.Context, inboxArgs) error { return nil }, bq.JobOptions[inboxArgs]{
	Queue: "inboxq",
	Concurrency: &bq.Concurrency[inboxArgs]{
		Key: func(a inboxArgs) string { return a.Tenant }, To: 1, OnConflict: bq.Discard,
	},
})

// inboxWrite writes an inbox row as a client in another language does,
// in tx, and returns its id; on PostgreSQL it notifies the inbox's
// channel in the same transaction.
func inboxWrite(ctx context.Context, tx bq.Tx, kind, args, options string) (int64, error) {
	var id int64
	switch raw := bq.RawTx(tx).(type) {
	case pgx.Tx:
		if err := raw.QueryRow(ctx, "INSERT INTO bq_inbox (kind, args, options) VALUES ($1, $2, $3) RETURNING id",
			kind, args, options).Scan(&id); err != nil {
			return 0, err
		}
		_, err := raw.Exec(ctx, "SELECT pg_notify('bq_inbox', '')")
		return id, err
	case *sql.Tx:
		res, err := raw.ExecContext(ctx, "INSERT INTO bq_inbox (kind, args, options) VALUES (?, ?, ?)", kind, args, options)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	return 0, errors.New("unknown transaction")
}

type inboxRow struct {
	outcome, detail string
	jobID           int64
}

// inboxRead reads row id; outcome "" while it is pending.
func inboxRead(ctx context.Context, c *bq.Client, id int64) (r inboxRow, err error) {
	err = c.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
		q := "SELECT coalesce(outcome, ''), coalesce(detail, ''), coalesce(job_id, 0) FROM bq_inbox WHERE id = "
		switch raw := bq.RawTx(tx).(type) {
		case pgx.Tx:
			return raw.QueryRow(ctx, q+"$1", id).Scan(&r.outcome, &r.detail, &r.jobID)
		case *sql.Tx:
			return raw.QueryRowContext(ctx, q+"?", id).Scan(&r.outcome, &r.detail, &r.jobID)
		}
		return nil
	})
	return r, err
}

// inboxClient opens a migrated client on a fresh database of kind whose
// workers work only a queue no job uses, so admitted jobs stay as
// admitted; poll is its PollInterval (0: the default).
func inboxClient(t *testing.T, kind string, poll time.Duration) *bq.Client {
	t.Helper()
	ctx := context.Background()
	c, err := bq.Open(ctx, testdb.Fresh(t, kind), bq.Config{NoGauges: true, PollInterval: poll,
		Queues: map[string]int{"inbox-idle": 1}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// runClient runs c until the test ends.
func runClient(t *testing.T, c *bq.Client) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.RunWorkers(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("RunWorkers: %v", err)
		}
	})
}

// waitDecided waits for row id's outcome.
func waitDecided(t *testing.T, c *bq.Client, id int64) inboxRow {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := inboxRead(context.Background(), c, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.outcome != "" || time.Now().After(deadline) {
			return r
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Rows a client wrote are admitted by the Go enqueue, exactly as
// Enqueue would: limits, discards, uniques, schedules and refusals; a
// rolled-back row leaves nothing; a kind no process defines waits.
func TestInboxAdmitsAsGo(t *testing.T) {
	for _, kind := range testdb.Selected(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			c := inboxClient(t, kind, 200*time.Millisecond)
			charge := inboxCharge.Name()
			type row struct{ kind, args, options string }
			rows := []row{
				{charge, `{"tenant":"a","n":1}`, `{}`},
				{charge, `{"tenant":"a","n":2}`, `{}`}, // a holds its one slot: discarded
				{charge, `{"tenant":"b","n":3}`, `{"concurrency_key":{"key":"b","to":1,"on_conflict":"block"},"priority":3,"tags":["py"],"metadata":{"from":"python"}}`},
				{charge, `{"tenant":"b","n":4}`, `{"concurrency_key":{"key":"b","to":1,"on_conflict":"block"}}`}, // blocked behind 3
				{charge, `{"tenant":"c","n":5}`, `{"run_in_ms":3600000}`},
				{charge, `{"tenant":"d","n":6}`, `{"unique":{"by_args":true}}`},
				{charge, `{"tenant":"d","n":6}`, `{"unique":{"by_args":true}}`}, // duplicate of the one before
				{charge, `{"tenant":"e","n":"7"}`, `{}`},                        // wrong type
				{charge, `{"tenant":"e","n":8,"extra":1}`, `{}`},                // unknown field
				{charge, `{"tenant":"e"}`, `{}`},                                // missing field
				{charge, `{"tenant":"e","n":9}`, `{"prio":1}`},                  // unknown option
				{charge, `{"tenant":"e","n":10}`, `{"concurrency_key":{"key":"e","on_conflict":"wait"}}`},
				// Refused by admission (its queue's policy sets no rate), which
				// fails the batch: the rest are decided row by row.
				{charge, `{"tenant":"f","n":11}`, `{"rate_key":{"key":"r"}}`},
				// Decided after row 0 (row by row): it takes the place of
				// row 0's job, still ready (no worker runs the queue).
				{charge, `{"tenant":"a","n":12}`, `{"concurrency_key":{"key":"a","to":1,"on_conflict":"replace"}}`},
				{"inbox.nobody", `{}`, `{}`}, // no process defines it: it waits
			}
			ids := make([]int64, len(rows))
			if err := c.InTx(ctx, func(ctx context.Context, tx bq.Tx) (err error) {
				for i, r := range rows {
					if ids[i], err = inboxWrite(ctx, tx, r.kind, r.args, r.options); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			var rolledBack int64
			boom := errors.New("rolled back")
			if err := c.InTx(ctx, func(ctx context.Context, tx bq.Tx) (err error) {
				if rolledBack, err = inboxWrite(ctx, tx, "inbox.charge", `{"tenant":"z","n":0}`, `{}`); err != nil {
					return err
				}
				return boom
			}); err != boom {
				t.Fatalf("InTx = %v, want the rollback", err)
			}
			runClient(t, c)
			got := make([]inboxRow, len(rows)-1)
			for i := range got {
				got[i] = waitDecided(t, c, ids[i])
			}
			want := []struct{ outcome, detail string }{
				{"ready", ""}, {"discarded", "no free slot"}, {"ready", ""}, {"blocked", ""}, {"scheduled", ""},
				{"ready", ""}, {"duplicate", fmt.Sprint(got[5].jobID)},
				{"refused", `Go struct field inboxArgs.n of type int`}, {"refused", `unknown field "extra"`},
				{"refused", `field "n" (inboxArgs.N) is missing`}, {"refused", `unknown field "prio"`},
				{"refused", `concurrency_key.on_conflict is "wait"`},
				{"refused", "MaxStartsPerKey"},
				{"ready", fmt.Sprintf("replaced job %d", got[0].jobID)},
			}
			for i, w := range want {
				if g := got[i]; g.outcome != w.outcome || !strings.Contains(g.detail, w.detail) {
					t.Errorf("row %d (%s %s) = %s %q, want %s containing %q", i, rows[i].args, rows[i].options, g.outcome, g.detail, w.outcome, w.detail)
				}
			}
			if st := inboxState(t, c, got[0].jobID); st != bq.StateCancelled {
				t.Errorf("row 0's job is %s, want cancelled (replaced by row %d's)", st, len(want)-1)
			}
			if got[6].jobID != got[5].jobID || got[5].jobID == 0 {
				t.Errorf("duplicate row names job %d, want the first's %d", got[6].jobID, got[5].jobID)
			}
			info, err := c.Job(ctx, got[2].jobID)
			if err != nil {
				t.Fatal(err)
			}
			if info.Priority != 3 || info.Metadata["from"] != "python" || !slices.Contains(info.Tags, "py") || info.Key != "inbox.charge/b" {
				t.Errorf("job of row 2 = priority %d, metadata %v, tags %v, key %q; want the options' 3, from=python, py, inbox.charge/b",
					info.Priority, info.Metadata, info.Tags, info.Key)
			}
			if r, _ := inboxRead(ctx, c, ids[len(ids)-1]); r.outcome != "" {
				t.Errorf("a row of a kind no process defines was decided: %+v", r)
			}
			if _, err := inboxRead(ctx, c, rolledBack); err == nil {
				t.Errorf("the row of a rolled-back transaction is there")
			}
			h, err := c.Health(ctx, bq.HealthOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if h.InboxPending != 1 {
				t.Errorf("Health().InboxPending = %d, want 1 (the unknown kind's row)", h.InboxPending)
			}
		})
	}
}

// TestInboxLatency measures how long a row waits from its commit to its
// admission (docs/clients.md quotes the figures), one row at a time,
// with the default PollInterval. It logs; it asserts no time.
func TestInboxLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for a while")
	}
	for _, kind := range testdb.Selected(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			c := inboxClient(t, kind, 0)
			runClient(t, c)
			time.Sleep(300 * time.Millisecond) // listening
			var waits []time.Duration
			for i := range 20 {
				var id int64
				if err := c.InTx(ctx, func(ctx context.Context, tx bq.Tx) (err error) {
					id, err = inboxWrite(ctx, tx, inboxCharge.Name(), fmt.Sprintf(`{"tenant":"t%d","n":%d}`, i, i), `{}`)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				committed := time.Now()
				for {
					r, err := inboxRead(ctx, c, id)
					if err != nil {
						t.Fatal(err)
					}
					if r.outcome != "" {
						break
					}
					time.Sleep(time.Millisecond)
				}
				waits = append(waits, time.Since(committed))
			}
			slices.Sort(waits)
			t.Logf("%s: commit to admission over %d rows: median %s, p90 %s, max %s", kind, len(waits),
				waits[len(waits)/2].Round(100*time.Microsecond), waits[len(waits)*9/10].Round(100*time.Microsecond), waits[len(waits)-1].Round(100*time.Microsecond))
		})
	}
}

// A row is admitted at once, not at the next poll: its commit wakes the
// processes (PostgreSQL's NOTIFY on the inbox's channel, the inbox's new
// id on MySQL, the database file's change on SQLite). The poll here is a
// minute, so only a wake-up admits the row within the test's wait.
func TestInboxWakes(t *testing.T) {
	for _, kind := range testdb.Selected(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			c := inboxClient(t, kind, time.Minute)
			runClient(t, c)
			time.Sleep(time.Second) // the first pass, and the listener, are done
			var id int64
			if err := c.InTx(ctx, func(ctx context.Context, tx bq.Tx) (err error) {
				id, err = inboxWrite(ctx, tx, inboxCharge.Name(), `{"tenant":"w","n":1}`, `{}`)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if r := waitDecided(t, c, id); r.outcome != "ready" {
				t.Fatalf("row %d after 15s = %+v, want ready: no wake-up reached the process", id, r)
			}
		})
	}
}

// inboxState is the state of job id.
func inboxState(t *testing.T, c *bq.Client, id int64) bq.JobState {
	t.Helper()
	info, err := c.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}
