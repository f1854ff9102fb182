package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

var _ = register(
	scenario{"CompletionBatchAcrossKeys", testCompletionBatchAcrossKeys},
	scenario{"BatchMixedItems", testBatchMixedItems},
	scenario{"BatchPriorityTakesSlotsFirst", testBatchPriorityTakesSlotsFirst},
	scenario{"BatchLarge", testBatchLarge},
	scenario{"BatchManyTxOverlappingKeys", testBatchManyTxOverlappingKeys},
	scenario{"BatchTxWakesEachQueueAtCommit", testBatchTxWakesEachQueue},
	scenario{"BatchItemsUniqueAndMetadata", testBatchItemsUniqueAndMetadata},
)

// testCompletionBatchAcrossKeys ends one batch of claims over several keys
// in one transaction, as the completer does under load: each key releases
// as many slots as it finished and promotes that many blocked jobs,
// highest priority first and FIFO among equals, also when other keys of
// the batch promote more; a key with nothing
// blocked only frees its slot; a stale claim (wrong fence) ends nothing
// and releases nothing.
func testCompletionBatchAcrossKeys(t *testing.T, h *harness) {
	ctx := context.Background()
	enqueue(t, h, limit2Job, Args{Key: "ba"})
	enqueue(t, h, limit2Job, Args{Key: "ba"})
	low := enqueue(t, h, limit2Job, Args{Key: "ba"}).ID
	high1 := enqueue(t, h, limit2Job, Args{Key: "ba"}, bq.Priority(5)).ID
	high2 := enqueue(t, h, limit2Job, Args{Key: "ba"}, bq.Priority(5)).ID
	enqueue(t, h, limit1Job, Args{Key: "bb"})
	enqueue(t, h, limit2Job, Args{Key: "bc"})
	enqueue(t, h, limit2Job, Args{Key: "bc"})
	bcLow := enqueue(t, h, limit2Job, Args{Key: "bc"}).ID
	bcHigh := enqueue(t, h, limit2Job, Args{Key: "bc"}, bq.Priority(3)).ID

	claims, err := lifecycle.Claim(ctx, h.driver(), driver.ClaimParams{
		Queue: "default", Max: 10, ProcessID: registerProcess(t, h, time.Now()), Now: time.Now(),
	})
	if err != nil || len(claims) != 5 {
		t.Fatalf("claim: %d claims, %v; want the 5 ready jobs", len(claims), err)
	}
	byKey := map[string][]*driver.Claim{}
	for _, c := range claims {
		byKey[c.Limit.Key] = append(byKey[c.Limit.Key], c)
	}
	// Keys by their jobs: ba's come first, bc's last.
	var ba, bb, bc []*driver.Claim
	for _, cs := range byKey {
		switch {
		case len(cs) == 1:
			bb = cs
		case cs[0].ID < low:
			ba = cs
		default:
			bc = cs
		}
	}
	if len(ba) != 2 || len(bb) != 1 || len(bc) != 2 {
		t.Fatalf("claims by key: %d, %d, %d; want 2, 1, 2", len(ba), len(bb), len(bc))
	}
	stale := *bc[1]
	stale.Fence += 1000
	batch := []*driver.Claim{ba[0], bb[0], bc[0], ba[1], &stale}

	var results []lifecycle.Result
	err = driver.InTx(ctx, h.driver(), func(ex driver.Executor) (err error) {
		results, err = lifecycle.CompleteMany(ctx, ex, batch, true, false, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, true, true, false} {
		if results[i].Matched != want {
			t.Errorf("claim %d of the batch: matched %v, want %v", i, results[i].Matched, want)
		}
	}
	promoted := map[string]int{}
	for i, r := range results {
		promoted[batch[i].Limit.Key] += r.Promoted.Jobs
	}
	if promoted[ba[0].Limit.Key] != 2 || promoted[bb[0].Limit.Key] != 0 || promoted[bc[0].Limit.Key] != 1 {
		t.Errorf("promoted per key %v; want ba 2, bb 0, bc 1", promoted)
	}
	for id, want := range map[int64]bq.JobState{
		high1: bq.StateReady, high2: bq.StateReady, low: bq.StateBlocked,
		bcHigh: bq.StateReady, bcLow: bq.StateBlocked, bc[1].ID: bq.StateRunning,
		ba[0].ID: bq.StateCompleted, bb[0].ID: bq.StateCompleted, bc[0].ID: bq.StateCompleted,
	} {
		if got := h.state(id); got != want {
			t.Errorf("job %d is %s, want %s", id, got, want)
		}
	}
	h.checkSemaphores()
}
