package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/sqlexec"
)

// watchEvery is how often Listen reads the signal log.
const watchEvery = 50 * time.Millisecond

// MySQL has no LISTEN/NOTIFY. Notify appends one row per queue to the
// signal log, an AUTO_INCREMENT table, and Listen reads the rows past the
// last it read every watchEvery and wakes their queues.
//
// Appending takes no lock another enqueue waits for: a plain INSERT takes
// only its own row's lock and an insert intention lock, which conflict with
// no other insert, and the AUTO-INC lock is never held to commit (with
// innodb_autoinc_lock_mode 1 or 2, the defaults of MariaDB and MySQL 8, a
// single INSERT of known rows takes only a short mutex; even mode 0 holds
// the table lock to the end of the statement). So a caller's transaction
// may stay open for as long as it likes after EnqueueTx, and enqueues beside
// it do not wait. (A counter row per queue, bumped with ON DUPLICATE KEY
// UPDATE, kept the row locked to the caller's commit.)
//
// Listen never waits on an enqueue nor makes one wait: it reads without
// locks, probes ids with locking reads that do not wait (NOWAIT), and
// prunes rows every listener has read, skipping locked ones. See tracker
// for ids that commit out of order.

func (d *engine) notify(ctx context.Context, db sqlexec.DB, queues []string) error {
	now := sqlexec.Micros(time.Now())
	for chunk := range slices.Chunk(queues, maxRows) {
		args := make([]any, 0, 2*len(chunk))
		for _, queue := range chunk {
			args = append(args, []byte(queue), now)
		}
		q := "INSERT INTO " + d.prefix + "signal_log (queue, created_at) VALUES " + sqlexec.Values(len(chunk), 2)
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("signal queues %q: %w", chunk, err)
		}
	}
	return nil
}

// Notify signals queues outside any transaction. Its own listener reads the
// signals back too: at most one extra look per watchEvery.
func (d *engine) Notify(ctx context.Context, _ string, queues []string) error {
	return d.notify(ctx, d.db, queues)
}

// NotifyTx signals inside the caller's *sql.Tx: listeners see it only if
// it commits, and nothing waits for it meanwhile.
func (d *engine) NotifyTx(ctx context.Context, tx any, queues []string) error {
	t, ok := tx.(*sql.Tx)
	if !ok {
		return fmt.Errorf("signal in a %T: want a *sql.Tx", tx)
	}
	return d.notify(ctx, t, queues)
}

// Listen calls ready for each queue signalled after it started, until ctx
// ends. A failing read is told to failed once, until reads work again.
func (d *engine) Listen(ctx context.Context, _ string, ready func(queue string), failed func(error)) error {
	l := &listener{d: d, ready: ready, failed: failed}
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	// Pruning runs beside the polls, so that it never delays a wake-up.
	pruned := make(chan pruneResult, 1)
	pruning := false
	defer func() {
		if pruning {
			<-pruned
		}
	}()
	var lastPrune time.Time
	// Start at once rather than a tick later: a signal committed before
	// start is taken as old news.
	l.report(ctx, &l.down, l.start(ctx, time.Now()))
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-pruned:
			pruning = false
			l.t.pruned(r.last, r.keep)
			l.report(ctx, &l.pruneDown, r.err)
			continue
		case <-t.C:
		}
		now := time.Now()
		if l.t == nil {
			l.report(ctx, &l.down, l.start(ctx, now))
			continue
		}
		err := l.poll(ctx, now)
		if err == nil {
			err = l.probe(ctx, now)
		}
		l.report(ctx, &l.down, err)
		if !pruning && now.Sub(lastPrune) >= pruneEvery {
			lastPrune, pruning = now, true
			job := l.pruneJob(now)
			go func() { pruned <- l.prune(ctx, job) }()
		}
	}
}

type listener struct {
	// inboxLast is the highest inbox id seen (inbox).
	inboxLast int64
	d         *engine
	ready     func(queue string)
	failed    func(error)
	t         *tracker
	// down: failed was told of a failing poll, and none worked since;
	// pruneDown the same of pruning.
	down, pruneDown bool
}

// report tells failed of err, once until the work that failed works again.
func (l *listener) report(ctx context.Context, down *bool, err error) {
	switch {
	case err == nil:
		*down = false
	case ctx.Err() == nil && !*down:
		*down = true
		l.failed(fmt.Errorf("read the signal log: %w", err))
	}
}

// start reads the ids of the log (its newest startRows).
func (l *listener) start(ctx context.Context, now time.Time) error {
	rows, err := l.d.db.QueryContext(ctx, "SELECT id FROM "+l.d.prefix+"signal_log ORDER BY id DESC LIMIT ?", startRows)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	slices.Reverse(ids)
	l.t = newTracker(ids, now)
	// What was signalled before this read is not news to this listener:
	// every queue looks once now instead.
	l.ready("")
	return nil
}

// poll reads the gaps and the rows past the last read, and wakes their
// queues.
func (l *listener) poll(ctx context.Context, now time.Time) error {
	for {
		queues := map[string]bool{}
		var ids []int64
		for chunk := range slices.Chunk(l.t.gaps, 100) {
			cond := make([]string, len(chunk))
			args := make([]any, 0, 2*len(chunk))
			for i, g := range chunk {
				cond[i] = "id BETWEEN ? AND ?"
				args = append(args, g.from, g.to)
			}
			q := "SELECT id, queue FROM " + l.d.prefix + "signal_log WHERE " + strings.Join(cond, " OR ")
			if _, err := readSignals(ctx, l.d.db, q, args, &ids, queues); err != nil {
				return err
			}
		}
		inGaps := len(ids)
		// The tail, with the inbox's highest id (inbox) in the same
		// statement: one round trip a tick where it took two.
		inbox, err := readSignals(ctx, l.d.db, "(SELECT id, queue FROM "+l.d.prefix+"signal_log WHERE id > ? ORDER BY id LIMIT ?)"+
			" UNION ALL (SELECT coalesce(max(id), 0), NULL FROM "+l.d.prefix+"inbox)", []any{l.t.last, maxRows}, &ids, queues)
		if err != nil {
			return err
		}
		l.inbox(inbox)
		slices.Sort(ids)
		l.t.read(ids, now)
		for q := range queues {
			l.ready(q)
		}
		if len(ids)-inGaps < maxRows {
			return nil
		}
	}
}

// readSignals reads query's rows (id, queue) into ids and queues. A
// row with no queue is not a signal but the inbox's highest id (the
// tail's read, poll), returned.
func readSignals(ctx context.Context, db sqlexec.DB, query string, args []any, ids *[]int64, queues map[string]bool) (inbox int64, err error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var queue sql.NullString
		if err := rows.Scan(&id, &queue); err != nil {
			return 0, err
		}
		if !queue.Valid {
			inbox = id
			continue
		}
		*ids = append(*ids, id)
		queues[queue.String] = true
	}
	return inbox, rows.Err()
}

// probe asks of gaps past their grace whether a transaction still holds
// a row in them, with a locking read that must not wait: a row being
// inserted is locked by its transaction (in flight: keep reading the gap);
// no row and no lock means the inserts rolled back or the rows were pruned
// (drop the gap). A gap holds no row this listener read, so the read is
// planned on the primary key range, and the locks it takes on rows
// committed since end with it (it runs on its own).
func (l *listener) probe(ctx context.Context, now time.Time) error {
	q := "SELECT id, queue FROM " + l.d.prefix + "signal_log WHERE id BETWEEN ? AND ? ORDER BY id FOR UPDATE NOWAIT"
	for range maxProbes {
		g, ok := l.t.dueProbe(now)
		if !ok {
			return nil
		}
		queues := map[string]bool{}
		var ids []int64
		_, err := readSignals(ctx, l.d.db, q, []any{g.from, g.to}, &ids, queues)
		switch {
		case err == nil: // what committed since the poll is read now
			l.t.read(ids, now)
			l.t.probed(g, false, now)
			for q := range queues {
				l.ready(q)
			}
		case isLockBusy(err):
			l.t.probed(g, true, now)
		default:
			return err
		}
	}
	return nil
}

// errLockNowait is MySQL's refusal of a NOWAIT read of a locked row;
// MariaDB answers errLockWaitTimeout.
const errLockNowait = 3572

func isLockBusy(err error) bool {
	var myErr *gomysql.MySQLError
	return errors.As(err, &myErr) && (myErr.Number == errLockNowait || myErr.Number == errLockWaitTimeout)
}
