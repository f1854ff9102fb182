package conformance

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/dispatcher"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

var _ = register(
	scenario{"ReaperReturnsLostClaims", testReaper},
	scenario{"ReaperFailsWhenAttemptsSpent", testReaperFails},
	scenario{"ExpiredSemaphoreReclaimsGoneHolders", testReclaimGone},
	scenario{"ExpiredSemaphoreKeepsLiveHolders", testReclaimKeepsLive},
	scenario{"DispatcherPromotesBesideFreeSlots", testPromoteBesideFree},
	scenario{"RetentionClearsFinishedJobs", testRetention},
	scenario{"SharedSilenceIsNoEvidence", testSharedSilenceIsNoEvidence},
	scenario{"ReaperSeesARowDeletedBetweenPasses", testReaperSeesRowDeleted},
	scenario{"ReaperSeesASilenceBetweenPasses", testReaperSeesSilence},
)

// testReaperSeesSilence: one running dispatcher reaps the claim of a
// process that fell silent since its last look through every claim, at
// its first pass after the silence passed ProcessDeadAfter (10 min on
// its clock here), not ProcessDeadAfter after that look.
func testReaperSeesSilence(t *testing.T, h *harness) {
	ctx := context.Background()
	t0 := time.Now()
	const deadAfter = 10 * time.Minute
	silent := registerProcess(t, h, t0.Add(-6*time.Minute))
	w := witness(t, h)
	// Unkeyed: a key's expiry would take the claim on another path.
	res := enqueue(t, h, unkeyedJob, Args{})
	claimOne(t, h, silent)
	now := t0
	d := dispatcher.New(h.driver(), dispatcher.Config{ProcessDeadAfter: deadAfter, Now: func() time.Time { return now }})
	if err := d.Pass(ctx); err != nil {
		t.Fatalf("dispatcher pass: %v", err)
	}
	if st := h.state(res.ID); st != bq.StateRunning {
		t.Fatalf("the claim of a process silent for 6 min of 10: %s, want running", st)
	}
	now = t0.Add(5 * time.Minute) // silent for 11 min; the witness beats on
	if landed, err := h.driver().Exec().ProcessHeartbeat(ctx, driver.Beat{ProcessID: w, At: now, BeatingSince: t0.Add(-2 * time.Hour)}); err != nil || !landed {
		t.Fatalf("witness heartbeat: landed %v, %v", landed, err)
	}
	if err := d.Pass(ctx); err != nil {
		t.Fatalf("dispatcher pass: %v", err)
	}
	if info := jobInfo(t, h, res.ID); info.State != bq.StateReady || info.Attempts != 1 {
		t.Errorf("the claim of a process silent for 11 min of 10, 5 min after the dispatcher's last look: %s with %d attempts, want ready with 1", info.State, info.Attempts)
	}
	h.checkSemaphores()
}

// testReaperSeesRowDeletedBetweenPasses: one running dispatcher (its
// look through every claim made at its first pass) reaps, at its next
// pass, the claim of a live process whose row was deleted since: a
// process row gone is a dead process, and passes in between that find
// every process beating still look at the rows.
func testReaperSeesRowDeleted(t *testing.T, h *harness) {
	ctx := context.Background()
	live := registerProcess(t, h, time.Now())
	res := enqueue(t, h, unkeyedJob, Args{})
	claimOne(t, h, live)
	d := dispatcher.New(h.driver(), dispatcher.Config{ProcessDeadAfter: time.Hour})
	for range 2 { // the first looks through every claim, the second only at the rows
		if err := d.Pass(ctx); err != nil {
			t.Fatalf("dispatcher pass: %v", err)
		}
		if st := h.state(res.ID); st != bq.StateRunning {
			t.Fatalf("the claim of a beating process: %s, want running", st)
		}
	}
	h.exec(`DELETE FROM bq_processes WHERE id = `+strconv.FormatInt(live, 10),
		`DELETE FROM bq_processes WHERE id = `+strconv.FormatInt(live, 10),
		`DELETE FROM bq_processes WHERE id = `+strconv.FormatInt(live, 10))
	if err := d.Pass(ctx); err != nil {
		t.Fatalf("dispatcher pass: %v", err)
	}
	if info := jobInfo(t, h, res.ID); info.State != bq.StateReady || info.Attempts != 1 {
		t.Errorf("the claim of a process whose row was deleted: %s with %d attempts after the next pass, want ready with 1", info.State, info.Attempts)
	}
	h.checkSemaphores()
}

// exec runs a white-box statement, one text per dialect.
func (h *harness) exec(postgres, sqlite, mysql string) {
	h.t.Helper()
	var q string
	switch h.db {
	case "postgres":
		q = postgres
	case "mysql":
		q = h.sql(mysql)
	default:
		q = sqlite
	}
	if _, err := h.raw.ExecContext(context.Background(), q); err != nil {
		h.t.Fatalf("%s: %v", q, err)
	}
}

func pass(t *testing.T, h *harness, cfg dispatcher.Config) {
	t.Helper()
	if err := dispatcher.New(h.driver(), cfg).Pass(context.Background()); err != nil {
		t.Fatalf("dispatcher pass: %v", err)
	}
}

// testReaper: the claim of a process that stopped heartbeating goes back
// to ready, keeping its slot, with the attempt counted.
func testReaper(t *testing.T, h *harness) {
	res := enqueue(t, h, limit1Job, Args{Key: "rp"})
	behind := enqueue(t, h, limit1Job, Args{Key: "rp"})
	claimOne(t, h, registerProcess(t, h, time.Now().Add(-time.Hour)))
	live := registerProcess(t, h, time.Now())
	other := enqueue(t, h, unkeyedJob, Args{})
	claimOne(t, h, live)
	witness(t, h)

	pass(t, h, dispatcher.Config{ProcessDeadAfter: time.Minute})
	info := jobInfo(t, h, res.ID)
	if info.State != bq.StateReady || info.Attempts != 1 || info.LastError != lifecycle.ReapMessage {
		t.Errorf("lost claim: %s, %d attempts, error %q; want ready, 1 attempt, process lost", info.State, info.Attempts, info.LastError)
	}
	if st := h.state(behind.ID); st != bq.StateBlocked {
		t.Errorf("job behind the lost one: %s, want blocked (the reaped job keeps its slot)", st)
	}
	if st := h.state(other.ID); st != bq.StateRunning {
		t.Errorf("claim of a live process: %s, want still running", st)
	}
	h.checkSemaphores()
}

func testReaperFails(t *testing.T, h *harness) {
	res := enqueue(t, h, onceJob, Args{Key: "rf"})
	claimOne(t, h, registerProcess(t, h, time.Now().Add(-time.Hour)))
	witness(t, h)
	pass(t, h, dispatcher.Config{ProcessDeadAfter: time.Minute})
	info := jobInfo(t, h, res.ID)
	if info.State != bq.StateFailed || !strings.Contains(info.LastError, "process lost") {
		t.Errorf("lost claim with attempts spent: %s, %q; want failed, process lost", info.State, info.LastError)
	}
}

// testReclaimGone: a semaphore whose slot is held by nobody (its holder
// vanished without a release) gets the slot back once expired, and the
// blocked job takes it.
func testReclaimGone(t *testing.T, h *harness) {
	gone := enqueue(t, h, limit1Job, Args{Key: "ex"})
	behind := enqueue(t, h, limit1Job, Args{Key: "ex"})
	// The holder disappears without releasing: the slot count drifts.
	h.exec(`DELETE FROM bq_ready_executions`, `DELETE FROM bq_ready_executions`, `DELETE FROM bq_ready_executions`)
	h.exec(`UPDATE bq_jobs SET finished_at = now() WHERE id = `+itoa(gone.ID),
		`UPDATE bq_jobs SET finished_at = 1 WHERE id = `+itoa(gone.ID),
		`UPDATE bq_jobs SET finished_at = 1 WHERE id = `+itoa(gone.ID))

	pass(t, h, dispatcher.Config{})
	if st := h.state(behind.ID); st != bq.StateBlocked {
		t.Fatalf("before expiry: %s, want blocked", st)
	}
	pass(t, h, dispatcher.Config{Now: func() time.Time { return time.Now().Add(4 * time.Minute) }})
	if st := h.state(behind.ID); st != bq.StateReady {
		t.Errorf("after expiry: %s, want ready (the gone holder's slot reclaimed)", st)
	}
	h.checkSemaphores()
}

// testReclaimKeepsLive: an expired semaphore whose holder's process is
// alive keeps the slot taken: no second job starts beside it.
func testReclaimKeepsLive(t *testing.T, h *harness) {
	enqueue(t, h, limit1Job, Args{Key: "lv"})
	behind := enqueue(t, h, limit1Job, Args{Key: "lv"})
	claimOne(t, h, registerProcess(t, h, time.Now()))
	h.exec(`UPDATE bq_semaphores SET expires_at = now() - interval '1 hour'`, `UPDATE bq_semaphores SET expires_at = 0`,
		`UPDATE bq_semaphores SET expires_at = 0`)
	pass(t, h, dispatcher.Config{})
	if st := h.state(behind.ID); st != bq.StateBlocked {
		t.Errorf("job behind a live holder of an expired semaphore: %s, want blocked", st)
	}
	if n := h.count(`SELECT count(*) FROM bq_claimed_executions`); n != 1 {
		t.Errorf("%d claims, want the live one kept", n)
	}
	h.checkSemaphores()
}

// testPromoteBesideFree: a blocked job beside a free slot is promoted
// within one dispatcher pass (invariant 4).
func testPromoteBesideFree(t *testing.T, h *harness) {
	gone := enqueue(t, h, limit1Job, Args{Key: "pf"})
	behind := enqueue(t, h, limit1Job, Args{Key: "pf"})
	h.exec(`DELETE FROM bq_ready_executions`, `DELETE FROM bq_ready_executions`, `DELETE FROM bq_ready_executions`)
	h.exec(`UPDATE bq_jobs SET finished_at = now() WHERE id = `+itoa(gone.ID),
		`UPDATE bq_jobs SET finished_at = 1 WHERE id = `+itoa(gone.ID),
		`UPDATE bq_jobs SET finished_at = 1 WHERE id = `+itoa(gone.ID))
	h.exec(`UPDATE bq_semaphores SET value = 1`, `UPDATE bq_semaphores SET value = 1`, `UPDATE bq_semaphores SET value = 1`)
	pass(t, h, dispatcher.Config{})
	if st := h.state(behind.ID); st != bq.StateReady {
		t.Errorf("blocked job beside a free slot: %s after a pass, want ready", st)
	}
	h.checkSemaphores()
}

func testRetention(t *testing.T, h *harness) {
	res := enqueue(t, h, unkeyedJob, Args{})
	worker(h, 1)
	h.waitState(res.ID, bq.StateCompleted)
	pass(t, h, dispatcher.Config{Retention: time.Hour, Now: func() time.Time { return time.Now().Add(30 * time.Minute) }})
	if st := h.state(res.ID); st != bq.StateCompleted {
		t.Fatalf("within retention: %s, want completed", st)
	}
	pass(t, h, dispatcher.Config{Retention: time.Hour, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if _, err := h.client.Job(context.Background(), res.ID); !errors.Is(err, bq.ErrJobNotFound) {
		t.Errorf("past retention: %v, want ErrJobNotFound", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// testSharedSilenceIsNoEvidence: processes that all fell silent together
// (an outage, a database locked by a frozen writer) are not dead: no
// dispatcher reaps one of them until another's heartbeats have landed
// without a gap for longer than the silence it judges by.
func testSharedSilenceIsNoEvidence(t *testing.T, h *harness) {
	ctx := context.Background()
	res := enqueue(t, h, limit1Job, Args{Key: "sh"})
	silentSince := time.Now().Add(-time.Hour)
	a := registerProcess(t, h, silentSince)
	b := registerProcess(t, h, silentSince)
	claimOne(t, h, a)
	pass(t, h, dispatcher.Config{ProcessDeadAfter: time.Minute})
	if info := jobInfo(t, h, res.ID); info.State != bq.StateRunning || info.Attempts != 0 {
		t.Fatalf("every process silent together: the claim is %s with %d attempts, want still running", info.State, info.Attempts)
	}
	if n := h.count(`SELECT count(*) FROM bq_processes`); n != 2 {
		t.Errorf("%d processes registered, want both kept", n)
	}
	// b's beats land again, but not yet for a minute: still no evidence.
	beat := func(since time.Time) {
		t.Helper()
		if ok, err := h.driver().Exec().ProcessHeartbeat(ctx, driver.Beat{ProcessID: b, At: time.Now(), BeatingSince: since}); err != nil || !ok {
			t.Fatalf("heartbeat: %v %v", ok, err)
		}
	}
	beat(time.Now().Add(-30 * time.Second))
	pass(t, h, dispatcher.Config{ProcessDeadAfter: time.Minute})
	if st := h.state(res.ID); st != bq.StateRunning {
		t.Fatalf("b beating for 30s of a 1m bound: the claim is %s, want still running", st)
	}
	// Once b has beaten without a gap for longer than the bound, a's
	// silence is its own.
	beat(time.Now().Add(-2 * time.Minute))
	pass(t, h, dispatcher.Config{ProcessDeadAfter: time.Minute})
	if info := jobInfo(t, h, res.ID); info.State != bq.StateReady || info.Attempts != 1 {
		t.Errorf("with evidence: the claim is %s with %d attempts, want ready with 1", info.State, info.Attempts)
	}
	h.checkSemaphores()
}
