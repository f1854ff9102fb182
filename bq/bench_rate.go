package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/ratelimit"
)

// benchStart is one run's start as the job itself saw it: its rate key and
// the instant its function began.
type benchStart struct {
	key string
	at  time.Time
}

// startLog keeps every start of a rate run, appended to by every worker
// goroutine; each start is logged before the tally counts it, so the log
// is whole once the tally is done.
type startLog struct {
	mu     sync.Mutex
	starts []benchStart
	// runs counts the runs that reached the kind's middleware: the starts
	// and the runs bq sent back to the line unrun because they did not
	// begin within the start slack of their claim (each took a slot).
	runs atomic.Int64
}

func (l *startLog) add(key string, at time.Time) {
	l.mu.Lock()
	l.starts = append(l.starts, benchStart{key: key, at: at})
	l.mu.Unlock()
}

func (l *startLog) snapshot() []benchStart {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.starts)
}

// rateSpec is one rate a run asks for; each gets a job kind of its own.
type rateSpec struct {
	limit  int
	period time.Duration
}

var benchRateJobs = map[rateSpec]*bq.Job[benchArgs]{}

// defineRateBench returns the bench job kind rated at limit starts per
// period per args key, "bench.rate.<limit>per<period>", in the rate group
// "bench.rate".
func defineRateBench(spec rateSpec, t *tally) *bq.Job[benchArgs] {
	benchRun.Store(t)
	benchMu.Lock()
	defer benchMu.Unlock()
	if j, ok := benchRateJobs[spec]; ok {
		return j
	}
	name := fmt.Sprintf("bench.rate.%dper%dms", spec.limit, spec.period.Milliseconds())
	j := bq.Define(name, func(_ context.Context, a benchArgs) error {
		benchRun.Load().start(a)
		return nil
	}, bq.JobOptions[benchArgs]{Queue: benchQueue, MaxAttempts: 1,
		Middleware: []bq.WorkerMiddleware{func(ctx context.Context, _ bq.JobMeta, next func(context.Context) error) error {
			if l := benchRun.Load().log; l != nil {
				l.runs.Add(1)
			}
			return next(ctx)
		}},
		Rate: &bq.Rate[benchArgs]{Key: func(a benchArgs) string { return a.Key }, Limit: spec.limit, Period: spec.period, Group: "bench.rate"}})
	benchRateJobs[spec] = j
	return j
}

// rateKeyOf is job i's rate key: round-robin over --rate-keys.
func (b *bencher) rateKeyOf(i int) string { return "r" + strconv.Itoa(i%b.o.rateKeys) }

// rate: enqueue --jobs jobs over --rate-keys rate keys up front, then work
// them off and measure the starts against the configured rate.
func (b *bencher) rate(ctx context.Context, res *benchResult) error {
	db, err := b.freshDB(ctx)
	if err != nil {
		return err
	}
	defer db.close()
	c := db.clients[0]
	t := newTally(b.o.jobs, false)
	t.log = &startLog{starts: make([]benchStart, 0, b.o.jobs)}
	job := defineRateBench(rateSpec{b.o.rateLimit, b.o.ratePeriod}, t)
	enq, err := b.enqueueBatches(ctx, c, job, b.o.jobs, func(i, j int) []benchArgs {
		args := make([]benchArgs, 0, j-i)
		for k := i; k < j; k++ {
			args = append(args, benchArgs{Key: b.rateKeyOf(k)})
		}
		return args
	})
	if err != nil {
		return err
	}

	work, err := b.work(ctx, c, t)
	if err != nil {
		return err
	}
	res.EnqueueS, res.WorkS = enq.Seconds(), work.Seconds()
	res.EnqueuePerS = float64(b.o.jobs) / enq.Seconds()
	res.WorkPerS = float64(b.o.jobs) / work.Seconds()
	res.RateLimit, res.RatePeriodMS, res.RateKeys = b.o.rateLimit, ms(b.o.ratePeriod), b.o.rateKeys
	res.RateTargetPerS = float64(b.o.rateKeys*b.o.rateLimit) / b.o.ratePeriod.Seconds()
	m := measureRate(t.log.snapshot(), b.o.rateLimit, b.o.ratePeriod)
	res.RatePerS, res.RateMaxWindow, res.RateSlotGapMS, res.RateMinSlotGapMS = m.perS, m.maxWindow, ms(m.meanGap), ms(m.minGap)
	res.RateRatio = res.RatePerS / res.RateTargetPerS
	if m.meanGap > 0 {
		res.RateSteadyPerS = float64(b.o.rateKeys*b.o.rateLimit) / m.meanGap.Seconds()
	}
	res.RateLate = int(t.log.runs.Load()) - b.o.jobs
	return nil
}

// rateMeasure is what a rate run's starts show.
type rateMeasure struct {
	// perS: the starts after the first period's allowance (limit per key,
	// all free at once) over the time from the first start to the last.
	// Counting those first starts too would credit the run with a burst
	// the ring allows once, not with its rate.
	perS float64
	// maxWindow: the most starts of one key within any window of one
	// period.
	maxWindow int
	// meanGap, minGap: from a key's start to its start limit later, the
	// next to reuse the same ring slot: at least the period; what it takes
	// beyond that is the shortfall.
	meanGap, minGap time.Duration
}

func measureRate(starts []benchStart, limit int, period time.Duration) rateMeasure {
	var m rateMeasure
	if len(starts) == 0 {
		return m
	}
	byKey := map[string][]time.Time{}
	first, last := starts[0].at, starts[0].at
	for _, s := range starts {
		byKey[s.key] = append(byKey[s.key], s.at)
		if s.at.Before(first) {
			first = s.at
		}
		if s.at.After(last) {
			last = s.at
		}
	}
	var gaps time.Duration
	nGaps := 0
	for _, at := range byKey {
		slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
		// Any window of one period holds at most limit starts; the fullest
		// one begins at a start.
		j := 0
		for i := range at {
			for j < len(at) && at[j].Sub(at[i]) < period {
				j++
			}
			m.maxWindow = max(m.maxWindow, j-i)
		}
		for i := limit; i < len(at); i++ {
			g := at[i].Sub(at[i-limit])
			gaps += g
			nGaps++
			if nGaps == 1 || g < m.minGap {
				m.minGap = g
			}
		}
	}
	if nGaps > 0 {
		m.meanGap = gaps / time.Duration(nGaps)
	}
	if span := last.Sub(first); span > 0 {
		m.perS = float64(len(starts)-len(byKey)*limit) / span.Seconds()
	}
	return m
}

// checkRate fails a rate run whose starts broke the limit.
func checkRate(r *benchResult) error {
	if r.Mode != "rate" || r.RateMaxWindow <= r.RateLimit {
		return nil
	}
	return fmt.Errorf("bench rate: THE RATE LIMIT WAS BROKEN: %d starts of one key within one period of %gms, over the limit of %d",
		r.RateMaxWindow, r.RatePeriodMS, r.RateLimit)
}

func printRate(w io.Writer, r *benchResult) {
	fmt.Fprintf(w, "  %.1f starts/s of %.1f configured (%d keys x %d per %gms): ratio %.3f\n",
		r.RatePerS, r.RateTargetPerS, r.RateKeys, r.RateLimit, r.RatePeriodMS, r.RateRatio)
	fmt.Fprintf(w, "  most starts of one key in one period: %d (limit %d)\n", r.RateMaxWindow, r.RateLimit)
	fmt.Fprintf(w, "  a ring slot is reused after %.1f ms on average, %.1f ms at least: %.1f starts/s once the first burst is past\n",
		r.RateSlotGapMS, r.RateMinSlotGapMS, r.RateSteadyPerS)
	fmt.Fprintf(w, "  %d runs began later than their start slack (at least %gms) after the claim: sent back to the line unrun, their starts given back\n",
		r.RateLate, ms(ratelimit.StartSlack(time.Duration(r.RatePeriodMS*float64(time.Millisecond)))))
	fmt.Fprintf(w, "  enqueue %.0f jobs/s (%.2fs), work %.2fs\n", r.EnqueuePerS, r.EnqueueS, r.WorkS)
}
