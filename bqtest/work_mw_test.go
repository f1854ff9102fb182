package bqtest_test

import (
	"context"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/bqtest"
)

type wrappedArgs struct{}

var wrappedOrder []string

var wrapped = bq.Define("bqtest.wrapped", func(context.Context, wrappedArgs) error {
	wrappedOrder = append(wrappedOrder, "job")
	return nil
}, bq.JobOptions[wrappedArgs]{Middleware: []bq.WorkerMiddleware{
	func(ctx context.Context, job bq.JobMeta, next func(context.Context) error) error {
		wrappedOrder = append(wrappedOrder, "before "+job.Kind)
		err := next(ctx)
		wrappedOrder = append(wrappedOrder, "after")
		return err
	},
}})

// Work runs a job through its definition's middleware, as a worker does.
func TestWorkRunsTheDefinitionsMiddleware(t *testing.T) {
	wrappedOrder = nil
	if err := bqtest.Work(context.Background(), t, wrapped, wrappedArgs{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"before bqtest.wrapped", "job", "after"}
	if len(wrappedOrder) != len(want) {
		t.Fatalf("calls %q, want %q", wrappedOrder, want)
	}
	for i := range want {
		if wrappedOrder[i] != want[i] {
			t.Fatalf("calls %q, want %q", wrappedOrder, want)
		}
	}
}
