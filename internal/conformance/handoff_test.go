package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"HandOffKeepsTheClaimRules", testHandOff},
)

// testHandOff: a finishing run's transaction claims the job it promotes
// for its own process (the hand-off: blocked becomes running with no
// claim of its own), and the claim keeps every rule: the key's limit
// (runs never overlap), priority within the key (the higher priority
// job is handed off, the older lower one waits), and a paused queue
// (nothing starts in it until it resumes).
func testHandOff(t *testing.T, h *harness) {
	ctx := context.Background()
	dir := t.TempDir()
	until := func(name string) string { return filepath.Join(dir, name) }
	release := func(name string) {
		t.Helper()
		if err := os.WriteFile(until(name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := func(name string) Args {
		return Args{Key: "k", Seq: len(name), SleepMS: 60_000, Mode: "poll-ctx", Until: until(name)}
	}
	a := enqueue(t, h, limit1Job, long("a"))
	worker(h, 4) // free slots beside a: room for a hand-off
	h.waitState(a.ID, bq.StateRunning)
	b := enqueue(t, h, limit1Job, long("bb"))
	c := enqueue(t, h, limit1Job, long("ccc"), bq.Priority(5))
	if b.State != bq.StateBlocked || c.State != bq.StateBlocked {
		t.Fatalf("b %s, c %s: want both blocked behind a", b.State, c.State)
	}

	release("a")
	h.waitState(c.ID, bq.StateRunning)
	// Claimed in a's completing transaction: the claim's instant is a's
	// finish, to the microsecond (both are that transaction's clock).
	handed := h.count(fmt.Sprintf(`SELECT count(*) FROM bq_claimed_executions ce JOIN bq_jobs a ON a.id = %d
WHERE ce.job_id = %d AND ce.claimed_at = a.finished_at`, a.ID, c.ID))
	if handed != 1 {
		t.Errorf("c was not claimed in a's completing transaction (no hand-off)")
	}
	if s := h.state(b.ID); s != bq.StateBlocked {
		t.Errorf("b is %s while c runs, want blocked: the higher priority job goes first", s)
	}

	// Paused: c's finish promotes b into its slot, but no hand-off (nor
	// any claim) starts it until the queue resumes.
	if err := h.client.PauseQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	release("ccc")
	h.waitState(c.ID, bq.StateCompleted)
	time.Sleep(500 * time.Millisecond) // a poll and more
	if s := h.state(b.ID); s != bq.StateReady {
		t.Errorf("b is %s after c finished in a paused queue, want ready (promoted, not started)", s)
	}
	if err := h.client.ResumeQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	h.waitState(b.ID, bq.StateRunning)
	release("bb")
	h.waitState(b.ID, bq.StateCompleted)

	for key, n := range maxOverlap(h.recorder().all()) {
		if n > 1 {
			t.Errorf("key %s: %d runs at once, limit 1", key, n)
		}
	}
	h.checkSemaphores()
}
