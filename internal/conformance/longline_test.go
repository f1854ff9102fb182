package conformance

import (
	"context"
	"fmt"
	"testing"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"ExplainLongLine", testExplainLongLine},
)

// testExplainLongLine: Explain counts at most bq.MaxCountedAhead jobs
// ahead of a blocked one, so the last of a long line costs no more than
// the first: a job with exactly that many ahead gets its exact place, one
// further back gets "10,001+".
func testExplainLongLine(t *testing.T, h *harness) {
	ctx := context.Background()
	n := bq.MaxCountedAhead + 3 // one holder, then MaxCountedAhead+2 in line
	args := make([]Args, n)
	for i := range args {
		args[i] = Args{Test: h.test, Key: "long", Seq: i}
	}
	res, err := limit1Job.EnqueueMany(ctx, h.client, args)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].State == bq.StateBlocked || res[n-1].State != bq.StateBlocked {
		t.Fatalf("first job blocked %v, last %v; want the first to hold the key and the rest blocked", res[0].State == bq.StateBlocked, res[n-1].State == bq.StateBlocked)
	}

	exact := explain(t, h, res[n-2].ID) // MaxCountedAhead ahead of it
	if exact.Position != bq.MaxCountedAhead+1 || exact.PositionAtLeast {
		t.Errorf("job with %d ahead: position %d (at least: %v), want exactly %d", bq.MaxCountedAhead, exact.Position, exact.PositionAtLeast, bq.MaxCountedAhead+1)
	}
	wantSummary(t, exact, fmt.Sprintf("%d ahead of it", bq.MaxCountedAhead))
	if got := exact.Place(); got != "10,001" {
		t.Errorf("Place() = %q, want 10,001", got)
	}

	last := explain(t, h, res[n-1].ID) // MaxCountedAhead+1 ahead of it
	if last.Position != bq.MaxCountedAhead+1 || !last.PositionAtLeast {
		t.Errorf("job with %d ahead: position %d (at least: %v), want %d and at least", bq.MaxCountedAhead+1, last.Position, last.PositionAtLeast, bq.MaxCountedAhead+1)
	}
	wantSummary(t, last, "more than 10,000 ahead of it")
	if got := last.Place(); got != "10,001+" {
		t.Errorf("Place() = %q, want 10,001+", got)
	}
}
