package bqtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// The job kinds bqtest's own tests enqueue.
type EmailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject,omitempty"`
}

type ChargeArgs struct {
	OrderID int64 `json:"order_id"`
}

var (
	sent  sync.Map // EmailArgs.To -> *atomic.Int64, times sent
	Email = bq.Define("bqtest.email", func(ctx context.Context, a EmailArgs) error {
		n, _ := sent.LoadOrStore(a.To, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		return nil
	}, bq.JobOptions[EmailArgs]{Queue: "bqtest-mail", Tags: []string{"mail"}})

	// Charge sends a receipt by email when it runs: work that makes work.
	Charge = bq.Define("bqtest.charge", func(ctx context.Context, a ChargeArgs) error {
		_, err := Email.Enqueue(ctx, clientOf(ctx), EmailArgs{To: fmt.Sprintf("order-%d", a.OrderID), Subject: "receipt"})
		return err
	}, bq.JobOptions[ChargeArgs]{
		Queue: "bqtest-billing",
		Concurrency: &bq.Concurrency[ChargeArgs]{
			Key: func(a ChargeArgs) string { return fmt.Sprint(a.OrderID) },
		},
		Timeout: time.Minute,
	})

	Report = bq.Define("bqtest.report", func(ctx context.Context, _ struct{}) error { return nil },
		bq.JobOptions[struct{}]{Queue: "bqtest-reports"})
)

// clientOf is the client a job enqueues on: the application would hold
// it in a package variable or its context.
type clientKey struct{}

func clientOf(ctx context.Context) *bq.Client { c, _ := ctx.Value(clientKey{}).(*bq.Client); return c }

// withClient is ctx carrying client, which jobs' contexts inherit from
// Run's.
func withClient(ctx context.Context, c *bq.Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// recorder is a testing.TB that records failures instead of failing
// the test, to check what bqtest reports. Fatal ends the goroutine, as
// testing's does.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, "log: "+fmt.Sprintf(format, args...))
}

// record runs fn with a recorder over t and returns whether it failed
// and what it said.
func record(t *testing.T, fn func(tb testing.TB)) (bool, string) {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed, strings.Join(r.msgs, "\n")
}

// mustFail runs fn on a recorder and checks it failed saying every one
// of wants.
func mustFail(t *testing.T, fn func(tb testing.TB), wants ...string) {
	t.Helper()
	failed, said := record(t, fn)
	if !failed {
		t.Fatalf("passed; want a failure saying %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(said, w) {
			t.Errorf("the failure says:\n%s\nwant it to say %q", said, w)
		}
	}
}

// mustPass runs fn on a recorder and checks it did not fail.
func mustPass(t *testing.T, fn func(tb testing.TB)) {
	t.Helper()
	if failed, said := record(t, fn); failed {
		t.Fatalf("failed: %s", said)
	}
}

// must is v, panicking on err: for set-up calls that do not fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var errBoom = errors.New("boom")

func (r *recorder) Log(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, "log: "+fmt.Sprint(args...))
}
