package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"TraceLinksRunToEnqueue", testTraceLinksRunToEnqueue},
	scenario{"TraceRunsAsChildren", testTraceRunsAsChildren},
	scenario{"TraceFailedRunRecordsError", testTraceFailedRunRecordsError},
	scenario{"TraceRetriedRunLinksAgain", testTraceRetriedRunLinksAgain},
	scenario{"TraceOffAddsNoMetadata", testTraceOffAddsNoMetadata},
)

// traced is an in-memory OpenTelemetry SDK for one test.
type traced struct {
	tp  *sdktrace.TracerProvider
	exp *tracetest.InMemoryExporter
}

func newTraced(t *testing.T) *traced {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &traced{tp: tp, exp: exp}
}

// client opens a client on h's database exporting to tr; with slots, it
// runs the default queue.
func (tr *traced) client(h *harness, slots int, children bool) *bq.Client {
	cfg := testConfig()
	cfg.TracerProvider, cfg.TraceRunsAsChildren = tr.tp, children
	if slots == 0 {
		return h.clientWith(cfg)
	}
	cfg.Queues = map[string]int{"default": slots}
	c := h.clientWith(cfg)
	h.run(c)
	return c
}

// spans returns the ended spans named name.
func (tr *traced) spans(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tr.exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// waitSpans waits for n ended spans named name.
func (tr *traced) waitSpans(h *harness, name string, n int) []tracetest.SpanStub {
	h.t.Helper()
	h.eventually(20*time.Second, name+" spans", func() bool { return len(tr.spans(name)) >= n })
	return tr.spans(name)
}

func spanAttr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// wantAttrs checks attributes of s.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := spanAttr(s, k); got != v {
			t.Errorf("span %q: attribute %s = %q, want %q", s.Name, k, got, v)
		}
	}
}

// testTraceLinksRunToEnqueue: an enqueue inside the application's span is
// a producer span of its trace; the job's run is a consumer span linked to
// it through the job's metadata, with the messaging attributes and the
// limit group, never the raw key; EnqueueMany and EnqueueBatch are one
// span for the call.
func testTraceLinksRunToEnqueue(t *testing.T, h *harness) {
	tr := newTraced(t)
	producer := tr.client(h, 0, false)
	const secret = "tenant-secret-4711"
	ctx, app := tr.tp.Tracer("app").Start(context.Background(), "http request")
	res, err := limit1Job.Enqueue(ctx, producer, Args{Test: h.test, Key: secret})
	if err != nil {
		t.Fatal(err)
	}
	many, err := unkeyedJob.EnqueueMany(ctx, producer, []Args{{Test: h.test}, {Test: h.test}, {Test: h.test}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := producer.EnqueueBatch(ctx, []bq.Item{unkeyedJob.Item(Args{Test: h.test}),
		limit2Job.Item(Args{Test: h.test, Key: secret}, bq.Queue("other"))}); err != nil {
		t.Fatal(err)
	}
	app.End()
	traceID := app.SpanContext().TraceID()
	if mixed := tr.spans("send"); len(mixed) != 1 || spanAttr(mixed[0], "messaging.batch.message_count") != "2" ||
		spanAttr(mixed[0], "bq.job.kind") != "" || spanAttr(mixed[0], "messaging.destination.name") != "" {
		t.Errorf("EnqueueBatch of two kinds and queues: spans %+v, want one \"send\" of 2 jobs naming no kind or queue", mixed)
	}

	info := jobInfo(t, h, res.ID)
	if tp := info.Metadata["traceparent"]; !strings.Contains(tp, traceID.String()) {
		t.Errorf("stored metadata %v, want a traceparent of trace %s", info.Metadata, traceID)
	}
	sends := tr.spans("send default")
	if len(sends) != 2 {
		t.Fatalf("%d send spans, want 2: one for Enqueue, one for the EnqueueMany of 3", len(sends))
	}
	one, batch := sends[0], sends[1]
	for _, s := range sends {
		if s.SpanKind != trace.SpanKindProducer || s.SpanContext.TraceID() != traceID || s.Parent.SpanID() != app.SpanContext().SpanID() {
			t.Errorf("send span kind %s trace %s parent %s, want a producer child of the app's span in trace %s",
				s.SpanKind, s.SpanContext.TraceID(), s.Parent.SpanID(), traceID)
		}
	}
	wantAttrs(t, one, map[string]string{"messaging.system": "bq", "messaging.operation.type": "send",
		"messaging.destination.name": "default", "messaging.message.id": itoa(res.ID), "bq.job.kind": "c.limit1",
		"bq.concurrency.group": "c.limit1", "bq.job.state": "ready"})
	wantAttrs(t, batch, map[string]string{"messaging.batch.message_count": "3", "bq.job.kind": "c.unkeyed"})

	tr.client(h, 2, false)
	for _, r := range append(many, res) {
		h.waitState(r.ID, bq.StateCompleted)
	}
	runs := tr.waitSpans(h, "process default", 4)
	byID := map[string]tracetest.SpanStub{}
	for _, s := range runs {
		byID[spanAttr(s, "messaging.message.id")] = s
	}
	run, ok := byID[itoa(res.ID)]
	if !ok {
		t.Fatalf("no process span for job %d among %d", res.ID, len(runs))
	}
	if run.SpanKind != trace.SpanKindConsumer || len(run.Links) != 1 ||
		run.Links[0].SpanContext.TraceID() != traceID || run.Links[0].SpanContext.SpanID() != one.SpanContext.SpanID() {
		t.Fatalf("run span kind %s links %+v, want a consumer linked to the send span %s of trace %s",
			run.SpanKind, run.Links, one.SpanContext.SpanID(), traceID)
	}
	if run.Parent.IsValid() {
		t.Errorf("run span's parent %s, want a root: runs are linked, not children, by default", run.Parent.SpanID())
	}
	wantAttrs(t, run, map[string]string{"messaging.system": "bq", "messaging.operation.type": "process",
		"messaging.destination.name": "default", "bq.job.kind": "c.limit1", "bq.job.attempt": "1",
		"bq.concurrency.group": "c.limit1", "bq.job.outcome": "completed"})
	for _, r := range many {
		if s, ok := byID[itoa(r.ID)]; !ok || len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != batch.SpanContext.SpanID() {
			t.Errorf("job %d of the batch: run span %v links %+v, want one to the batch's send span", r.ID, ok, s.Links)
		}
	}
	for _, s := range tr.exp.GetSpans() {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("span %q: attribute %s = %q carries the raw concurrency key", s.Name, kv.Key, kv.Value.String())
			}
		}
	}
}

// testTraceRunsAsChildren: with Config.TraceRunsAsChildren, the run's span
// is in the enqueue's trace, a child of its send span, and linked too.
func testTraceRunsAsChildren(t *testing.T, h *harness) {
	tr := newTraced(t)
	ctx, app := tr.tp.Tracer("app").Start(context.Background(), "http request")
	res, err := unkeyedJob.Enqueue(ctx, tr.client(h, 0, true), Args{Test: h.test})
	if err != nil {
		t.Fatal(err)
	}
	app.End()
	tr.client(h, 1, true)
	run := tr.waitSpans(h, "process default", 1)[0]
	send := tr.spans("send default")[0]
	if run.SpanContext.TraceID() != app.SpanContext().TraceID() || run.Parent.SpanID() != send.SpanContext.SpanID() || len(run.Links) != 1 {
		t.Errorf("job %d: run span trace %s parent %s links %d, want a child of send span %s in trace %s, linked",
			res.ID, run.SpanContext.TraceID(), run.Parent.SpanID(), len(run.Links), send.SpanContext.SpanID(), app.SpanContext().TraceID())
	}
}

// testTraceFailedRunRecordsError: a run that fails for good ends its span
// with the failed outcome, the Error status and the error recorded.
func testTraceFailedRunRecordsError(t *testing.T, h *harness) {
	tr := newTraced(t)
	res, err := onceJob.Enqueue(context.Background(), tr.client(h, 0, false), Args{Test: h.test, Mode: "fail"})
	if err != nil {
		t.Fatal(err)
	}
	tr.client(h, 1, false)
	h.waitState(res.ID, bq.StateFailed)
	run := tr.waitSpans(h, "process default", 1)[0]
	wantAttrs(t, run, map[string]string{"bq.job.outcome": "failed", "bq.job.attempt": "1"})
	if run.Status.Code != codes.Error || run.Status.Description != "boom" {
		t.Errorf("failed run's status %+v, want Error \"boom\"", run.Status)
	}
	if len(run.Events) != 1 || run.Events[0].Name != "exception" || !hasAttr(run.Events[0].Attributes, "exception.message", "boom") {
		t.Errorf("failed run's events %+v, want one exception event with message boom", run.Events)
	}
}

func hasAttr(kvs []attribute.KeyValue, key, value string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key && kv.Value.String() == value {
			return true
		}
	}
	return false
}

// testTraceRetriedRunLinksAgain: each run of a retried job has its own
// span, both linked to the one enqueue; the first records its error and
// outcome retried, the second completes.
func testTraceRetriedRunLinksAgain(t *testing.T, h *harness) {
	tr := newTraced(t)
	ctx, app := tr.tp.Tracer("app").Start(context.Background(), "http request")
	res, err := retryJob.Enqueue(ctx, tr.client(h, 0, false), Args{Test: h.test, Mode: "fail-first"})
	if err != nil {
		t.Fatal(err)
	}
	app.End()
	tr.client(h, 1, false)
	h.waitState(res.ID, bq.StateCompleted)
	runs := tr.waitSpans(h, "process default", 2)
	send := tr.spans("send default")[0]
	if len(runs) != 2 {
		t.Fatalf("%d run spans, want 2", len(runs))
	}
	for i, want := range []struct{ attempt, outcome string }{{"1", "retried"}, {"2", "completed"}} {
		r := runs[i]
		wantAttrs(t, r, map[string]string{"bq.job.attempt": want.attempt, "bq.job.outcome": want.outcome})
		if len(r.Links) != 1 || r.Links[0].SpanContext.SpanID() != send.SpanContext.SpanID() {
			t.Errorf("attempt %s: links %+v, want one to the send span %s", want.attempt, r.Links, send.SpanContext.SpanID())
		}
	}
	if runs[0].Status.Code != codes.Error || runs[0].Status.Description != "first attempt fails" || len(runs[0].Events) != 1 {
		t.Errorf("retried run: status %+v, %d events, want Error with its error recorded", runs[0].Status, len(runs[0].Events))
	}
	if runs[1].Status.Code != codes.Unset {
		t.Errorf("completed run: status %+v, want unset", runs[1].Status)
	}
}

// testTraceOffAddsNoMetadata: with no SDK (the default, no-op provider)
// an enqueue, even inside a span of another provider's, stores no trace
// context: a job's metadata is only what the caller gave. With tracing on
// the same enqueue does store one, so the check can see it.
func testTraceOffAddsNoMetadata(t *testing.T, h *harness) {
	tr := newTraced(t)
	ctx, app := tr.tp.Tracer("app").Start(context.Background(), "http request")
	defer app.End()
	plain, err := unkeyedJob.Enqueue(ctx, h.client, Args{Test: h.test})
	if err != nil {
		t.Fatal(err)
	}
	mine := enqueue(t, h, unkeyedJob, Args{}, bq.WithMetadata(map[string]string{"tenant": "acme"}))
	if md := jobInfo(t, h, plain.ID).Metadata; md != nil {
		t.Errorf("untraced job's metadata %v, want none", md)
	}
	if md := jobInfo(t, h, mine.ID).Metadata; len(md) != 1 || md["tenant"] != "acme" {
		t.Errorf("untraced job's metadata %v, want only tenant=acme", md)
	}
	traced, err := unkeyedJob.Enqueue(ctx, tr.client(h, 0, false), Args{Test: h.test},
		bq.WithMetadata(map[string]string{"tenant": "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	if md := jobInfo(t, h, traced.ID).Metadata; md["tenant"] != "acme" || md["traceparent"] == "" {
		t.Errorf("traced job's metadata %v, want tenant=acme and a traceparent", md)
	}
}
