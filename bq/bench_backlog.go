package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq"
)

// line is one backlog case: a database whose one key has a running
// holder and `size` jobs blocked behind it, worked by a client of its own.
type line struct {
	size    int
	db      *benchDB
	run     *running
	started chan time.Time // the start instant of each job of the key
	release chan struct{}  // lets the running job finish
	times   []time.Duration
}

// backlogState is the backlog run under way, which backlogJob serves.
type backlogState struct {
	lines map[string]*line
	stop  chan struct{}
}

var backlogRun atomic.Pointer[backlogState]

// backlogJob is the backlog's job kind, defined once per process on the
// first backlog run (defined at start-up, every other command's client
// would warn that it works no queue of it): its key is a line's name, one
// at a time; each run holds until the line releases it (or the run stops).
var backlogJob = sync.OnceValue(func() *bq.Job[benchArgs] {
	return bq.Define("bench.backlog", func(ctx context.Context, a benchArgs) error {
		r := backlogRun.Load()
		l := r.lines[a.Key]
		select {
		case l.started <- time.Now():
		case <-r.stop:
			return nil
		}
		select {
		case <-l.release:
		case <-r.stop:
		}
		return nil
	}, bq.JobOptions[benchArgs]{Queue: benchQueue, MaxAttempts: 1,
		Concurrency: &bq.Concurrency[benchArgs]{Key: func(a benchArgs) string { return a.Key }, To: 1}})
})

// backlog measures a handoff: the key's one running job is released, its
// completion frees the slot and promotes the next blocked job, which the
// worker claims and starts. The small and the large line live in two
// databases at once and the handoffs alternate between them, so the
// machine's noise falls on both alike.
func (b *bencher) backlog(ctx context.Context, res *benchResult) error {
	lines := map[string]*line{
		"small": {size: b.o.backlogSmall},
		"large": {size: b.o.backlogLarge},
	}
	stop := make(chan struct{})
	backlogRun.Store(&backlogState{lines: lines, stop: stop})
	job := backlogJob()

	defer func() {
		close(stop) // let every held job finish
		for _, l := range lines {
			if l.run != nil {
				_ = l.run.stop()
			}
			if l.db != nil {
				l.db.close()
			}
		}
	}()
	for _, key := range []string{"small", "large"} {
		if err := b.buildLine(ctx, job, key, lines[key]); err != nil {
			return err
		}
	}
	defer b.startProfile()()
	for range b.o.handoffs {
		for _, key := range []string{"small", "large"} {
			l := lines[key]
			t0 := time.Now()
			l.release <- struct{}{}
			at, err := l.next(ctx)
			if err != nil {
				return err
			}
			l.times = append(l.times, at.Sub(t0))
		}
	}
	small, large := median(lines["small"].times), median(lines["large"].times)
	res.BacklogSmall, res.BacklogLarge = b.o.backlogSmall, b.o.backlogLarge
	res.BacklogSmallMS, res.BacklogLargeMS = ms(small), ms(large)
	res.BacklogRatio = float64(large) / float64(small)
	res.Jobs = b.o.backlogLarge + 1
	return nil
}

// buildLine makes l's database: the holder, then size + handoffs jobs
// blocked behind it (so the line is still `size` long at the last
// handoff), then starts its client and waits for the holder to run.
func (b *bencher) buildLine(ctx context.Context, job *bq.Job[benchArgs], key string, l *line) error {
	var err error
	if l.db, err = b.freshDB(ctx); err != nil {
		return err
	}
	l.started, l.release = make(chan time.Time, 1), make(chan struct{})
	c := l.db.clients[0]
	if _, err := job.Enqueue(ctx, c, benchArgs{Key: key}); err != nil {
		return err
	}
	saved := b.o.mode
	b.o.mode = "backlog " + key // the progress bar's label
	_, err = b.enqueueLine(ctx, c, job, key, l.size+b.o.handoffs)
	b.o.mode = saved
	if err != nil {
		return err
	}
	l.run = runClient(ctx, c)
	_, err = l.next(ctx)
	return err
}

// enqueueLine blocks n jobs of key behind its holder, batch by batch.
func (b *bencher) enqueueLine(ctx context.Context, c *bq.Client, job *bq.Job[benchArgs], key string, n int) (time.Duration, error) {
	args := make([]benchArgs, b.o.batch)
	for i := range args {
		args[i].Key = key
	}
	return b.enqueueBatches(ctx, c, job, n, func(i, j int) []benchArgs { return args[:j-i] })
}

// next waits for the line's next job to start.
func (l *line) next(ctx context.Context) (time.Time, error) {
	select {
	case at := <-l.started:
		return at, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-l.run.done:
		return time.Time{}, fmt.Errorf("bench backlog: the client stopped: %v", l.run.err)
	case <-time.After(time.Minute):
		return time.Time{}, errors.New("bench backlog: no job started within a minute of the previous one's release")
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
