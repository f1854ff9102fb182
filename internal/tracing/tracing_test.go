package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func recording(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func only(t *testing.T, exp *tracetest.InMemoryExporter) tracetest.SpanStub {
	t.Helper()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans ended, want 1: %+v", len(spans), spans)
	}
	exp.Reset()
	return spans[0]
}

// TestSendCarriesTheParentsTrace: the enqueue span is a PRODUCER child of
// the caller's span, and the carrier holds its context, in W3C form even
// with no global propagator installed.
func TestSendCarriesTheParentsTrace(t *testing.T) {
	tp, exp := recording(t)
	tr := New(tp, nil, false)
	parent, ps := tp.Tracer("app").Start(context.Background(), "handler")
	_, span, carrier := tr.Send(parent, []Job{{Queue: "billing", Kind: "charge", Key: "tenant/acme-secret"}})
	tr.EndSend(span, []Sent{{ID: 42, State: "ready"}}, nil)
	ps.End()
	s := exp.GetSpans()[0]
	if s.Name != "send billing" || s.SpanKind != trace.SpanKindProducer {
		t.Errorf("span %q kind %s, want \"send billing\" producer", s.Name, s.SpanKind)
	}
	if s.Parent.SpanID() != ps.SpanContext().SpanID() {
		t.Errorf("send span's parent %s, want the caller's span %s", s.Parent.SpanID(), ps.SpanContext().SpanID())
	}
	tp2 := carrier["traceparent"]
	if !strings.Contains(tp2, s.SpanContext.TraceID().String()) || !strings.Contains(tp2, s.SpanContext.SpanID().String()) {
		t.Errorf("carrier traceparent %q, want the send span's trace %s and span %s", tp2, s.SpanContext.TraceID(), s.SpanContext.SpanID())
	}
	a := attrs(s)
	for k, want := range map[attribute.Key]string{System: "bq", OperationType: "send", Destination: "billing",
		MessageID: "42", Kind: "charge", Group: "tenant", State: "ready"} {
		if got := a[k].String(); got != want {
			t.Errorf("attribute %s = %q, want %q", k, got, want)
		}
	}
	if _, ok := a[BatchCount]; ok {
		t.Errorf("a one-job enqueue has %s, want none (the conventions keep it for batches)", BatchCount)
	}
	noKey(t, s, "acme-secret")
}

// noKey fails if any attribute of s carries the raw key part secret.
func noKey(t *testing.T, s tracetest.SpanStub, secret string) {
	t.Helper()
	for _, kv := range s.Attributes {
		if strings.Contains(kv.Value.String(), secret) {
			t.Errorf("attribute %s = %q carries the raw concurrency key", kv.Key, kv.Value.String())
		}
	}
}

// TestSendBatch: one span for a call of many jobs, with their count;
// names and attributes the jobs do not share are left out.
func TestSendBatch(t *testing.T) {
	tp, exp := recording(t)
	tr := New(tp, nil, false)
	_, span, _ := tr.Send(context.Background(), []Job{{Queue: "a", Kind: "k"}, {Queue: "b", Kind: "k"}, {Queue: "a", Kind: "k"}})
	tr.EndSend(span, make([]Sent, 3), nil)
	s := only(t, exp)
	a := attrs(s)
	if s.Name != "send" || a[BatchCount].AsInt64() != 3 || a[Kind].String() != "k" {
		t.Errorf("span %q attrs %v, want \"send\" with count 3 and kind k", s.Name, a)
	}
	for _, k := range []attribute.Key{Destination, MessageID, Group} {
		if _, ok := a[k]; ok {
			t.Errorf("a batch of two queues, unkeyed, has %s", k)
		}
	}
}

// TestSendUntracedCarriesNothing: with no SDK (a no-op provider), even in
// a span of the application's own provider, or with every span sampled
// out, there is nothing to store in the job's metadata.
func TestSendUntracedCarriesNothing(t *testing.T) {
	app, _ := recording(t)
	ctx, ps := app.Tracer("app").Start(context.Background(), "handler")
	defer ps.End()
	dropAll := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	for name, tp := range map[string]trace.TracerProvider{"no-op": noop.NewTracerProvider(), "sampled out": dropAll} {
		tr := New(tp, propagation.TraceContext{}, false)
		for _, ctx := range []context.Context{context.Background(), ctx} {
			_, span, carrier := tr.Send(ctx, []Job{{Queue: "q", Kind: "k"}})
			tr.EndSend(span, nil, nil)
			if carrier != nil {
				t.Errorf("%s: untraced enqueue carries %v, want nil", name, carrier)
			}
		}
	}
}

// TestSendError: a refused enqueue records its error and status.
func TestSendError(t *testing.T) {
	tp, exp := recording(t)
	tr := New(tp, nil, false)
	_, span, _ := tr.Send(context.Background(), []Job{{Queue: "q", Kind: "k"}})
	tr.EndSend(span, nil, errors.New("database down"))
	s := only(t, exp)
	if s.Status.Code != codes.Error || s.Status.Description != "database down" || len(s.Events) != 1 {
		t.Errorf("status %+v events %d, want Error \"database down\" and one exception event", s.Status, len(s.Events))
	}
}

// TestProcessLinksToSend: a run's span is a CONSUMER root linked to the
// enqueue's span; with childRuns it is its child too.
func TestProcessLinksToSend(t *testing.T) {
	for _, child := range []bool{false, true} {
		tp, exp := recording(t)
		tr := New(tp, nil, child)
		_, span, carrier := tr.Send(context.Background(), []Job{{Queue: "q", Kind: "k"}})
		tr.EndSend(span, nil, nil)
		send := only(t, exp)
		// The run's context comes from Run's, which may carry a span.
		runParent, rs := tp.Tracer("app").Start(context.Background(), "worker main")
		ctx, span := tr.Process(runParent, Job{Queue: "q", Kind: "k", Key: "g/private"}, 7, 2, carrier)
		if trace.SpanFromContext(ctx) != span {
			t.Error("the run's context does not carry its span")
		}
		tr.EndProcess(span, "completed", nil)
		rs.End()
		s := exp.GetSpans()[0]
		if s.Name != "process q" || s.SpanKind != trace.SpanKindConsumer {
			t.Errorf("span %q kind %s, want \"process q\" consumer", s.Name, s.SpanKind)
		}
		if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != send.SpanContext.SpanID() {
			t.Fatalf("links %+v, want one to the send span %s", s.Links, send.SpanContext.SpanID())
		}
		switch {
		case child && s.Parent.SpanID() != send.SpanContext.SpanID():
			t.Errorf("childRuns: parent %s, want the send span %s", s.Parent.SpanID(), send.SpanContext.SpanID())
		case !child && (s.Parent.IsValid() || s.SpanContext.TraceID() == send.SpanContext.TraceID()):
			t.Errorf("default: parent %s trace %s, want a new root trace apart from the send's %s",
				s.Parent.SpanID(), s.SpanContext.TraceID(), send.SpanContext.TraceID())
		}
		a := attrs(s)
		for k, want := range map[attribute.Key]string{System: "bq", OperationType: "process", Destination: "q",
			MessageID: "7", Kind: "k", Attempt: "2", Group: "g", Outcome: "completed"} {
			if got := a[k].String(); got != want {
				t.Errorf("child=%v: attribute %s = %q, want %q", child, k, got, want)
			}
		}
		if s.Status.Code != codes.Unset {
			t.Errorf("completed run's status %+v, want unset", s.Status)
		}
		noKey(t, s, "private")
	}
}

// TestProcessWithoutTraceContext: a job enqueued untraced runs in a root
// span with no link, not as a child of the worker's span.
func TestProcessWithoutTraceContext(t *testing.T) {
	tp, exp := recording(t)
	tr := New(tp, nil, false)
	parent, ps := tp.Tracer("app").Start(context.Background(), "worker main")
	_, span := tr.Process(parent, Job{Queue: "q", Kind: "k"}, 1, 1, map[string]string{"tenant": "acme"})
	tr.EndProcess(span, "completed", nil)
	ps.End()
	s := exp.GetSpans()[0]
	if len(s.Links) != 0 || s.Parent.IsValid() {
		t.Errorf("links %+v parent %s, want none", s.Links, s.Parent.SpanID())
	}
}

// TestEndProcessOutcomes: failures record the error and the Error
// status; a snooze or a cancel is no failure.
func TestEndProcessOutcomes(t *testing.T) {
	tp, exp := recording(t)
	tr := New(tp, nil, false)
	long := strings.Repeat("é", maxStatusBytes)
	for _, c := range []struct {
		outcome string
		err     error
		status  codes.Code
		events  int
		errType string // the span's error.type; "" for none
	}{
		{"failed", errors.New("boom"), codes.Error, 1, "*errors.errorString"},
		{"retried", fmt.Errorf("wrapped: %w", &os.PathError{Op: "open", Path: "x", Err: os.ErrNotExist}), codes.Error, 1, "*fs.PathError"},
		{"retried", fmt.Errorf("slow: %w", context.DeadlineExceeded), codes.Error, 1, "timeout"},
		{"retried", errors.New(long), codes.Error, 1, "*errors.errorString"},
		{"lost", nil, codes.Error, 0, "lease_lost"},
		{"unrecorded", nil, codes.Error, 0, ""},
		{"snoozed", errors.New("snooze"), codes.Unset, 0, ""},
		{"cancelled", errors.New("cancel"), codes.Unset, 0, ""},
		{"completed", nil, codes.Unset, 0, ""},
	} {
		_, span := tr.Process(context.Background(), Job{Queue: "q", Kind: "k"}, 1, 1, nil)
		tr.EndProcess(span, c.outcome, c.err)
		s := only(t, exp)
		if s.Status.Code != c.status || len(s.Events) != c.events || attrs(s)[Outcome].String() != c.outcome {
			t.Errorf("%s (%v): status %+v, %d events, outcome %q; want %s, %d", c.outcome, c.err, s.Status, len(s.Events),
				attrs(s)[Outcome].String(), c.status, c.events)
		}
		if got := attrs(s)["error.type"].AsString(); got != c.errType {
			t.Errorf("%s (%v): error.type %q, want %q", c.outcome, c.err, got, c.errType)
		}
		if len(s.Status.Description) > maxStatusBytes+len("…") {
			t.Errorf("%s: status description of %d bytes, want at most %d", c.outcome, len(s.Status.Description), maxStatusBytes)
		}
		if c.err != nil && c.status == codes.Error && !strings.HasPrefix(c.err.Error(), strings.TrimSuffix(s.Status.Description, "…")) {
			t.Errorf("%s: status description %.40q does not start the error", c.outcome, s.Status.Description)
		}
	}
}
