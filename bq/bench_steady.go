package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// steady: 4 producers (produce) enqueue one job at a time at --rate in total while
// the workers run; the latency is from enqueue to start.
func (b *bencher) steady(ctx context.Context, res *benchResult) error {
	db, err := b.freshDB(ctx)
	if err != nil {
		return err
	}
	defer db.close()
	worker := db.clients[0]
	producer := worker
	if b.o.separate {
		if producer, err = db.client(ctx); err != nil {
			return err
		}
	}
	t := newTally(b.o.jobs, true)
	job := defineBench(0, t)
	res.Rate = b.o.rate

	run := runClient(ctx, worker)
	time.Sleep(200 * time.Millisecond) // registered and polling
	stopBar := b.bar(b.o.jobs, "enqueue+work", t.started.Load)
	stopProfile := b.startProfile()
	t0 := time.Now()
	enq, err := b.produce(ctx, job, producer, t0)
	if err == nil {
		err = waitStarted(ctx, t, run)
	}
	if err == nil {
		err = waitIdle(ctx, worker)
	}
	work := time.Since(t0)
	stopProfile()
	stopBar()
	if err := errors.Join(err, run.stop()); err != nil {
		return err
	}
	res.EnqueueS, res.WorkS = enq.Seconds(), work.Seconds()
	res.EnqueuePerS = float64(b.o.jobs) / enq.Seconds()
	res.WorkPerS = float64(b.o.jobs) / work.Seconds()
	res.Windows = latencyWindows(t0, b.o.window, t.enq, t.lat)
	lat := slices.Clone(t.lat)
	slices.Sort(lat)
	res.P50MS, res.P95MS, res.P99MS = ms(percentile(lat, 50)), ms(percentile(lat, 95)), ms(percentile(lat, 99))
	return nil
}

// latencyWindow is the enqueue->start latency of the jobs a steady run
// enqueued from FromS to ToS seconds after its start (--window).
type latencyWindow struct {
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	Jobs  int     `json:"jobs"`
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	P99MS float64 `json:"p99_ms"`
}

// latencyWindows groups the latencies lat by their jobs' enqueue instants
// enq (Unix ns, 0 for none) into windows of w from t0; none for w 0.
func latencyWindows(t0 time.Time, w time.Duration, enq []int64, lat []time.Duration) []latencyWindow {
	if w <= 0 {
		return nil
	}
	var by [][]time.Duration
	for i, at := range enq {
		if at == 0 || i >= len(lat) {
			continue
		}
		k := max(int(time.Unix(0, at).Sub(t0)/w), 0)
		for len(by) <= k {
			by = append(by, nil)
		}
		by[k] = append(by[k], lat[i])
	}
	out := make([]latencyWindow, 0, len(by))
	for k, l := range by {
		slices.Sort(l)
		out = append(out, latencyWindow{FromS: (time.Duration(k) * w).Seconds(), ToS: (time.Duration(k+1) * w).Seconds(), Jobs: len(l),
			P50MS: ms(percentile(l, 50)), P95MS: ms(percentile(l, 95)), P99MS: ms(percentile(l, 99))})
	}
	return out
}

// printWindows writes --window's lines of the text output.
func printWindows(w io.Writer, ws []latencyWindow) {
	for _, x := range ws {
		fmt.Fprintf(w, "    enqueued %6.1f-%6.1f s: %6d jobs, p50 %.2f ms, p95 %.2f ms, p99 %.2f ms\n", x.FromS, x.ToS, x.Jobs, x.P50MS, x.P95MS, x.P99MS)
	}
}

// percentile is the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
