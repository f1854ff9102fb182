package conformance

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/bqueue/bq"
)

var _ = register(scenario{"JobMetaNamesEveryKey", testJobMetaKeys})

// metaSeen holds the JobMeta each run of metaJob saw, by test.
var metaSeen sync.Map // test id -> bq.JobMeta

var metaJob = bq.Define("c.mk.meta", func(ctx context.Context, a Args) error {
	m, _ := bq.JobFromContext(ctx)
	metaSeen.Store(a.Test, m)
	return nil
}, bq.JobOptions[Args]{Concurrency: &mkTenant, MoreConcurrency: []bq.Concurrency[Args]{mkAPI},
	Rate: &bq.Rate[Args]{Key: func(Args) string { return "all" }, Limit: 5, Period: ratePeriod}})

// testJobMetaKeys: a run's JobMeta names all its job's concurrency keys,
// Concurrency's first, and its rate key, as full keys.
func testJobMetaKeys(t *testing.T, h *harness) {
	res := enqueue(t, h, metaJob, Args{Key: "t1,a1"})
	worker(h, 1)
	h.waitState(res.ID, bq.StateCompleted)
	v, ok := metaSeen.Load(h.test)
	if !ok {
		t.Fatal("the job did not run")
	}
	m := v.(bq.JobMeta)
	if want := []string{"mk.tenant/t1", "mk.api/a1"}; m.Key != want[0] || !slices.Equal(m.Keys, want) {
		t.Errorf("JobMeta Key %q, Keys %q; want %q first of %q", m.Key, m.Keys, want[0], want)
	}
	if m.RateKey != "c.mk.meta/all" {
		t.Errorf("JobMeta RateKey %q, want the job's full rate key", m.RateKey)
	}
}
