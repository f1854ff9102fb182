package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/pgstats"
)

// waitInterval is how often --wait-events samples the run's connections.
// A sample is one read of the server's list of connections, from a
// connection of its own; every 2 ms it keeps that connection under a
// tenth of a core.
const waitInterval = 2 * time.Millisecond

// waitSampler is --wait-events: while a run works, it samples what each
// of the run's server connections (of this process or of --processes
// workers) is doing: on PostgreSQL (pg_stat_activity) running on the CPU,
// waiting for an event (a lock, the WAL's flush, ...), or idle inside a
// transaction, waiting for the client's next statement (a round trip
// with locks held); on MySQL/MariaDB (processlist and innodb_trx) the
// thread's state, a row lock wait, or idle inside a transaction. Counted
// by state and statement, printed after the run: where the server's side
// of the time goes, measured.
type waitSampler struct {
	mu      sync.Mutex
	counts  map[waitKey]int
	samples int
	busy    int // connections seen not idle, summed over the samples
	stop    context.CancelFunc
	done    chan struct{}
	err     error
}

type waitKey struct{ state, stmt string }

// waitRead reads one sample: each busy connection's state and statement.
type waitRead func(ctx context.Context) ([]waitKey, error)

// sampleWaits starts sampling db's run connections; end stops it. It
// samples nothing when --wait-events is off.
func (b *bencher) sampleWaits(ctx context.Context, db *benchDB) *waitSampler {
	if !b.o.waitEvents {
		return nil
	}
	s := &waitSampler{counts: map[waitKey]int{}, done: make(chan struct{})}
	read, closeRead, err := b.waitReader(db)
	if err != nil {
		s.err = err
		close(s.done)
		s.stop = func() {}
		return s
	}
	ctx, s.stop = context.WithCancel(ctx)
	go func() {
		defer closeRead()
		s.run(ctx, read)
	}()
	return s
}

// pgWaits reads the connections named for the run (pgstats.AppName),
// every one not idle outside a transaction.
const pgWaits = `SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type || ': ' || wait_event, 'on CPU')
	ELSE state || coalesce(' (' || wait_event || ')', '') END, coalesce(query, '')
FROM pg_stat_activity WHERE application_name = $1 AND state <> 'idle'`

// mysqlWaits reads the connections to the run's database, every one
// running a statement or inside a transaction, but its own.
const mysqlWaits = `SELECT CASE WHEN t.trx_state = 'LOCK WAIT' THEN 'lock wait'
	WHEN p.command = 'Sleep' THEN 'idle in transaction'
	ELSE coalesce(nullif(p.state, ''), p.command) END,
	coalesce(p.info, t.trx_query, '')
FROM information_schema.processlist p LEFT JOIN information_schema.innodb_trx t ON t.trx_mysql_thread_id = p.id
WHERE p.db = ? AND p.id <> CONNECTION_ID() AND (p.command <> 'Sleep' OR t.trx_id IS NOT NULL)`

// waitReader is the sample read of db's server, and what closes it.
func (b *bencher) waitReader(db *benchDB) (waitRead, func(), error) {
	if b.driverName() == "postgres" {
		app := pgstats.AppName(db.schema)
		return func(ctx context.Context) ([]waitKey, error) {
			rows, err := db.admin.Query(ctx, pgWaits, app)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, func(r pgx.CollectableRow) (k waitKey, err error) {
				err = r.Scan(&k.state, &k.stmt)
				return k, err
			})
		}, func() {}, nil
	}
	admin, name, err := openMySQLAdmin(db.directDSN)
	if err != nil {
		return nil, nil, fmt.Errorf("--wait-events: %w", err)
	}
	return func(ctx context.Context) ([]waitKey, error) {
		rows, err := admin.QueryContext(ctx, mysqlWaits, name)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []waitKey
		for rows.Next() {
			var k waitKey
			if err := rows.Scan(&k.state, &k.stmt); err != nil {
				return nil, err
			}
			out = append(out, k)
		}
		return out, rows.Err()
	}, func() { admin.Close() }, nil
}

func (s *waitSampler) run(ctx context.Context, read waitRead) {
	defer close(s.done)
	t := time.NewTicker(waitInterval)
	defer t.Stop()
	for {
		keys, err := read(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.err = fmt.Errorf("--wait-events: sample the server's connections: %w", err)
			return
		}
		s.mu.Lock()
		s.samples++
		for _, k := range keys {
			k.stmt = statementHead(k.stmt)
			s.counts[k]++
			s.busy++
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// statementHead is a statement's first 70 characters, its white space
// runs made one space and its numbers one ? (MySQL's id lists are
// written into the statement: every batch would count apart).
func statementHead(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	q = numberRun.ReplaceAllString(numbers.ReplaceAllString(q, "?"), "?")
	if len(q) > 70 {
		q = q[:70]
	}
	return q
}

var (
	numbers   = regexp.MustCompile(`\b[0-9]+\b`)
	numberRun = regexp.MustCompile(`\?(, \?)+`)
)

// end stops sampling and writes what was seen to w, most frequent first.
func (s *waitSampler) end(w io.Writer) {
	if s == nil {
		return
	}
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		fmt.Fprintf(w, "bench: %v\n", s.err)
	}
	if s.samples == 0 {
		fmt.Fprintln(w, "bench: --wait-events: no sample was taken")
		return
	}
	keys := make([]waitKey, 0, len(s.counts))
	for k := range s.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b waitKey) int { return s.counts[b] - s.counts[a] })
	fmt.Fprintf(w, "Server connections of the run, sampled every %s while it worked (%d samples; %.2f connections busy on average):\n",
		waitInterval, s.samples, float64(s.busy)/float64(s.samples))
	fmt.Fprintf(w, "  %6s  %5s  %-36s %s\n", "share", "busy", "state", "statement")
	for _, k := range keys[:min(len(keys), 20)] {
		n := s.counts[k]
		fmt.Fprintf(w, "  %5.1f%%  %5.2f  %-36s %s\n", 100*float64(n)/float64(s.busy), float64(n)/float64(s.samples), k.state, k.stmt)
	}
}
