package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"MiddlewareOrder", testMiddlewareOrder},
	scenario{"MiddlewareSkipsNext", testMiddlewareSkipsNext},
	scenario{"MiddlewarePanicKeepsSlot", testMiddlewarePanicKeepsSlot},
	scenario{"HookAddsMetadata", testHookAddsMetadata},
	scenario{"HookRefuses", testHookRefuses},
	scenario{"HookPanics", testHookPanics},
	scenario{"ErrorHandlerHookOnFailure", testErrorHandlerOnFailure},
	scenario{"ErrorHandlerHookOnPanic", testErrorHandlerOnPanic},
	scenario{"ErrorHandlerHookPermanent", testErrorHandlerPermanent},
	scenario{"ErrorHandlerHookSnooze", testErrorHandlerSnooze},
	scenario{"ErrorHandlerHookPanics", testErrorHandlerPanics},
	scenario{"ErrorHandlerHookNotToldOfSnoozeOrCancel", testErrorHandlerNotToldOfSnoozeOrCancel},
)

// testErrorHandlerNotToldOfSnoozeOrCancel: a job that snoozes or cancels
// itself asked for what happens next; it did not fail, so the handler
// hears of neither, while a failure beside them is told.
func testErrorHandlerNotToldOfSnoozeOrCancel(t *testing.T, h *harness) {
	l := mwLogOf(h.test)
	snoozed := enqueue(t, h, mwJob, Args{Key: "ns", Mode: "snooze-first"}, mwMeta(h, ""))
	cancelled := enqueue(t, h, mwJob, Args{Key: "nc", Mode: "cancel"}, mwMeta(h, ""))
	failed := enqueue(t, h, mwJob, Args{Key: "nf", Mode: "fail-first"}, mwMeta(h, ""))
	handlerWorker(h, &recordingHandler{log: l})
	h.waitState(snoozed.ID, bq.StateCompleted)
	h.waitState(cancelled.ID, bq.StateCancelled)
	h.waitState(failed.ID, bq.StateCompleted)
	var calls []string
	for _, e := range l.all() {
		if strings.HasPrefix(e, "error ") || strings.HasPrefix(e, "panic ") {
			calls = append(calls, e)
		}
	}
	want := []string{fmt.Sprintf("error job=%d attempt=1 err=mw job failed ctx=true", failed.ID)}
	if !slices.Equal(calls, want) {
		t.Errorf("handler calls %q, want only %q", calls, want)
	}
}

// mwLog is what one test's middleware, hooks, handler and jobs saw. The
// job kinds are the process's, so everything routes by the test id the
// job carries as metadata "t".
type mwLog struct {
	mu     sync.Mutex
	events []string
	metas  map[int64][]bq.JobMeta // JobFromContext of each run, by job id
	runs   map[int64]int
}

var mwLogs sync.Map // test id -> *mwLog

func mwLogOf(test string) *mwLog {
	l, _ := mwLogs.LoadOrStore(test, &mwLog{metas: map[int64][]bq.JobMeta{}, runs: map[int64]int{}})
	return l.(*mwLog)
}

func (l *mwLog) add(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf(format, a...))
}

func (l *mwLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func (l *mwLog) metasOf(id int64) []bq.JobMeta {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.metas[id])
}

// mwMeta tags a job with its test, and with a mode for the middleware.
func mwMeta(h *harness, mode string) bq.EnqueueOption {
	return bq.WithMetadata(map[string]string{"t": h.test, "mw": mode})
}

// defMiddleware is mwJob's own middleware: by the job's metadata "mw"
// it skips next, panics on the first attempt, or logs around next.
func defMiddleware(ctx context.Context, job bq.JobMeta, next func(context.Context) error) error {
	l := mwLogOf(job.Metadata["t"])
	switch job.Metadata["mw"] {
	case "skip":
		l.add("def skips")
		return nil
	case "panic-first":
		if job.Attempt == 1 {
			panic("middleware boom")
		}
	}
	l.add("def> attempt=%d key=%s t=%v", job.Attempt, job.Key, job.Metadata["t"] != "")
	err := next(ctx)
	l.add("<def")
	return err
}

// globalMiddleware is the worker client's, logging around next.
func globalMiddleware(ctx context.Context, job bq.JobMeta, next func(context.Context) error) error {
	l := mwLogOf(job.Metadata["t"])
	l.add("global> attempt=%d key=%s", job.Attempt, job.Key)
	err := next(ctx)
	l.add("<global err=%v", err != nil)
	return err
}

// panicInJob panics for the error handler to find in the stack.
func panicInJob() { panic("job boom") }

// mwRun is the job of the kinds below. Modes: "fail-first" fails
// attempt 1, "fail" every attempt, "panic-first" panics on attempt 1,
// "fail-first-run" fails its first run whatever the attempt,
// "snooze-first" snoozes its first run, "cancel" cancels itself.
func mwRun(ctx context.Context, a Args) error {
	meta, _ := bq.JobFromContext(ctx)
	l := mwLogOf(meta.Metadata["t"])
	l.mu.Lock()
	l.metas[meta.ID] = append(l.metas[meta.ID], meta)
	l.runs[meta.ID]++
	runs := l.runs[meta.ID]
	l.mu.Unlock()
	l.add("job %d", a.Seq)
	if a.SleepMS > 0 {
		time.Sleep(time.Duration(a.SleepMS) * time.Millisecond)
	}
	switch {
	case a.Mode == "fail", a.Mode == "fail-first" && meta.Attempt == 1, a.Mode == "fail-first-run" && runs == 1:
		return errors.New("mw job failed")
	case a.Mode == "panic-first" && meta.Attempt == 1:
		panicInJob()
	case a.Mode == "snooze-first" && runs == 1:
		return bq.Snooze(50 * time.Millisecond)
	case a.Mode == "cancel":
		return bq.Cancel(errors.New("nothing left to do"))
	}
	return nil
}

var (
	mwJob = bq.Define("c.mw", mwRun, bq.JobOptions[Args]{
		MaxAttempts: 3, Backoff: func(int) time.Duration { return 0 },
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1},
		Middleware:  []bq.WorkerMiddleware{defMiddleware}})
	// hookJob's own hook runs after the client's: it copies the tenant
	// the client's hook set, to pin the order.
	hookJob = bq.Define("c.hook", mwRun, bq.JobOptions[Args]{
		Tags: []string{"def-tag"},
		EnqueueHooks: []bq.EnqueueHook{func(_ context.Context, p *bq.PendingJob) error {
			if t, ok := p.Metadata["tenant"]; ok {
				p.Metadata["def-saw"] = t
			}
			return nil
		}}})
)

// mwWorker runs the default queue with cfg's hooks and handler added to
// the test config.
func mwWorker(h *harness, slots int, change func(*bq.Config)) {
	cfg := testConfig()
	cfg.Queues = map[string]int{"default": slots}
	change(&cfg)
	h.run(h.clientWith(cfg))
}

// testMiddlewareOrder: the global middleware wraps the definition's,
// which wraps the job; each sees the attempt, the full key and the
// metadata, on every attempt.
func testMiddlewareOrder(t *testing.T, h *harness) {
	res := enqueue(t, h, mwJob, Args{Key: "o", Mode: "fail-first"}, mwMeta(h, ""))
	mwWorker(h, 2, func(c *bq.Config) { c.WorkerMiddleware = []bq.WorkerMiddleware{globalMiddleware} })
	h.waitState(res.ID, bq.StateCompleted)
	want := []string{
		"global> attempt=1 key=c.mw/o", "def> attempt=1 key=c.mw/o t=true", "job 0", "<def", "<global err=true",
		"global> attempt=2 key=c.mw/o", "def> attempt=2 key=c.mw/o t=true", "job 0", "<def", "<global err=false",
	}
	if got := mwLogOf(h.test).all(); !slices.Equal(got, want) {
		t.Errorf("middleware ran as\n%q\nwant\n%q", got, want)
	}
	h.checkSemaphores()
}

// testMiddlewareSkipsNext: a middleware returning nil without calling
// next completes the job without running it.
func testMiddlewareSkipsNext(t *testing.T, h *harness) {
	res := enqueue(t, h, mwJob, Args{Key: "s"}, mwMeta(h, "skip"))
	mwWorker(h, 1, func(c *bq.Config) { c.WorkerMiddleware = []bq.WorkerMiddleware{globalMiddleware} })
	h.waitState(res.ID, bq.StateCompleted)
	want := []string{"global> attempt=1 key=c.mw/s", "def skips", "<global err=false"}
	if got := mwLogOf(h.test).all(); !slices.Equal(got, want) {
		t.Errorf("middleware ran as %q, want %q: the job must not run", got, want)
	}
	if info := jobInfo(t, h, res.ID); info.Attempts != 1 {
		t.Errorf("attempts %d, want 1", info.Attempts)
	}
	h.checkSemaphores()
}

// testMiddlewarePanicKeepsSlot: a middleware that panics fails the
// attempt with the panic; the slot of the To=1 key is released, the
// blocked job behind runs, the job is retried, and the semaphore agrees.
func testMiddlewarePanicKeepsSlot(t *testing.T, h *harness) {
	first := enqueue(t, h, mwJob, Args{Key: "p", Seq: 1}, mwMeta(h, "panic-first"))
	next := enqueue(t, h, mwJob, Args{Key: "p", Seq: 2}, mwMeta(h, ""))
	if next.State != bq.StateBlocked {
		t.Fatalf("second job of key p is %s, want blocked", next.State)
	}
	mwWorker(h, 2, func(*bq.Config) {})
	h.waitState(next.ID, bq.StateCompleted)
	h.waitState(first.ID, bq.StateCompleted)
	info := jobInfo(t, h, first.ID)
	if info.Attempts != 2 {
		t.Errorf("the panicking job's attempts: %d, want 2 (the panic, then the run)", info.Attempts)
	}
	l := mwLogOf(h.test)
	if len(l.metasOf(first.ID)) != 1 || len(l.metasOf(next.ID)) != 1 {
		t.Errorf("runs of the job functions: %d and %d, want 1 each (the panic was before next)",
			len(l.metasOf(first.ID)), len(l.metasOf(next.ID)))
	}
	h.checkSemaphores()
}

// testHookAddsMetadata: the client's hook, then the definition's, add
// metadata and tags on every enqueue path; the job is stored and run
// with them.
func testHookAddsMetadata(t *testing.T, h *harness) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.Queues = map[string]int{"default": 4}
	cfg.EnqueueHooks = []bq.EnqueueHook{func(_ context.Context, p *bq.PendingJob) error {
		var a Args
		if err := json.Unmarshal(p.Args(), &a); err != nil {
			return err
		}
		p.Metadata["tenant"] = fmt.Sprintf("acme-%d", a.Seq)
		p.Metadata["kind"] = p.Kind() + "@" + p.Queue()
		p.Tags = append(p.Tags, "hooked")
		return nil
	}}
	c := h.clientWith(cfg)
	md := bq.WithMetadata(map[string]string{"t": h.test})
	var ids []int64
	one, err := hookJob.Enqueue(ctx, c, Args{Test: h.test, Seq: 1}, md)
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, one.ID)
	many, err := hookJob.EnqueueMany(ctx, c, []Args{{Test: h.test, Seq: 2}, {Test: h.test, Seq: 3}}, md)
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, many[0].ID, many[1].ID)
	batch, err := c.EnqueueBatch(ctx, []bq.Item{hookJob.Item(Args{Test: h.test, Seq: 4}, md)})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, batch[0].ID)
	tx, commit := h.beginTxOn(ctx, c)
	inTx, err := hookJob.EnqueueTx(ctx, c, tx, Args{Test: h.test, Seq: 5}, md)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, inTx.ID)

	h.run(c)
	for i, id := range ids {
		seq := i + 1
		h.waitState(id, bq.StateCompleted)
		want := map[string]string{"t": h.test, "tenant": fmt.Sprintf("acme-%d", seq), "def-saw": fmt.Sprintf("acme-%d", seq), "kind": "c.hook@default"}
		info := jobInfo(t, h, id)
		if !mapsEqual(info.Metadata, want) || !slices.Equal(info.Tags, []string{"def-tag", "hooked"}) {
			t.Errorf("job %d (seq %d) stored metadata %v tags %q, want %v and [def-tag hooked]", id, seq, info.Metadata, info.Tags, want)
		}
		metas := mwLogOf(h.test).metasOf(id)
		if len(metas) != 1 || !mapsEqual(metas[0].Metadata, want) || !slices.Equal(metas[0].Tags, []string{"def-tag", "hooked"}) {
			t.Errorf("job %d (seq %d) ran with %+v, want metadata %v", id, seq, metas, want)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

var errTenantMissing = errors.New("no tenant")

// testHookRefuses: a hook's error refuses the whole call and stores
// nothing; so does a hook's invalid tag, naming the hook.
func testHookRefuses(t *testing.T, h *harness) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.EnqueueHooks = []bq.EnqueueHook{
		func(_ context.Context, p *bq.PendingJob) error {
			var a Args
			_ = json.Unmarshal(p.Args(), &a)
			if a.Seq == 2 {
				return errTenantMissing
			}
			return nil
		},
		func(_ context.Context, p *bq.PendingJob) error {
			if strings.HasSuffix(p.Key(), "/bad") {
				p.Tags = append(p.Tags, "not a tag")
			}
			return nil
		},
	}
	c := h.clientWith(cfg)
	_, err := unkeyedJob.EnqueueMany(ctx, c, []Args{{Seq: 1}, {Seq: 2}, {Seq: 3}})
	if !errors.Is(err, errTenantMissing) || !strings.Contains(err.Error(), "Config.EnqueueHooks[0]") || !strings.Contains(err.Error(), "args[1]") {
		t.Errorf("EnqueueMany with a refusing hook: %v, want errTenantMissing naming Config.EnqueueHooks[0] and args[1]", err)
	}
	_, err = limit1Job.Enqueue(ctx, c, Args{Key: "bad"})
	if !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), "Config.EnqueueHooks[1]") || !strings.Contains(err.Error(), "not a tag") {
		t.Errorf("enqueue whose hook adds a bad tag: %v, want ErrInvalidJob naming Config.EnqueueHooks[1] and the tag", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored, want none", n)
	}
	h.checkSemaphores()
}

// testHookPanics: a panicking hook refuses the enqueue with an error,
// stores nothing, and leaves the client working.
func testHookPanics(t *testing.T, h *harness) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.EnqueueHooks = []bq.EnqueueHook{func(_ context.Context, p *bq.PendingJob) error {
		if strings.HasSuffix(p.Key(), "/boom") {
			panic("hook boom")
		}
		return nil
	}}
	c := h.clientWith(cfg)
	_, err := c.EnqueueBatch(ctx, []bq.Item{limit1Job.Item(Args{Key: "fine"}), limit1Job.Item(Args{Key: "boom"})})
	if err == nil || !strings.Contains(err.Error(), "panicked: hook boom") || !strings.Contains(err.Error(), "items[1]") {
		t.Errorf("batch with a panicking hook: %v, want an error naming the panic and items[1]", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored, want none", n)
	}
	if res, err := limit1Job.Enqueue(ctx, c, Args{Key: "fine"}); err != nil || res.State != bq.StateReady {
		t.Errorf("enqueue after the panic: %+v %v, want ready", res, err)
	}
	h.checkSemaphores()
}

// recordingHandler is an ErrorHandler logging each call and answering
// with act.
type recordingHandler struct {
	log *mwLog
	act bq.ErrorAction
	// panics makes every call panic.
	panics bool
}

func (r *recordingHandler) HandleError(ctx context.Context, job bq.JobMeta, err error) bq.ErrorAction {
	if r.panics {
		panic("handler boom")
	}
	_, inCtx := bq.JobFromContext(ctx)
	r.log.add("error job=%d attempt=%d err=%v ctx=%v", job.ID, job.Attempt, err, inCtx)
	return r.act
}

func (r *recordingHandler) HandlePanic(_ context.Context, job bq.JobMeta, v any, stack string) bq.ErrorAction {
	r.log.add("panic job=%d attempt=%d value=%v stack-has-panicInJob=%v", job.ID, job.Attempt, v, strings.Contains(stack, "conformance.panicInJob"))
	return r.act
}

func handlerWorker(h *harness, eh *recordingHandler) {
	mwWorker(h, 2, func(c *bq.Config) { c.ErrorHandler = eh })
}

// testErrorHandlerOnFailure: the handler sees the failed attempt, with
// the job in its context; the zero action leaves the retry alone.
func testErrorHandlerOnFailure(t *testing.T, h *harness) {
	l := mwLogOf(h.test)
	res := enqueue(t, h, mwJob, Args{Key: "f", Mode: "fail-first"}, mwMeta(h, ""))
	handlerWorker(h, &recordingHandler{log: l})
	h.waitState(res.ID, bq.StateCompleted)
	var calls []string
	for _, e := range l.all() {
		if !strings.HasPrefix(e, "job ") && !strings.HasPrefix(e, "def") && e != "<def" {
			calls = append(calls, e)
		}
	}
	want := []string{fmt.Sprintf("error job=%d attempt=1 err=mw job failed ctx=true", res.ID)}
	if !slices.Equal(calls, want) {
		t.Errorf("handler calls %q, want %q", calls, want)
	}
	if info := jobInfo(t, h, res.ID); info.Attempts != 2 {
		t.Errorf("attempts %d, want 2", info.Attempts)
	}
}

// testErrorHandlerOnPanic: a panic reaches HandlePanic with its value
// and a stack naming the panicking function.
func testErrorHandlerOnPanic(t *testing.T, h *harness) {
	l := mwLogOf(h.test)
	res := enqueue(t, h, mwJob, Args{Key: "pp", Mode: "panic-first"}, mwMeta(h, ""))
	handlerWorker(h, &recordingHandler{log: l})
	h.waitState(res.ID, bq.StateCompleted)
	want := fmt.Sprintf("panic job=%d attempt=1 value=job boom stack-has-panicInJob=true", res.ID)
	if !slices.Contains(l.all(), want) {
		t.Errorf("log %q, want it to hold %q", l.all(), want)
	}
	h.checkSemaphores()
}

// testErrorHandlerPermanent: an action Permanent fails the job at its
// first failed attempt, though it has attempts left.
func testErrorHandlerPermanent(t *testing.T, h *harness) {
	res := enqueue(t, h, mwJob, Args{Key: "pm", Mode: "fail"}, mwMeta(h, ""))
	handlerWorker(h, &recordingHandler{log: mwLogOf(h.test), act: bq.ErrorAction{Permanent: true}})
	h.waitState(res.ID, bq.StateFailed)
	if info := jobInfo(t, h, res.ID); info.Attempts != 1 || !strings.Contains(info.LastError, "mw job failed") {
		t.Errorf("attempts %d, last error %q, want 1 and the job's error", info.Attempts, info.LastError)
	}
	h.checkSemaphores()
}

// testErrorHandlerSnooze: an action Snooze snoozes the failed run: its
// attempt is not spent, and it runs again after the delay.
func testErrorHandlerSnooze(t *testing.T, h *harness) {
	l := mwLogOf(h.test)
	res := enqueue(t, h, mwJob, Args{Key: "sn", Mode: "fail-first-run"}, mwMeta(h, ""))
	handlerWorker(h, &recordingHandler{log: l, act: bq.ErrorAction{Snooze: 300 * time.Millisecond}})
	h.waitState(res.ID, bq.StateCompleted)
	metas := l.metasOf(res.ID)
	if len(metas) != 2 || metas[0].Attempt != 1 || metas[1].Attempt != 1 {
		t.Errorf("runs %+v, want two, both attempt 1 (a snooze spends none)", metas)
	}
	if info := jobInfo(t, h, res.ID); info.Attempts != 1 || info.LastError != "" {
		t.Errorf("attempts %d, last error %q, want 1 and none", info.Attempts, info.LastError)
	}
	h.checkSemaphores()
}

// testErrorHandlerPanics: a panicking handler leaves the attempt's own
// error: the job is retried, then fails with it.
func testErrorHandlerPanics(t *testing.T, h *harness) {
	res := enqueue(t, h, mwJob, Args{Key: "hp", Mode: "fail"}, mwMeta(h, ""))
	handlerWorker(h, &recordingHandler{log: mwLogOf(h.test), panics: true})
	h.waitState(res.ID, bq.StateFailed)
	if info := jobInfo(t, h, res.ID); info.Attempts != 3 || !strings.Contains(info.LastError, "mw job failed") {
		t.Errorf("attempts %d, last error %q, want 3 (all of them) and the job's error", info.Attempts, info.LastError)
	}
	h.checkSemaphores()
}
