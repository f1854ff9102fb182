package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// sqlStats is a pgx tracer that adds up, per statement, how often it ran
// and how long the client waited for it.
type sqlStats struct {
	mu      sync.Mutex
	byQuery map[string]*sqlStat
}

type sqlStat struct {
	sql   string
	calls int
	total time.Duration
}

type traceStart struct{}

type traceBegin struct {
	sql string
	at  time.Time
}

func (s *sqlStats) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceStart{}, traceBegin{sql: d.SQL, at: time.Now()})
}

func (s *sqlStats) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	tb, ok := ctx.Value(traceStart{}).(traceBegin)
	if !ok {
		return
	}
	d := time.Since(tb.at)
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.byQuery[tb.sql]
	if st == nil {
		st = &sqlStat{sql: tb.sql}
		s.byQuery[tb.sql] = st
	}
	st.calls++
	st.total += d
}

// TraceBatchStart and TraceBatchEnd count a pipelined batch as one
// round trip, named by the statements in it.
func (s *sqlStats) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	names := make([]string, len(d.Batch.QueuedQueries))
	for i, q := range d.Batch.QueuedQueries {
		f := strings.Fields(q.SQL)
		names[i] = strings.Join(f[:min(len(f), 3)], " ")
	}
	return context.WithValue(ctx, traceStart{}, traceBegin{sql: "batch: " + strings.Join(names, " + "), at: time.Now()})
}

func (s *sqlStats) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s *sqlStats) TraceBatchEnd(ctx context.Context, c *pgx.Conn, _ pgx.TraceBatchEndData) {
	s.TraceQueryEnd(ctx, c, pgx.TraceQueryEndData{})
}

// print writes the statements by total time, the first line of each.
func (s *sqlStats) print(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]*sqlStat, 0, len(s.byQuery))
	var total time.Duration
	calls := 0
	for _, st := range s.byQuery {
		all = append(all, st)
		total += st.total
		calls += st.calls
	}
	slices.SortFunc(all, func(a, b *sqlStat) int { return int(b.total - a.total) })
	fmt.Fprintf(w, "SQL statements by client-side time (total %s, %d round trips not counting prepares):\n",
		total.Round(time.Millisecond), calls)
	for _, st := range all[:min(len(all), 15)] {
		fmt.Fprintf(w, "  %5.1f%% %9s %8d calls %7.1f µs/call  %s\n", 100*float64(st.total)/float64(max(total, 1)),
			st.total.Round(time.Millisecond), st.calls, float64(st.total.Microseconds())/float64(st.calls), oneLine(st.sql))
	}
}

func oneLine(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 110 {
		q = q[:110] + "…"
	}
	return q
}
