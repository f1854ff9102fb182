package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq"
)

// gate holds each backlog job until it is released, and reports when the
// next one starts.
type gate struct {
	started chan time.Time
	release chan struct{}
	stop    chan struct{}
}

// backlog measures a handoff: the key's one running job is released, its
// completion frees the slot and promotes the next of `size` blocked jobs,
// which the worker claims and starts. Each size gets a fresh database.
func (b *bencher) backlog(ctx context.Context, res *benchResult) error {
	small, err := b.handoff(ctx, b.o.backlogSmall, false)
	if err != nil {
		return err
	}
	large, err := b.handoff(ctx, b.o.backlogLarge, true)
	if err != nil {
		return err
	}
	res.BacklogSmall, res.BacklogLarge = b.o.backlogSmall, b.o.backlogLarge
	res.BacklogSmallMS, res.BacklogLargeMS = ms(small), ms(large)
	res.BacklogRatio = float64(large) / float64(small)
	res.Jobs = b.o.backlogLarge + 1
	return nil
}

// handoff returns the median handoff time with size jobs blocked.
func (b *bencher) handoff(ctx context.Context, size int, profile bool) (time.Duration, error) {
	db, err := b.freshDB(ctx)
	if err != nil {
		return 0, err
	}
	defer db.close()
	c := db.clients[0]
	g := &gate{started: make(chan time.Time, 1), release: make(chan struct{}), stop: make(chan struct{})}
	job := bq.Define("bench.backlog", func(ctx context.Context, _ benchArgs) error {
		select {
		case g.started <- time.Now():
		case <-g.stop:
			return nil
		}
		select {
		case <-g.release:
		case <-g.stop:
		}
		return nil
	}, bq.JobOptions[benchArgs]{Queue: benchQueue, MaxAttempts: 1,
		Concurrency: &bq.Concurrency[benchArgs]{Key: func(a benchArgs) string { return a.Key }, To: 1}})

	// The holder, then the line behind it: size + handoffs jobs blocked,
	// so the line is still `size` long at the last handoff.
	if _, err := job.Enqueue(ctx, c, benchArgs{Key: "hot"}); err != nil {
		return 0, err
	}
	if _, err := b.enqueueAll(ctx, c, job, 0, size+b.o.handoffs); err != nil {
		return 0, err
	}
	stopRun := runClient(ctx, c)
	var times []time.Duration
	err = func() error {
		if _, err := b.next(ctx, g); err != nil {
			return err
		}
		if profile {
			defer b.startProfile()()
		}
		for range b.o.handoffs {
			t0 := time.Now()
			g.release <- struct{}{}
			at, err := b.next(ctx, g)
			if err != nil {
				return err
			}
			times = append(times, at.Sub(t0))
		}
		return nil
	}()
	close(g.stop) // let the last holder and any job after it finish
	if err := errors.Join(err, stopRun()); err != nil {
		return 0, err
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// next waits for the next backlog job to start.
func (b *bencher) next(ctx context.Context, g *gate) (time.Time, error) {
	select {
	case at := <-g.started:
		return at, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(time.Minute):
		return time.Time{}, fmt.Errorf("bench backlog: no job started within a minute of the previous one's release")
	}
}
