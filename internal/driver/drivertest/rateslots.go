package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Epoch is the instant a never-used ring slot carries.
var epoch = time.UnixMicro(0)

// A rate key's ring of start slots: stamps, reservations, the ring's
// resizing and the repair of reservations no job will use.
var _ = add("rate",
	test{"UnstampGivesBackOnlyTheStartItStamped", func(t *testing.T, f *fixture) {
		f.rateEnsure("g/k", 1, time.Second)
		f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/k", Slots: []int{0}, JobIDs: []int64{0}, At: T0}))
		if ok, err := f.ex().RateSlotUnstamp(f.ctx, driver.RateUnstampParams{Key: "g/k", Slot: 0, Stamped: T0.Add(time.Millisecond), To: epoch}); err != nil || ok {
			t.Errorf("UnstampSlot of another start = %v, %v; want false", ok, err)
		}
		if ok, err := f.ex().RateSlotUnstamp(f.ctx, driver.RateUnstampParams{Key: "g/k", Slot: 0, Stamped: T0, To: T0.Add(-time.Second)}); err != nil || !ok {
			t.Errorf("UnstampSlot of its start = %v, %v; want true", ok, err)
		}
		f.sameTime("OldestSlot after the start was given back", f.oldest("g/k"), T0.Add(-time.Second))
		// A reservation is no start: it is never given back this way.
		f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/k", Slots: []int{0}, JobIDs: []int64{7}, At: driver.Reserved}))
		if ok, err := f.ex().RateSlotUnstamp(f.ctx, driver.RateUnstampParams{Key: "g/k", Slot: 0, Stamped: driver.Reserved, To: epoch}); err != nil || ok {
			t.Errorf("UnstampSlot of a reservation = %v, %v; want false", ok, err)
		}
	}},
	test{"SlotsStartReserveCancel", func(t *testing.T, f *fixture) {
		f.rateEnsure("g/k", 3, time.Minute)
		f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/k", Slots: []int{0, 1}, JobIDs: []int64{0, 0}, At: T0}))
		f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/k", Slots: []int{2}, JobIDs: []int64{42}, At: driver.Reserved}))
		if got := f.freeSlots("g/k", T0.Add(-time.Second), 10); len(got) != 0 {
			t.Errorf("FreeSlots before the starts = %v, want none", got)
		}
		if got := sortedInts(f.freeSlots("g/k", T0, 10)); !slices.Equal(got, []int{0, 1}) {
			t.Errorf("FreeSlots at the starts = %v, want 0 and 1 (2 is reserved)", got)
		}
		if got := f.freeSlots("g/k", driver.Reserved, 1); len(got) != 1 || got[0] == 2 {
			t.Errorf("FreeSlots(max 1) = %v, want one of 0, 1", got)
		}
		if _, recent := f.readRate("g/k", T0.Add(-time.Second)); recent != 2 {
			t.Errorf("recent starts = %d, want 2 (the reservation does not count)", recent)
		}
		if _, recent := f.readRate("g/k", T0); recent != 0 {
			t.Errorf("recent starts after T0 = %d, want 0", recent)
		}
		f.sameTime("OldestSlot", f.oldest("g/k"), T0)
		if ok, err := f.startReserved("g/k", 42, T0.Add(5*time.Second)); err != nil || !ok {
			t.Errorf("StartReserved = %v, %v; want true", ok, err)
		}
		if ok, err := f.startReserved("g/k", 42, T0.Add(6*time.Second)); err != nil || ok {
			t.Errorf("second StartReserved = %v, %v; want false", ok, err)
		}
		if _, recent := f.readRate("g/k", T0); recent != 1 {
			t.Errorf("recent starts after T0 = %d, want 1 (the reservation started)", recent)
		}
		if got := f.freeSlots("g/k", T0.Add(5*time.Second), 10); len(got) != 3 {
			t.Errorf("FreeSlots = %v, want all 3", got)
		}
		// Reserve every slot: RateSlotGetOldest is Reserved; a cancel frees one
		// as never started.
		f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/k", Slots: []int{0, 1, 2}, JobIDs: []int64{7, 8, 9}, At: driver.Reserved}))
		f.sameTime("OldestSlot of a reserved ring", f.oldest("g/k"), driver.Reserved)
		if got := f.freeSlots("g/k", driver.Reserved, 10); len(got) != 0 {
			t.Errorf("FreeSlots of a reserved ring = %v, want none", got)
		}
		f.must(f.ex().RateSlotCancelReservation(f.ctx, "g/k", 8))
		if got := f.freeSlots("g/k", epoch, 10); !slices.Equal(got, []int{1}) {
			t.Errorf("FreeSlots after the cancel = %v, want slot 1 at the epoch", got)
		}
		f.sameTime("OldestSlot after the cancel", f.oldest("g/k"), epoch)
		f.sameTime("OldestSlot of a missing ring", f.oldest("g/none"), driver.Reserved)
	}},
	test{"ResizeRing", func(t *testing.T, f *fixture) {
		f.rateEnsure("g/k", 3, time.Minute)
		for i := range 3 {
			f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/k", Slots: []int{i}, JobIDs: []int64{0}, At: T0.Add(time.Duration(i) * time.Second)}))
		}
		f.must(f.ex().RateResizeRing(f.ctx, "g/k", 3, 2))
		if got := sortedInts(f.freeSlots("g/k", Far, 10)); !slices.Equal(got, []int{1, 2}) {
			t.Errorf("after shrinking to 2: slots %v, want 1 and 2 (the oldest start dropped)", got)
		}
		f.sameTime("OldestSlot after the shrink", f.oldest("g/k"), T0.Add(time.Second))
		f.must(f.ex().RateResizeRing(f.ctx, "g/k", 2, 4))
		if got := sortedInts(f.freeSlots("g/k", epoch, 10)); !slices.Equal(got, []int{3, 4}) {
			t.Errorf("after growing to 4: free slots at the epoch %v, want the new 3 and 4", got)
		}
		if got := f.freeSlots("g/k", Far, 10); len(got) != 4 {
			t.Errorf("after growing to 4: %d slots, want 4", len(got))
		}
		// Reservations go last.
		f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/k", Slots: []int{3}, JobIDs: []int64{9}, At: driver.Reserved}))
		f.must(f.ex().RateResizeRing(f.ctx, "g/k", 4, 1))
		f.sameTime("OldestSlot of the reservation left", f.oldest("g/k"), driver.Reserved)
		if ok, err := f.startReserved("g/k", 9, T0); err != nil || !ok {
			t.Errorf("StartReserved of the reservation the shrink kept = %v, %v", ok, err)
		}
		f.must(f.ex().RateResizeRing(f.ctx, "g/k", 1, 1))
		if got := f.freeSlots("g/k", Far, 10); !slices.Equal(got, []int{3}) {
			t.Errorf("ring = %v, want slot 3 alone", got)
		}
	}},
	test{"RepairReservations", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q"), job("q"))
		claimed := f.claim(f.ex(), "q", 1, 1, T0)[0].ID
		ready := ids[0]
		if ready == claimed {
			ready = ids[1]
		}
		const gone = 1 << 40 // no such job
		f.rateEnsure("g/k", 4, time.Minute)
		f.must(f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: "g/k", Slots: []int{0, 1, 2}, JobIDs: []int64{ready, claimed, gone}, At: driver.Reserved}))
		var n int
		f.tx(func(ex driver.Executor) (err error) {
			n, err = ex.RateSlotRepairReservations(f.ctx, "g/k")
			return err
		})
		if n != 1 {
			t.Errorf("RepairReservations = %d, want 1 (the vanished job's)", n)
		}
		if got := sortedInts(f.freeSlots("g/k", epoch, 10)); !slices.Equal(got, []int{2, 3}) {
			t.Errorf("free slots = %v, want 2 (repaired) and 3", got)
		}
		for _, id := range []int64{ready, claimed} {
			if ok, err := f.startReserved("g/k", id, T0); err != nil || !ok {
				t.Errorf("job %d's reservation is gone (%v, %v), want it kept", id, ok, err)
			}
		}
	}},
)

func (f *fixture) freeSlots(key string, notAfter time.Time, max int) []int {
	f.t.Helper()
	got, err := f.ex().RateSlotListFree(f.ctx, key, notAfter, max)
	f.must(err)
	return got
}

func (f *fixture) oldest(key string) time.Time {
	f.t.Helper()
	at, err := f.ex().RateSlotGetOldest(f.ctx, key, nil)
	f.must(err)
	return at
}

func sortedInts(v []int) []int { return slices.Sorted(slices.Values(v)) }

// startReserved turns jobID's reservation of key into a start at `at`, as
// the engine does: read the reservation, then write the slot. false when
// the job has none.
func (f *fixture) startReserved(key string, jobID int64, at time.Time) (bool, error) {
	slots, err := f.ex().RateSlotListReserved(f.ctx, key, []int64{jobID})
	if err != nil {
		return false, err
	}
	slot, ok := slots[jobID]
	if !ok {
		return false, nil
	}
	return true, f.ex().RateSlotSetMany(f.ctx, driver.RateSlotsParams{Key: key, Slots: []int{slot}, JobIDs: []int64{0}, At: at})
}
