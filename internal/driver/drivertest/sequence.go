package drivertest

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// sequenceKeyed gives the job key as a sequence's (Limit.Sequence).
func sequenceKeyed(key string) func(*driver.NewJob) {
	return func(j *driver.NewJob) {
		j.Limit = driver.Limit{Key: key, To: 1, Duration: time.Minute, Sequence: true}
	}
}

var _ = add("sequence",
	// A sequence's job stores its Sequence; marked as holding its slot
	// while scheduled (a retry) it counts as a holder of its key
	// (HolderCount, HolderList), comes due with SlotHeld, and unmarked
	// it no longer counts. A job that is not a sequence's is never marked.
	test{"HeldRetryIsAHolder", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q", sequenceKeyed("g/s"), dueAt(T0.Add(time.Second))),
			job("q", keyed("g/s", 1), dueAt(T0.Add(time.Second))), job("q", sequenceKeyed("g/s")))
		seq, plain := ids[0], ids[1]
		holders := func() int {
			n, err := f.ex().HolderCount(f.ctx, "g/s")
			f.must(err)
			return n.Holders
		}
		info := find(f.ex().JobGet(f.ctx, seq)).of(f, "the sequence's job")
		if !info.Limit.Sequence || info.SlotHeld {
			t.Errorf("a new sequence job: Sequence %v, SlotHeld %v, want true, false", info.Limit.Sequence, info.SlotHeld)
		}
		if n := holders(); n != 1 {
			t.Errorf("HolderCount before any hold = %d, want 1 (the ready job)", n)
		}
		f.tx(func(ex driver.Executor) error {
			if err := ex.JobHoldSlot(f.ctx, seq, true); err != nil {
				return err
			}
			return ex.JobHoldSlot(f.ctx, plain, true)
		})
		if info := find(f.ex().JobGet(f.ctx, seq)).of(f, "the held job"); !info.SlotHeld || !info.Limit.Sequence {
			t.Errorf("a held sequence job: SlotHeld %v, Sequence %v, want both", info.SlotHeld, info.Limit.Sequence)
		}
		if info := find(f.ex().JobGet(f.ctx, plain)).of(f, "the plain job"); info.SlotHeld || info.Limit.Sequence {
			t.Errorf("JobHoldSlot marked a job that is not a sequence's: %+v", info.Job)
		}
		if n := holders(); n != 2 {
			t.Errorf("HolderCount with a held scheduled retry = %d, want 2", n)
		}
		list, err := f.ex().HolderList(f.ctx, "g/s", 10)
		f.must(err)
		if len(list) != 2 || list[0].JobID != seq || !list[0].Held || list[0].Running || list[1].Held {
			t.Errorf("HolderList = %+v, want the held retry (scheduled) then the ready job", list)
		}
		var due []*driver.Job
		f.tx(func(ex driver.Executor) (err error) {
			due, err = ex.ScheduledTakeDue(f.ctx, T0.Add(time.Second), 10)
			return err
		})
		if len(due) != 2 || due[0].ID != seq || !due[0].SlotHeld || due[1].SlotHeld {
			t.Errorf("ScheduledTakeDue = %d jobs, want the held one first with SlotHeld, then the plain one", len(due))
		}
		f.tx(func(ex driver.Executor) error { return ex.JobHoldSlot(f.ctx, seq, false) })
		if info := find(f.ex().JobGet(f.ctx, seq)).of(f, "the job let go"); info.SlotHeld || !info.Limit.Sequence {
			t.Errorf("after JobHoldSlot(false): SlotHeld %v, Sequence %v, want false, true", info.SlotHeld, info.Limit.Sequence)
		}
		if n := holders(); n != 1 {
			t.Errorf("HolderCount after the hold ends = %d, want 1", n)
		}
	}},
	// A halting sequence's job stores SequenceHalt; failed and held, it
	// counts as a holder of its key until the hold ends.
	test{"HeldFailureIsAHolder", func(t *testing.T, f *fixture) {
		halting := func(j *driver.NewJob) { sequenceKeyed("g/h")(j); j.Limit.SequenceHalt = true }
		id := f.insert(T0, job("q", halting))[0]
		f.tx(func(ex driver.Executor) error {
			if _, err := ex.ExecutionDelete(f.ctx, driver.StateReady, id); err != nil {
				return err
			}
			if err := ex.FailedInsert(f.ctx, id, "boom", T0); err != nil {
				return err
			}
			return ex.JobHoldSlot(f.ctx, id, true)
		})
		info := find(f.ex().JobGet(f.ctx, id)).of(f, "the failed job")
		if !info.Limit.Sequence || !info.Limit.SequenceHalt || !info.SlotHeld || info.State != driver.StateFailed {
			t.Errorf("a held failed job of a halting sequence: %+v (state %s), want Sequence, SequenceHalt, SlotHeld, failed", info.Limit, info.State)
		}
		n, err := f.ex().HolderCount(f.ctx, "g/h")
		f.must(err)
		list, err := f.ex().HolderList(f.ctx, "g/h", 10)
		f.must(err)
		if n.Holders != 1 || len(list) != 1 || !list[0].Held {
			t.Errorf("HolderCount %d, HolderList %+v; want the failed job, held", n.Holders, list)
		}
		f.tx(func(ex driver.Executor) error { return ex.JobHoldSlot(f.ctx, id, false) })
		if n, err := f.ex().HolderCount(f.ctx, "g/h"); err != nil || n.Holders != 0 {
			t.Errorf("HolderCount after the hold ends = %+v, %v; want 0", n, err)
		}
		if info := find(f.ex().JobGet(f.ctx, id)).of(f, "the job let go"); !info.Limit.SequenceHalt || info.SlotHeld {
			t.Errorf("after JobHoldSlot(false): %+v, SlotHeld %v; want SequenceHalt kept, not held", info.Limit, info.SlotHeld)
		}
	}},
)
