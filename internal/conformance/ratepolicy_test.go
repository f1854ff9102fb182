package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"RatePolicyDefault", testRatePolicyDefault},
	scenario{"RatePolicyDefaultPeriodic", testRatePolicyPeriodic},
)

// ratePolicyJob is rate-keyed but sets no rate of its own: its queue's
// policy (MaxStartsPerKey) gives it.
var ratePolicyJob = bq.Define("c.ratepolicy", behave, bq.JobOptions[Args]{
	Queue: "rp", MaxAttempts: 3, Rate: &bq.Rate[Args]{Key: keyOf}})

// testRatePolicyDefault: jobs with a rate key and no limit of their own
// are refused while their queue's policy sets no rate. With a policy of
// 3 starts per 400ms, three worker processes start them: from the jobs'
// own start records, no 400ms window holds more than 3 starts of a key,
// while a job's own rate and a SetKeyRate override beat the policy.
// Then jobs enqueued under that policy wait while SyncPolicies changes it
// to 2 per 300ms: their starts keep the new rate, which the old would
// break.
func testRatePolicyDefault(t *testing.T, h *harness) {
	ctx := context.Background()
	_, err := ratePolicyJob.Enqueue(ctx, h.client, Args{Test: h.test, Key: "p"})
	if !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), "MaxStartsPerKey") {
		t.Fatalf("enqueue with no rate of its own and no policy: %v, want ErrInvalidJob naming MaxStartsPerKey", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Fatalf("%d jobs stored by the refused enqueue", n)
	}
	policy := bq.Policy{Queue: "rp", MaxStartsPerKey: 3, StartsPeriod: ratePeriod}
	if err := h.client.SyncPolicies(ctx, "ops", []bq.Policy{policy}); err != nil {
		t.Fatal(err)
	}
	if ps, err := h.client.ListPolicies(ctx); err != nil || len(ps) != 1 || ps[0].Policy != policy {
		t.Fatalf("ListPolicies = %+v, %v; want %+v", ps, err, policy)
	}
	if err := h.client.SetKeyRate(ctx, bq.Key(ratePolicyJob.Name(), "ov"), 1, ratePeriod); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range 24 {
		key := []string{"p", "p", "own", "ov"}[i%4]
		var opts []bq.EnqueueOption
		if key == "own" {
			opts = append(opts, bq.WithRateKey(key, 1, ratePeriod))
		}
		enqueue(t, h, ratePolicyJob, Args{Key: key, Seq: i, SleepMS: 5 + rand.IntN(30)}, opts...)
		n++
	}
	if st, err := h.client.RateState(ctx, bq.Key(ratePolicyJob.Name(), "p")); err != nil || st.Limit != 3 || st.Period != ratePeriod {
		t.Errorf("rate state of a policy-rated key: %+v, %v; want the policy's 3 per %s", st, err, ratePeriod)
	}
	stop := spawnQueueWorkers(h, 3, 4, "rp")
	h.waitFinished(n, 90*time.Second)
	stop()
	if runs := len(h.dbRuns(t)); runs != n {
		t.Fatalf("%d runs of %d jobs, want one each", runs, n)
	}
	most := checkRate(t, dbStarts(t, h), map[string]int{"p": 3, "own": 1, "ov": 1}, ratePeriod)
	t.Logf("%s: under the policy, most starts per %s: %v", h.db, ratePeriod, most)

	// Enqueued under the old policy (some ready with slots reserved,
	// the rest in the line), then the policy changes before any starts.
	const period2 = 300 * time.Millisecond
	second := map[int64]bool{}
	for i := range 14 {
		res := enqueue(t, h, ratePolicyJob, Args{Key: "p", Seq: 100 + i, SleepMS: 5 + rand.IntN(30)})
		second[res.ID] = true
		n++
	}
	policy.MaxStartsPerKey, policy.StartsPeriod = 2, period2
	if err := h.client.SyncPolicies(ctx, "ops", []bq.Policy{policy}); err != nil {
		t.Fatal(err)
	}
	stop = spawnQueueWorkers(h, 3, 4, "rp")
	h.waitFinished(n, 90*time.Second)
	stop()
	var later []run
	for _, r := range h.dbRuns(t) {
		if second[r.JobID] {
			later = append(later, r)
		}
	}
	if len(later) != len(second) {
		t.Fatalf("%d runs of the %d jobs enqueued before the change, want one each", len(later), len(second))
	}
	starts := startsOf(later, func(r run) string { return r.Key }, func(r run) time.Time { return r.Start })
	most = checkRate(t, starts, map[string]int{"p": 2}, period2)
	if st, err := h.client.RateState(ctx, bq.Key(ratePolicyJob.Name(), "p")); err != nil || st.Limit != 2 || st.Period != period2 {
		t.Errorf("rate state after the policy change: %+v, %v; want 2 per %s", st, err, period2)
	}
	t.Logf("%s: after the policy change, most starts per %s: %v", h.db, period2, most)

	// A raised policy rate applies at once to a key's waiting jobs: at 1
	// start an hour, four wait; SyncPolicies at 5 an hour starts them now.
	policy.MaxStartsPerKey, policy.StartsPeriod = 1, time.Hour
	if err := h.client.SyncPolicies(ctx, "ops", []bq.Policy{policy}); err != nil {
		t.Fatal(err)
	}
	var slow []int64
	for i := range 5 {
		slow = append(slow, enqueue(t, h, ratePolicyJob, Args{Key: "slow", Seq: 200 + i}).ID)
		n++
	}
	stop = spawnQueueWorkers(h, 1, 4, "rp")
	h.waitFinished(n-4, 30*time.Second)
	if st, err := h.client.RateState(ctx, bq.Key(ratePolicyJob.Name(), "slow")); err != nil || st.Waiting != 4 {
		t.Fatalf("rate state at 1 start an hour: %+v, %v; want 4 waiting", st, err)
	}
	policy.MaxStartsPerKey = 5
	if err := h.client.SyncPolicies(ctx, "ops", []bq.Policy{policy}); err != nil {
		t.Fatal(err)
	}
	h.waitFinished(n, 30*time.Second)
	stop()
	h.checkDrained(slow)
	h.checkSemaphores()
}

// periodicRated is a periodic job kind whose rate is its queue policy's.
var periodicRated = bq.Define("conformance.periodic_rated", func(context.Context, PeriodicArgs) error { return nil },
	bq.JobOptions[PeriodicArgs]{Queue: "periodic_rated", Rate: &bq.Rate[PeriodicArgs]{Key: func(PeriodicArgs) string { return "r" }}})

// testRatePolicyPeriodic: a tick of a periodic job that leaves its rate
// to a queue policy with none is spent, not retried every pass; once the
// policy has a rate, the next tick is enqueued.
func testRatePolicyPeriodic(t *testing.T, h *harness) {
	ctx := context.Background()
	clock := newFakeClock(time.Second)
	c := periodicClient(h, clock, bq.Periodic(bq.Every(time.Second), periodicRated, periodicArgs, bq.PeriodicOptions{RunOnStart: true}))
	periodicPass(t, c)
	ps, err := c.PeriodicJobs(ctx)
	if err != nil || len(ps) != 1 || ps[0].LastRunAt != nil || !ps[0].NextRunAt.After(clock.Now()) {
		t.Fatalf("after the refused tick: %+v, %v; want no run and the next tick ahead", ps, err)
	}
	if n := len(periodicTicks(t, h, periodicRated.Name())); n != 0 {
		t.Fatalf("%d jobs stored with no rate anywhere", n)
	}
	if err := h.client.SyncPolicies(ctx, "ops", []bq.Policy{{Queue: "periodic_rated", MaxStartsPerKey: 1, StartsPeriod: time.Second}}); err != nil {
		t.Fatal(err)
	}
	stepPasses(t, clock, 1, c)
	if ticks := periodicTicks(t, h, periodicRated.Name()); len(ticks) != 1 || !ticks[0].Equal(clock.Now().Truncate(time.Second)) {
		t.Errorf("ticks %v after the policy got a rate: want that tick's job", ticks)
	}
}

// spawnQueueWorkers is spawnWorkers on queue.
func spawnQueueWorkers(h *harness, n, slots int, queue string) (stop func()) {
	h.t.Helper()
	var cmds []*exec.Cmd
	for range n {
		cmds = append(cmds, h.spawn("worker", slots, "BQ_QUEUE="+queue))
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			h.stop(cmds...)
		}
	}
	h.t.Cleanup(stop)
	return stop
}
