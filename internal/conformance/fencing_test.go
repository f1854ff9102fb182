package conformance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"FencingTokenRefusesAStaleWriter", testFencingToken},
)

var fencedJob = bq.Define("c.fenced", behave, bq.JobOptions[Args]{MaxAttempts: 3})

// testFencingToken: a run whose process is paused past its lease, then
// resumed, writes to another system with its JobMeta.Token before it
// looks at its context; the run that replaced it meanwhile (the job
// reaped, claimed again in another process) wrote with its own token
// first. The downstream, keeping the largest token it accepted, refuses
// the stale write and keeps the replacement's.
func testFencingToken(t *testing.T, h *harness) {
	ctx := context.Background()
	if _, err := h.raw.ExecContext(ctx, rebind(h.db, `INSERT INTO test_downstream (rkey, token, writer) VALUES (?, 0, 0)`), h.test); err != nil {
		t.Fatal(err)
	}
	w1 := h.spawn("workers", 1, chaosEnv()...)
	job := enqueue(t, h, fencedJob, Args{Mode: "fenced-write", SleepMS: 60_000})
	h.waitState(job.ID, bq.StateRunning)
	w2 := h.spawn("worker", 1, chaosEnv()...)
	stop := h.fleet(w1, w2)
	defer stop()
	h.waitProcesses(2)
	w := window{pid: w1.Process.Pid, stop: h.pause(w1)}
	// The job is reaped from the paused process and completed by W2's
	// run, which wrote first; only then does W1 resume.
	h.eventually(30*time.Second, "the replacement run to complete the job", func() bool {
		return h.state(job.ID) == bq.StateCompleted
	})
	w.cont = h.resume(w1)
	h.eventually(30*time.Second, "the stale run to end", func() bool {
		return h.count(`SELECT count(*) FROM test_runs WHERE ended_ns = 0`) == 0
	})
	stop()

	var stale, fresh int
	var staleToken int64
	for _, r := range h.outcomeRuns(t) {
		switch {
		case r.JobID != job.ID:
		case r.PID == w.pid:
			stale++
			_, after, ok := strings.Cut(r.Outcome, "downstream refused the write of token ")
			if _, err := fmt.Sscanf(after, "%d", &staleToken); !ok || err != nil {
				t.Errorf("the resumed run's write ended %q, want it refused by its stale token", r.Outcome)
			}
		default:
			fresh++
			if r.Outcome != "ok" {
				t.Errorf("the replacement's write ended %q, want ok", r.Outcome)
			}
		}
	}
	if stale != 1 || fresh != 1 {
		t.Fatalf("%d runs in the paused process and %d elsewhere, want 1 and 1", stale, fresh)
	}
	// The replacement's token is larger: a downstream refuses the stale
	// run's write whichever of the two comes first.
	if token := h.count(`SELECT token FROM test_downstream WHERE rkey = '` + h.test + `'`); int64(token) <= staleToken {
		t.Errorf("the replacement's token %d is not above the stale run's %d", token, staleToken)
	}
	if writer := h.count(rebind(h.db, `SELECT writer FROM test_downstream WHERE rkey = '`+h.test+`'`)); writer != 2 {
		t.Errorf("the downstream holds the write of attempt %d, want attempt 2's (the replacement's)", writer)
	}
	h.checkDrained([]int64{job.ID})
}
