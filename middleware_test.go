package bq

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/worker"
)

// chainClient is a client with only what runChain and handleError use.
func chainClient(cfg Config) (*Client, *bytes.Buffer) {
	buf := &bytes.Buffer{}
	return &Client{cfg: cfg, log: slog.New(slog.NewTextHandler(buf, nil))}, buf
}

// logging is a middleware appending name> and <name around next.
func logging(trace *[]string, name string) WorkerMiddleware {
	return func(ctx context.Context, job JobMeta, next func(context.Context) error) error {
		*trace = append(*trace, name+">")
		err := next(ctx)
		*trace = append(*trace, "<"+name)
		return err
	}
}

// TestChainOrder: the global middleware, in order, wraps the
// definition's, which wraps the job; a value a middleware puts in ctx
// reaches the job.
func TestChainOrder(t *testing.T) {
	var trace []string
	type k struct{}
	def := &Job[int]{name: "unit.order", fn: func(ctx context.Context, n int) error {
		trace = append(trace, "job:"+ctx.Value(k{}).(string))
		return nil
	}, opts: JobOptions[int]{Middleware: []WorkerMiddleware{logging(&trace, "d0"), func(ctx context.Context, job JobMeta, next func(context.Context) error) error {
		return next(context.WithValue(ctx, k{}, "from d1"))
	}}}}
	c, _ := chainClient(Config{WorkerMiddleware: []WorkerMiddleware{logging(&trace, "g0"), logging(&trace, "g1")}})
	if err := c.runChain(context.Background(), JobMeta{Kind: def.name}, def, []byte("1")); err != nil {
		t.Fatal(err)
	}
	want := "g0> g1> d0> job:from d1 <d0 <g1 <g0"
	if got := strings.Join(trace, " "); got != want {
		t.Errorf("chain ran %q, want %q", got, want)
	}
}

// TestChainSkipWarnsOncePerKind: a middleware returning nil without next
// completes without running the job, and is logged once per kind, by
// its index.
func TestChainSkipWarnsOncePerKind(t *testing.T) {
	ran := 0
	skip := func(context.Context, JobMeta, func(context.Context) error) error { return nil }
	mk := func(name string) *Job[int] {
		return &Job[int]{name: name, fn: func(context.Context, int) error { ran++; return nil },
			opts: JobOptions[int]{Middleware: []WorkerMiddleware{skip}}}
	}
	c, buf := chainClient(Config{WorkerMiddleware: []WorkerMiddleware{func(ctx context.Context, job JobMeta, next func(context.Context) error) error {
		return next(ctx)
	}}})
	a, b := mk("unit.skip.a"), mk("unit.skip.b")
	for _, def := range []*Job[int]{a, a, b} {
		if err := c.runChain(context.Background(), JobMeta{Kind: def.name}, def, []byte("1")); err != nil {
			t.Fatal(err)
		}
	}
	if ran != 0 {
		t.Errorf("the job ran %d times past a middleware that skips next", ran)
	}
	log := buf.String()
	if n := strings.Count(log, "without calling next"); n != 2 {
		t.Errorf("%d warnings, want 2 (one per kind):\n%s", n, log)
	}
	if !strings.Contains(log, "middleware=JobOptions.Middleware[0]") || !strings.Contains(log, "kind=unit.skip.b") {
		t.Errorf("the warning does not name the middleware and kind:\n%s", log)
	}
}

func panicInMiddleware() { panic("mw boom") }

// TestChainPanicIsAnError: a panic in a middleware is the run's error,
// with its value and a stack naming the panicking function.
func TestChainPanicIsAnError(t *testing.T) {
	def := &Job[int]{name: "unit.panic", fn: func(context.Context, int) error { return nil }}
	c, _ := chainClient(Config{WorkerMiddleware: []WorkerMiddleware{func(context.Context, JobMeta, func(context.Context) error) error {
		panicInMiddleware()
		return nil
	}}})
	err := c.runChain(context.Background(), JobMeta{Kind: def.name}, def, []byte("1"))
	var p *panicError
	if !errors.As(err, &p) || p.value != "mw boom" || !strings.Contains(p.stack, "panicInMiddleware") ||
		!strings.HasPrefix(err.Error(), "panic: mw boom\n") {
		t.Fatalf("runChain = %v, want a panicError with the value and a stack naming panicInMiddleware", err)
	}
}

// handler answers with act, or panics, recording what it was told.
type handler struct {
	act    ErrorAction
	panics bool
	calls  []string
}

func (h *handler) HandleError(_ context.Context, job JobMeta, err error) ErrorAction {
	if h.panics {
		panic("handler boom")
	}
	h.calls = append(h.calls, "error:"+err.Error())
	return h.act
}

func (h *handler) HandlePanic(_ context.Context, job JobMeta, v any, stack string) ErrorAction {
	h.calls = append(h.calls, "panic:"+v.(string))
	return h.act
}

// TestHandleErrorActions: the handler's action becomes the recorded
// error; a panicking handler keeps the attempt's own.
func TestHandleErrorActions(t *testing.T) {
	failed := errors.New("failed")
	for _, tc := range []struct {
		name      string
		h         *handler
		err       error
		permanent bool
		snooze    time.Duration
		call      string
	}{
		{"zero action", &handler{}, failed, false, 0, "error:failed"},
		{"permanent", &handler{act: ErrorAction{Permanent: true}}, failed, true, 0, "error:failed"},
		{"snooze", &handler{act: ErrorAction{Snooze: time.Minute}}, failed, false, time.Minute, "error:failed"},
		{"permanent wins", &handler{act: ErrorAction{Permanent: true, Snooze: time.Minute}}, failed, true, 0, "error:failed"},
		{"negative snooze ignored", &handler{act: ErrorAction{Snooze: -time.Minute}}, failed, false, 0, "error:failed"},
		{"panic", &handler{}, &panicError{value: "boom", stack: "s"}, false, 0, "panic:boom"},
		{"handler panics", &handler{panics: true, act: ErrorAction{Permanent: true}}, failed, false, 0, ""},
	} {
		c, _ := chainClient(Config{ErrorHandler: tc.h})
		got := c.handleError(context.Background(), JobMeta{ID: 1, Kind: "k"}, tc.err)
		d, snoozed := worker.SnoozeOf(got)
		if worker.IsPermanent(got) != tc.permanent || d != tc.snooze || (tc.snooze == 0 && snoozed) {
			t.Errorf("%s: got %v (permanent %v, snooze %s), want permanent %v, snooze %s", tc.name, got, worker.IsPermanent(got), d, tc.permanent, tc.snooze)
		}
		if tc.snooze == 0 && !errors.Is(got, tc.err) {
			t.Errorf("%s: got %v, want it to wrap the attempt's error", tc.name, got)
		}
		if call := strings.Join(tc.h.calls, ","); call != tc.call {
			t.Errorf("%s: handler told %q, want %q", tc.name, call, tc.call)
		}
	}
	c, _ := chainClient(Config{})
	if got := c.handleError(context.Background(), JobMeta{}, failed); got != failed {
		t.Errorf("no handler: %v, want the error itself", got)
	}
}

type hookArgs struct{ Tenant string }

var (
	hookUnitJob = Define("unit.hook", func(context.Context, hookArgs) error { return nil }, JobOptions[hookArgs]{
		Tags:        []string{"def"},
		Concurrency: &Concurrency[hookArgs]{Key: func(a hookArgs) string { return a.Tenant }},
		EnqueueHooks: []EnqueueHook{func(_ context.Context, p *PendingJob) error {
			if p.Metadata["bad-def"] != "" {
				p.Tags = append(p.Tags, "no spaces")
			}
			return nil
		}}})
	nilMiddlewareJob = Define("unit.nilmw", func(context.Context, hookArgs) error { return nil },
		JobOptions[hookArgs]{Middleware: []WorkerMiddleware{nil}, EnqueueHooks: []EnqueueHook{nil}})
)

func openMemoryWith(t *testing.T, cfg Config) *Client {
	t.Helper()
	ctx := context.Background()
	c, err := Open(ctx, "sqlite::memory:", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHooksSeeAndChange: a hook sees the job's kind, queue, key and
// args, and its priority, metadata and tags are what is stored; a
// periodic tick goes through the hooks too.
func TestHooksSeeAndChange(t *testing.T) {
	ctx := context.Background()
	var seen []string
	c := openMemoryWith(t, Config{EnqueueHooks: []EnqueueHook{func(_ context.Context, p *PendingJob) error {
		seen = append(seen, p.Kind()+" "+p.Queue()+" "+p.Key()+" "+string(p.Args()))
		args := p.Args()
		args[0] = 'X' // a copy: the stored args stay
		p.Priority = 9
		p.Metadata["tenant"] = "acme"
		p.Tags = append(p.Tags, "hooked", "def")
		return nil
	}}})
	res, err := hookUnitJob.Enqueue(ctx, c, hookArgs{Tenant: "acme"}, WithMetadata(map[string]string{"a": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	info := jobOf(t, c, res.ID)
	if info.Priority != 9 || info.Metadata["tenant"] != "acme" || info.Metadata["a"] != "1" ||
		strings.Join(info.Tags, ",") != "def,hooked" || string(info.Args) != `{"Tenant":"acme"}` {
		t.Errorf("stored %+v, want priority 9, metadata a and tenant, tags def,hooked, args untouched", info)
	}
	if want := `unit.hook default unit.hook/acme {"Tenant":"acme"}`; len(seen) != 1 || seen[0] != want {
		t.Errorf("the hook saw %q, want %q", seen, want)
	}

	p := Periodic(Every(time.Hour), hookUnitJob, func(time.Time) hookArgs { return hookArgs{} }, PeriodicOptions{Name: "unit-hook"})
	jobs, err := p.build(ctx, c, time.Now(), time.Now())
	if err != nil || len(jobs) != 1 || !strings.Contains(string(jobs[0].Metadata), `"tenant":"acme"`) {
		t.Errorf("periodic tick built %+v, %v: want the hook's metadata", jobs, err)
	}
}

var errNoTenant = errors.New("no tenant")

// TestHooksRefuse: a hook's error, an invalid change and a definition
// hook's invalid change refuse the enqueue, each naming its hook.
func TestHooksRefuse(t *testing.T) {
	ctx := context.Background()
	c := openMemoryWith(t, Config{EnqueueHooks: []EnqueueHook{
		func(_ context.Context, p *PendingJob) error {
			if p.Metadata["refuse"] != "" {
				return errNoTenant
			}
			return nil
		},
		func(_ context.Context, p *PendingJob) error {
			switch {
			case p.Metadata["bad-key"] != "":
				p.Metadata["has space"] = "x"
			case p.Metadata["bad-priority"] != "":
				p.Priority = 1 << 40
			case p.Metadata["nil"] != "":
				p.Metadata = nil // read as none
			}
			return nil
		},
	}})
	for _, tc := range []struct{ md, want string }{
		{"refuse", "enqueue hook Config.EnqueueHooks[0] refused the job (nothing was stored): no tenant"},
		{"bad-key", "enqueue hook Config.EnqueueHooks[1]: metadata key \"has space\" is invalid"},
		{"bad-priority", "enqueue hook Config.EnqueueHooks[1]: priority 1099511627776 is out of range"},
		{"bad-def", "enqueue hook JobOptions.EnqueueHooks[0]: tag \"no spaces\" is invalid"},
	} {
		_, err := hookUnitJob.Enqueue(ctx, c, hookArgs{}, WithMetadata(map[string]string{tc.md: "1"}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to contain %q", tc.md, err, tc.want)
		}
		if tc.md == "refuse" && !errors.Is(err, errNoTenant) {
			t.Errorf("%s: %v does not wrap the hook's error", tc.md, err)
		}
		if tc.md != "refuse" && !errors.Is(err, ErrInvalidJob) {
			t.Errorf("%s: %v is no ErrInvalidJob", tc.md, err)
		}
	}
	if n := storedCount(t, c); n != 0 {
		t.Errorf("%d jobs stored, want none", n)
	}
	if res, err := hookUnitJob.Enqueue(ctx, c, hookArgs{}, WithMetadata(map[string]string{"nil": "1"})); err != nil {
		t.Errorf("a hook setting Metadata to nil: %+v, %v, want the job stored without metadata", res, err)
	} else if info := jobOf(t, c, res.ID); len(info.Metadata) != 0 {
		t.Errorf("metadata %v, want none", info.Metadata)
	}
}

// TestNilMiddlewareRefused: a nil middleware or hook is an error naming
// the field, in Config and in JobOptions.
func TestNilMiddlewareRefused(t *testing.T) {
	_, err := Open(context.Background(), "sqlite::memory:", Config{WorkerMiddleware: []WorkerMiddleware{nil}, EnqueueHooks: []EnqueueHook{nil}})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "Config.WorkerMiddleware[0] is nil") ||
		!strings.Contains(err.Error(), "Config.EnqueueHooks[0] is nil") {
		t.Errorf("Open with nil middleware and hook: %v, want ErrInvalidArgument naming both", err)
	}
	err = nilMiddlewareJob.Err()
	if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), "job option Middleware[0] is nil") ||
		!strings.Contains(err.Error(), "job option EnqueueHooks[0] is nil") {
		t.Errorf("Define with nil middleware and hook: %v, want ErrInvalidJob naming both", err)
	}
}
