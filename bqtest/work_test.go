package bqtest_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/bqtest"
)

// probeArgs carries what the probe job saw back to the test.
type probeArgs struct {
	Name string `json:"name"`
	Skip string `json:"-"` // dropped by the JSON round trip, as when stored
}

var (
	seen      = map[string]bq.JobMeta{}
	seenArgs  = map[string]probeArgs{}
	hadTimout = map[string]bool{}
	Probe     = bq.Define("bqtest.probe", func(ctx context.Context, a probeArgs) error {
		meta, ok := bq.JobFromContext(ctx)
		if !ok {
			return errors.New("no job in the context")
		}
		_, hadTimout[a.Name] = ctx.Deadline()
		seen[a.Name], seenArgs[a.Name] = meta, a
		switch a.Name {
		case "fail":
			return errBoom
		case "panic":
			panic("probe panicked")
		}
		return nil
	}, bq.JobOptions[probeArgs]{
		Queue: "bqtest-probe", MaxAttempts: 4, Timeout: 1 << 40, Tags: []string{"probe"},
		Concurrency: &bq.Concurrency[probeArgs]{Key: func(a probeArgs) string { return a.Name }, Group: "probes"},
	})
)

// Work runs the function with the job context a first run would have,
// or the one the options give.
func TestWorkGivesTheJobItsContext(t *testing.T) {
	ctx := context.Background()
	if err := bqtest.Work(ctx, t, Probe, probeArgs{Name: "first", Skip: "x"}); err != nil {
		t.Fatal(err)
	}
	// Each run gets a fencing token larger than the last.
	firstToken := seen["first"].Token
	if firstToken <= 0 {
		t.Errorf("Work's run has Token %d, want a positive fencing token", firstToken)
	}
	want := bq.JobMeta{Kind: "bqtest.probe", Queue: "bqtest-probe", Attempt: 1, MaxAttempts: 4, Key: "probes/first", Tags: []string{"probe"},
		Keys: []string{"probes/first"}, Token: firstToken}
	if got := seen["first"]; !reflect.DeepEqual(got, want) {
		t.Errorf("JobFromContext in Work: %+v, want %+v", got, want)
	}
	if got := seenArgs["first"]; got.Skip != "" {
		t.Errorf("args reached the job without their JSON round trip: %+v", got)
	}
	if !hadTimout["first"] {
		t.Error("the definition's Timeout did not bound the job's context")
	}

	err := bqtest.Work(ctx, t, Probe, probeArgs{Name: "again"}, bqtest.WithAttempt(3), bqtest.WithJobID(42),
		bqtest.WithKey("tenant/acme"), bqtest.WithMetadata(map[string]string{"a": "1"}),
		bqtest.WithMetadata(map[string]string{"b": "2"}), bqtest.WithTags("probe", "vip"))
	if err != nil {
		t.Fatal(err)
	}
	want = bq.JobMeta{ID: 42, Kind: "bqtest.probe", Queue: "bqtest-probe", Attempt: 3, MaxAttempts: 4, Key: "tenant/acme",
		Metadata: map[string]string{"a": "1", "b": "2"}, Tags: []string{"probe", "vip"}, Keys: []string{"tenant/acme"},
		Token: seen["again"].Token}
	if seen["again"].Token <= firstToken {
		t.Errorf("the second Work run's Token %d is not above the first's %d", seen["again"].Token, firstToken)
	}
	if got := seen["again"]; !reflect.DeepEqual(got, want) {
		t.Errorf("JobFromContext with options: %+v, want %+v", got, want)
	}
}

func TestWorkReturnsTheJobsError(t *testing.T) {
	ctx := context.Background()
	if err := bqtest.Work(ctx, t, Probe, probeArgs{Name: "fail"}); !errors.Is(err, errBoom) {
		t.Errorf("Work of a failing job: %v, want %v", err, errBoom)
	}
	err := bqtest.Work(ctx, t, Probe, probeArgs{Name: "panic"})
	if err == nil || !strings.Contains(err.Error(), "panic: probe panicked") || !strings.Contains(err.Error(), "goroutine") {
		t.Errorf("Work of a panicking job: %v, want the panic with its stack", err)
	}
}

// Defined once, at package level: a Define inside a test function runs
// again under go test -count=2, and a kind defined twice stops Run.
var (
	badDefinition = bq.Define("", func(context.Context, int) error { return nil }, bq.JobOptions[int]{})
	unencodable   = bq.Define("bqtest.unencodable", func(context.Context, func()) error { return nil }, bq.JobOptions[func()]{})
)

func TestWorkRefusesWhatCannotRun(t *testing.T) {
	ctx := context.Background()
	mustFail(t, func(tb testing.TB) { _ = bqtest.Work(ctx, tb, Probe, probeArgs{}, bqtest.WithAttempt(0)) },
		"bqtest.Work: WithAttempt(0): attempts count from 1")
	mustFail(t, func(tb testing.TB) { _ = bqtest.Work(ctx, tb, Probe, probeArgs{}, nil) }, "option 0 is nil")
	mustFail(t, func(tb testing.TB) { _ = bqtest.Work[probeArgs](ctx, tb, nil, probeArgs{}) }, "the job is nil")
	mustFail(t, func(tb testing.TB) { _ = bqtest.Work(ctx, tb, badDefinition, 1) }, "the name is empty")
	mustFail(t, func(tb testing.TB) { _ = bqtest.Work(ctx, tb, unencodable, func() {}) }, "encode args of job kind \"bqtest.unencodable\" as JSON")
	mustFail(t, func(tb testing.TB) {
		_ = bqtest.Work(ctx, tb, Probe, probeArgs{Name: "bad-md"}, bqtest.WithMetadata(map[string]string{"not ok": "x"}))
	}, "bqtest.Work: the job did not run: invalid job: bqtest.WithMetadata: metadata key \"not ok\" is invalid")
	mustFail(t, func(tb testing.TB) { _ = bqtest.Work(ctx, tb, Probe, probeArgs{Name: "bad-tag"}, bqtest.WithTags("")) }, "bqtest.WithTags")
	mustFail(t, func(tb testing.TB) {
		_ = bqtest.Work(ctx, tb, Probe, probeArgs{Name: "bad-key"}, bqtest.WithKey("a\x00b"))
	}, "bqtest.WithKey")
	for _, name := range []string{"bad-md", "bad-tag", "bad-key"} {
		if _, ran := seen[name]; ran {
			t.Errorf("the job ran with the invalid option of %s", name)
		}
	}
}
