package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"BatchCallbacksRunOnceAcrossTheFleet", testBatchCallbacks},
	scenario{"BatchSuccessCallbackCancelledOnFailure", testBatchFailure},
	scenario{"WorkflowRunsInOrderAndRefusesBadGraphs", testWorkflow},
	scenario{"WorkflowTasksReadTheirDependenciesOutputs", testWorkflowOutputs},
)

// outArgs: a task whose output is Add plus the outputs of the tasks From.
type outArgs struct {
	From []string
	Add  int
}

var outputJob = bq.Define("c.output", func(ctx context.Context, a outArgs) error {
	sum := a.Add
	for _, task := range a.From {
		var n int
		if err := bq.DependencyOutput(ctx, task, &n); err != nil {
			return bq.Permanent(err)
		}
		sum += n
	}
	return bq.SetOutput(ctx, sum)
}, bq.JobOptions[outArgs]{Queue: "output"})

// testWorkflowOutputs: in a diamond, each task adds its dependencies'
// outputs to its own number and outputs the sum: D reads B's and C's,
// which read A's. The client reads D's output; a job that stored none
// is ErrNoOutput; SetOutput outside a run is refused.
func testWorkflowOutputs(t *testing.T, h *harness) {
	ctx := context.Background()
	res, err := bq.NewWorkflow("sums").
		Add("a", outputJob.Item(outArgs{Add: 1})).
		Add("b", outputJob.Item(outArgs{From: []string{"a"}, Add: 10}), "a").
		Add("c", outputJob.Item(outArgs{From: []string{"a"}, Add: 100}), "a").
		Add("d", outputJob.Item(outArgs{From: []string{"b", "c"}}), "b", "c").
		Enqueue(ctx, h.client)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Queues = map[string]int{"output": 2}
	h.run(h.clientWith(cfg))
	h.waitState(res.Tasks["d"].ID, bq.StateCompleted)
	var d int
	if err := h.client.JobOutput(ctx, res.Tasks["d"].ID, &d); err != nil || d != 112 {
		t.Errorf("JobOutput(d) = %d, %v; want 112 = (1+10) + (1+100)", d, err)
	}
	plain := enqueue(t, h, unkeyedJob, Args{Seq: 1})
	var v any
	if err := h.client.JobOutput(ctx, plain.ID, &v); !errors.Is(err, bq.ErrNoOutput) {
		t.Errorf("JobOutput of a job that stored none: %v, want ErrNoOutput", err)
	}
	if err := h.client.JobOutput(ctx, 1<<40, &v); !errors.Is(err, bq.ErrJobNotFound) {
		t.Errorf("JobOutput of no job: %v, want ErrJobNotFound", err)
	}
	if err := bq.SetOutput(ctx, 1); err == nil {
		t.Error("SetOutput outside a run: nil error")
	}
}

// testBatchCallbacks: a batch of 300 short jobs finished by three
// worker processes. Its success and finish callbacks each run exactly
// once, after the last run of every job of the batch ended. (300, not
// 1,000: SQLite under -race took 35-190 s for 1,000; with 300 the three
// processes still end jobs side by side, and ListJobs takes four pages.)
func testBatchCallbacks(t *testing.T, h *harness) {
	ctx := context.Background()
	stop := h.spawnWorkers(3, 8)
	defer stop()
	items := make([]bq.Item, 300)
	for i := range items {
		items[i] = unkeyedJob.Item(Args{Test: h.test, Seq: i, SleepMS: rand.IntN(3)})
	}
	res := enqueueCallbacks(t, h, items)
	if res.OnSuccess.State != bq.StateWaiting || res.OnFinish.State != bq.StateWaiting {
		t.Fatalf("callbacks: %+v, %+v; want both waiting", res.OnSuccess, res.OnFinish)
	}
	h.waitFinished(len(items)+2, 3*time.Minute)
	h.waitState(res.OnSuccess.ID, bq.StateCompleted)
	h.waitState(res.OnFinish.ID, bq.StateCompleted)
	var last time.Time
	count := map[int64]int{}
	var cb []run
	for _, r := range h.dbRuns(t) {
		count[r.JobID]++
		if r.JobID == res.OnSuccess.ID || r.JobID == res.OnFinish.ID {
			cb = append(cb, r)
		} else if r.End.After(last) {
			last = r.End
		}
	}
	for _, id := range []int64{res.OnSuccess.ID, res.OnFinish.ID} {
		if count[id] != 1 {
			t.Errorf("callback %d ran %d times, want once", id, count[id])
		}
	}
	for _, r := range cb {
		if !r.Start.After(last) {
			t.Errorf("callback %d started %s before the batch's last job ended", r.JobID, last.Sub(r.Start))
		}
	}
	listed := 0
	for f := (bq.JobFilter{Metadata: map[string]string{bq.MetaBatch: res.ID}, Limit: 100}); ; {
		page, err := h.client.ListJobs(ctx, f)
		if err != nil {
			t.Fatalf("ListJobs of the batch: %v", err)
		}
		listed += len(page.Jobs)
		if f.After = page.Next; f.After == "" {
			break
		}
	}
	if listed != len(items)+2 {
		t.Errorf("ListJobs of the batch lists %d jobs, want %d", listed, len(items)+2)
	}
}

// testBatchFailure: one job of a batch fails for good: the success
// callback is cancelled and never runs; the finish callback runs once.
func testBatchFailure(t *testing.T, h *harness) {
	ctx := context.Background()
	items := []bq.Item{
		unkeyedJob.Item(Args{Test: h.test, Seq: 0, SleepMS: 50}),
		onceJob.Item(Args{Test: h.test, Seq: 1, SleepMS: 50, Mode: "permanent"}),
		unkeyedJob.Item(Args{Test: h.test, Seq: 2, SleepMS: 50}),
	}
	res := enqueueCallbacks(t, h, items)
	worker(h, 4)
	h.waitState(res.OnFinish.ID, bq.StateCompleted)
	h.waitState(res.OnSuccess.ID, bq.StateCancelled)
	ran := map[int]int{}
	for _, r := range h.recorder().all() {
		ran[r.Seq]++
	}
	if ran[-1] != 0 || ran[-2] != 1 {
		t.Errorf("callbacks ran success %d, finish %d times; want 0 and 1", ran[-1], ran[-2])
	}
	if _, err := (&bq.Batch{}).Enqueue(ctx, h.client); !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("an empty batch: %v, want ErrInvalidJob", err)
	}
	if _, err := bq.NewBatch(items...).Enqueue(ctx, h.client); !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("a batch with no callback: %v, want ErrInvalidJob", err)
	}
}

// testWorkflow: a diamond built with NewWorkflow runs each task after
// the ones it comes after; a cycle, a dependency on no task and a name
// used twice are refused with nothing stored; CancelWorkflow cancels
// what has not finished.
func testWorkflow(t *testing.T, h *harness) {
	ctx := context.Background()
	item := func(seq, ms int) bq.Item { return unkeyedJob.Item(Args{Test: h.test, Seq: seq, SleepMS: ms}) }
	before := h.count(`SELECT count(*) FROM bq_jobs`)
	for _, bad := range []struct {
		wf   *bq.Workflow
		want string
	}{
		{bq.NewWorkflow("cycle").Add("a", item(0, 0), "c").Add("b", item(1, 0), "a").Add("c", item(2, 0), "b").Add("d", item(3, 0)), "cycle"},
		{bq.NewWorkflow("unknown").Add("a", item(0, 0)).Add("b", item(1, 0), "nope"), `"nope", which is no task`},
		{bq.NewWorkflow("twice").Add("a", item(0, 0)).Add("a", item(1, 0)), "used twice"},
		{bq.NewWorkflow("self").Add("a", item(0, 0), "a"), "after itself"},
	} {
		_, err := bad.wf.Enqueue(ctx, h.client)
		if !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("enqueue a bad workflow: %v; want ErrInvalidJob saying %q", err, bad.want)
		}
	}
	if after := h.count(`SELECT count(*) FROM bq_jobs`); after != before {
		t.Fatalf("refused workflows stored %d jobs", after-before)
	}
	res, err := bq.NewWorkflow("diamond").
		Add("d", item(3, 20), "b", "c").
		Add("b", item(1, 150), "a").
		Add("c", item(2, 20), "a").
		Add("a", item(0, 100)).
		Enqueue(ctx, h.client)
	if err != nil {
		t.Fatalf("enqueue the diamond: %v", err)
	}
	if res.Tasks["a"].State != bq.StateReady || res.Tasks["d"].State != bq.StateWaiting {
		t.Errorf("tasks a, d = %+v, %+v; want ready and waiting", res.Tasks["a"], res.Tasks["d"])
	}
	worker(h, 4)
	h.waitState(res.Tasks["d"].ID, bq.StateCompleted)
	runs := map[int]run{}
	for _, r := range h.recorder().all() {
		runs[r.Seq] = r
	}
	for _, e := range [][2]int{{0, 1}, {0, 2}, {1, 3}, {2, 3}} {
		if !runs[e[1]].Start.After(runs[e[0]].End) {
			t.Errorf("task %d started before task %d, which it comes after, ended", e[1], e[0])
		}
	}
	page, err := h.client.ListJobs(ctx, bq.JobFilter{Metadata: map[string]string{bq.MetaWorkflow: res.ID}})
	if err != nil || len(page.Jobs) != 4 {
		t.Errorf("ListJobs of the workflow = %d jobs, %v; want 4", len(page.Jobs), err)
	}
	// A second workflow, cancelled while its root runs.
	held, err := bq.NewWorkflow("cancelled").Add("root", item(10, 3000)).Add("next", item(11, 0), "root").
		Add("last", item(12, 0), "next").Enqueue(ctx, h.client)
	if err != nil {
		t.Fatal(err)
	}
	h.waitState(held.Tasks["root"].ID, bq.StateRunning)
	if n, err := h.client.CancelWorkflow(ctx, held.ID); err != nil || n != 3 {
		t.Errorf("CancelWorkflow = %d, %v; want 3", n, err)
	}
	for _, name := range []string{"next", "last"} {
		if st := h.state(held.Tasks[name].ID); st != bq.StateCancelled {
			t.Errorf("task %s is %s after CancelWorkflow, want cancelled", name, st)
		}
	}
	h.waitState(held.Tasks["root"].ID, bq.StateCancelled)
}

// enqueueCallbacks enqueues items as a batch with both callbacks, Seq -1
// on success and -2 on finish.
func enqueueCallbacks(t *testing.T, h *harness, items []bq.Item) *bq.BatchResult {
	t.Helper()
	res, err := bq.NewBatch(items...).
		OnSuccess(unkeyedJob.Item(Args{Test: h.test, Seq: -1})).
		OnFinish(unkeyedJob.Item(Args{Test: h.test, Seq: -2})).
		Enqueue(context.Background(), h.client)
	if err != nil {
		t.Fatalf("enqueue the batch: %v", err)
	}
	return res
}
