package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"SnoozeReleasesTheSlot", testSnoozeReleasesTheSlot},
	scenario{"SnoozeDiscardsWhenDueBesideAFullKey", testSnoozeDiscardsWhenDue},
	scenario{"SnoozeRefusesANonPositiveDelay", testSnoozeRefusesANonPositiveDelay},
	scenario{"SnoozedJobShowsItsNewRunTime", testSnoozedJobShowsItsNewRunTime},
)

// testSnoozedJobShowsItsNewRunTime: Job and ListJobs give a snoozed job's
// scheduled time as the time it runs again, not its first due time.
func testSnoozedJobShowsItsNewRunTime(t *testing.T, h *harness) {
	const delay = time.Minute
	snoozer := enqueue(t, h, limit1Job, Args{Key: "sn", Mode: "snooze-first", N: int(delay / time.Millisecond)})
	before := time.Now()
	worker(h, 1)
	h.waitState(snoozer.ID, bq.StateScheduled)
	info := jobInfo(t, h, snoozer.ID)
	if info.ScheduledAt.Before(before.Add(delay-time.Second)) || info.ScheduledAt.After(time.Now().Add(delay+time.Second)) {
		t.Errorf("Job: the snoozed job is scheduled at %s, want about %s from its snooze (%s)", info.ScheduledAt, delay, before)
	}
	page, err := h.client.ListJobs(context.Background(), bq.JobFilter{States: []bq.JobState{bq.StateScheduled}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 1 || !page.Jobs[0].ScheduledAt.Equal(info.ScheduledAt) {
		t.Errorf("ListJobs: %+v, want the one snoozed job scheduled at %s", page.Jobs, info.ScheduledAt)
	}
}

// testSnoozeReleasesTheSlot: a keyed To=1 job that snoozes hands its slot
// to the next blocked job of its key at once, runs again after its delay
// with its attempt unspent, and runs of the key never overlap.
func testSnoozeReleasesTheSlot(t *testing.T, h *harness) {
	const delay = 400 * time.Millisecond
	snoozer := enqueue(t, h, limit1Job, Args{Key: "s", Mode: "snooze-first", SleepMS: 50, N: int(delay / time.Millisecond)})
	next := enqueue(t, h, limit1Job, Args{Key: "s", SleepMS: 100})
	last := enqueue(t, h, limit1Job, Args{Key: "s", SleepMS: 100})
	if next.State != bq.StateBlocked || last.State != bq.StateBlocked {
		t.Fatalf("enqueue behind the holder: %+v %+v, want both blocked", next, last)
	}
	rec := h.recorder()
	worker(h, 4)
	h.eventually(20*time.Second, "4 runs (one snoozed)", func() bool { return len(rec.all()) == 4 })
	h.waitState(snoozer.ID, bq.StateCompleted)

	runs := rec.all()
	var snoozed []run
	starts := map[int64]time.Time{}
	for _, r := range runs {
		if r.JobID == snoozer.ID {
			snoozed = append(snoozed, r)
			if r.Attempt != 1 {
				t.Errorf("the snoozing job ran as attempt %d, want 1 every time: a snooze spends no attempt", r.Attempt)
			}
		} else {
			starts[r.JobID] = r.Start
		}
	}
	if len(snoozed) != 2 {
		t.Fatalf("the snoozing job ran %d times, want 2 (snoozed, then done): %+v", len(snoozed), runs)
	}
	first, again := snoozed[0], snoozed[1]
	if s := starts[next.ID]; s.IsZero() || s.Before(first.End) || s.After(again.Start) {
		t.Errorf("the next blocked job started at %s, want between the snooze (%s) and the snoozed job's return (%s)",
			s.Format(time.StampMilli), first.End.Format(time.StampMilli), again.Start.Format(time.StampMilli))
	}
	if gap := again.Start.Sub(first.End); gap < delay {
		t.Errorf("the snoozed job ran again %s after snoozing, want at least %s", gap, delay)
	}
	if n := maxOverlap(runs)["s"]; n > 1 {
		t.Errorf("key s with To=1: %d runs overlapped", n)
	}
	if info := jobInfo(t, h, snoozer.ID); info.Attempts != 1 || info.LastError != "" {
		t.Errorf("snoozed job's attempts %d, error %q, want 1 (only its completed run) and none", info.Attempts, info.LastError)
	}
	h.checkSemaphores()
}

// testSnoozeDiscardsWhenDue: a snoozed job of a key that discards on
// conflict is admitted when due like any scheduled job: with the key full
// then, it ends discarded and the holder runs on alone.
func testSnoozeDiscardsWhenDue(t *testing.T, h *harness) {
	ctx := context.Background()
	snoozer := enqueue(t, h, discard1Job, Args{Key: "sd", Mode: "snooze-first", N: 1000})
	worker(h, 2)
	h.waitState(snoozer.ID, bq.StateScheduled)
	if info := jobInfo(t, h, snoozer.ID); info.Attempts != 0 {
		t.Errorf("snoozed job's attempts %d, want 0", info.Attempts)
	}
	// The snooze released the slot: a fresh job takes it.
	holder := enqueue(t, h, discard1Job, Args{Key: "sd", SleepMS: 3000})
	if holder.State != bq.StateReady {
		t.Fatalf("a job beside a snoozed one is %+v, want ready: the snooze must release the slot", holder)
	}
	h.waitState(snoozer.ID, bq.StateDiscarded)
	if st := h.state(holder.ID); st != bq.StateRunning && st != bq.StateReady {
		t.Errorf("the holder is %s as the snoozed job came due, want still holding the slot", st)
	}
	h.checkSemaphores()
	if info, err := h.client.Job(ctx, snoozer.ID); err != nil || info.Attempts != 0 {
		t.Errorf("discarded snoozed job: %+v %v, want its attempt unspent", info, err)
	}
}

// testSnoozeRefusesANonPositiveDelay: bq.Snooze(d <= 0) is an error that
// names the fix; a run returning it fails like any run that errs.
func testSnoozeRefusesANonPositiveDelay(t *testing.T, h *harness) {
	for _, d := range []time.Duration{0, -time.Second} {
		if err := bq.Snooze(d); !errors.Is(err, bq.ErrInvalidArgument) || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("bq.Snooze(%s) = %v, want ErrInvalidArgument naming the fix", d, err)
		}
	}
	res := enqueue(t, h, onceJob, Args{Mode: "snooze-zero"})
	worker(h, 1)
	h.waitState(res.ID, bq.StateFailed)
	info := jobInfo(t, h, res.ID)
	if want := "bq.Snooze: the delay must be positive, got 0s"; !strings.Contains(info.LastError, want) {
		t.Errorf("last error %q, want it to contain %q", info.LastError, want)
	}
	if info.Attempts != 1 {
		t.Errorf("attempts %d, want 1: the failed run counts", info.Attempts)
	}
}
