package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq/internal/pgstats"
)

// waitInterval is how often --wait-events samples the run's connections.
// A sample is a read of pg_stat_activity from a connection of its own;
// every 2 ms it keeps that connection under a tenth of a core.
const waitInterval = 2 * time.Millisecond

// waitSampler is --wait-events: while a drain works, it samples what
// each of the run's connections is doing (pg_stat_activity): running on
// the CPU, waiting for an event (a lock, the WAL's flush, ...), or idle
// inside a transaction, waiting for the client's next statement (a round
// trip with locks held). Counted by state and statement, printed after the
// run: where the server's side of the time goes, measured.
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

// sampleWaits starts sampling db's run connections (named by
// pgstats.AppName) through its admin pool; stop it before the clients
// close. It samples nothing when --wait-events is off.
func (b *bencher) sampleWaits(ctx context.Context, db *benchDB) *waitSampler {
	if !b.o.waitEvents || db.admin == nil {
		return nil
	}
	ctx, stop := context.WithCancel(ctx)
	s := &waitSampler{counts: map[waitKey]int{}, stop: stop, done: make(chan struct{})}
	go s.run(ctx, db.admin, pgstats.AppName(db.schema))
	return s
}

// sampleQuery reads each run connection not idle outside a transaction:
// its state, its wait event (none: on the CPU) and its statement's start.
const sampleQuery = `SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type || ': ' || wait_event, 'on CPU')
	ELSE state || coalesce(' (' || wait_event || ')', '') END,
	left(regexp_replace(query, '\s+', ' ', 'g'), 70)
FROM pg_stat_activity WHERE application_name = $1 AND state <> 'idle'`

func (s *waitSampler) run(ctx context.Context, pool *pgxpool.Pool, app string) {
	defer close(s.done)
	t := time.NewTicker(waitInterval)
	defer t.Stop()
	for {
		rows, err := pool.Query(ctx, sampleQuery, app)
		if err == nil {
			s.mu.Lock()
			s.samples++
			for rows.Next() {
				var k waitKey
				if err = rows.Scan(&k.state, &k.stmt); err != nil {
					break
				}
				s.counts[k]++
				s.busy++
			}
			s.mu.Unlock()
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.err = fmt.Errorf("sample pg_stat_activity: %w", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

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
		fmt.Fprintf(w, "bench: --wait-events: %v\n", s.err)
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
