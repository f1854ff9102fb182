// Package tracing holds bq's OpenTelemetry spans. It uses the trace API
// only; the application brings the SDK and exporter.
//
// Each enqueue call is one PRODUCER span ("send <queue>") and each run of
// a job one CONSUMER span ("process <queue>"). The enqueue's trace
// context travels in the job's metadata (the propagator's keys, W3C
// "traceparent" and "tracestate" by default) so that every run of the
// job, retries included, links to the enqueue that made it, and by option
// is its child.
//
// Attributes follow OpenTelemetry's messaging conventions, plus the job's
// kind, attempt, outcome and limit group (the part of a concurrency key
// before its first "/"), never a key itself: keys may carry private
// values, as for the metrics.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/bqueue/bq/internal/driver"
)

// Scope is the instrumentation scope of every bq span.
const Scope = "github.com/bqueue/bq"

// Attribute keys; docs/observability.md describes each.
const (
	System        = attribute.Key("messaging.system")
	OperationType = attribute.Key("messaging.operation.type")
	OperationName = attribute.Key("messaging.operation.name")
	Destination   = attribute.Key("messaging.destination.name")
	MessageID     = attribute.Key("messaging.message.id")
	BatchCount    = attribute.Key("messaging.batch.message_count")
	Kind          = attribute.Key("bq.job.kind")
	Attempt       = attribute.Key("bq.job.attempt")
	Group         = attribute.Key("bq.concurrency.group")
	State         = attribute.Key("bq.job.state")
	Outcome       = attribute.Key("bq.job.outcome")
)

// maxStatusBytes bounds a span status's description: a job may fail with
// any text (a panic's stack); the whole of it is in the error event.
const maxStatusBytes = 1024

// Tracer starts bq's spans on one TracerProvider.
type Tracer struct {
	tracer trace.Tracer
	// prop is Config.Propagator; nil takes the global one at each use.
	prop propagation.TextMapPropagator
	// childRuns parents each run's span on its enqueue's, besides the link.
	childRuns bool
}

// New returns a tracer on tp. A nil prop takes otel.GetTextMapPropagator()
// when each job is enqueued or run, or W3C TraceContext while the
// application installs none (the global default propagates nothing).
func New(tp trace.TracerProvider, prop propagation.TextMapPropagator, childRuns bool) *Tracer {
	return &Tracer{tracer: tp.Tracer(Scope), prop: prop, childRuns: childRuns}
}

func (t *Tracer) propagator() propagation.TextMapPropagator {
	if t.prop != nil {
		return t.prop
	}
	if p := otel.GetTextMapPropagator(); len(p.Fields()) > 0 {
		return p
	}
	return propagation.TraceContext{}
}

// Job is what a span's attributes are made of. Key is used only to derive
// the group.
type Job struct {
	Queue, Kind, Key string
}

// Send starts the producer span of one enqueue call of jobs and returns
// its context and the trace context to store in each job's metadata: nil
// when the span is not recording (no SDK installed, or sampled out), so
// that an untraced enqueue writes no metadata.
func (t *Tracer) Send(ctx context.Context, jobs []Job) (context.Context, trace.Span, map[string]string) {
	queue := common(jobs, func(j Job) string { return j.Queue })
	name := "send"
	if queue != "" {
		name += " " + queue
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		attrs := []attribute.KeyValue{System.String("bq"), OperationType.String("send"), OperationName.String("send")}
		if queue != "" {
			attrs = append(attrs, Destination.String(queue))
		}
		if len(jobs) != 1 {
			attrs = append(attrs, BatchCount.Int(len(jobs)))
		}
		if kind := common(jobs, func(j Job) string { return j.Kind }); kind != "" {
			attrs = append(attrs, Kind.String(kind))
		}
		if g := common(jobs, func(j Job) string { return driver.GroupOf(j.Key) }); g != "" {
			attrs = append(attrs, Group.String(g))
		}
		span.SetAttributes(attrs...)
	}
	if !span.IsRecording() {
		// No SDK, or a sampler dropped the span: the enqueue stays as
		// plain as without tracing. (A no-op tracer passes on the span
		// of ctx, which is the application's, not bq's, to propagate.)
		return ctx, span, nil
	}
	carrier := propagation.MapCarrier{}
	t.propagator().Inject(ctx, carrier)
	if len(carrier) == 0 {
		return ctx, span, nil
	}
	return ctx, span, carrier
}

// Sent is what became of one job of an enqueue call.
type Sent struct {
	ID    int64  // 0 when not stored
	State string // ready, blocked, scheduled, discarded or duplicate
}

// EndSend ends an enqueue's span with what became of its jobs, or err.
func (t *Tracer) EndSend(span trace.Span, sent []Sent, err error) {
	if span.IsRecording() {
		if err != nil {
			fail(span, err)
		} else if len(sent) == 1 {
			if sent[0].ID != 0 {
				span.SetAttributes(MessageID.String(strconv.FormatInt(sent[0].ID, 10)))
			}
			span.SetAttributes(State.String(sent[0].State))
		}
	}
	span.End()
}

// Process starts the consumer span of one run of a job, linked to the
// trace context its metadata carries from its enqueue (and, with
// childRuns, its child). The returned context carries the span, and any
// baggage the propagator extracted, for the job's own spans.
func (t *Tracer) Process(ctx context.Context, j Job, id int64, attempt int, metadata map[string]string) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if len(metadata) > 0 {
		ctx = t.propagator().Extract(ctx, propagation.MapCarrier(metadata))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && sc.IsRemote() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		if !t.childRuns {
			opts = append(opts, trace.WithNewRoot())
		}
	} else {
		// A run is no child of whatever span the worker was started in.
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := t.tracer.Start(ctx, "process "+j.Queue, opts...)
	if span.IsRecording() {
		attrs := []attribute.KeyValue{System.String("bq"), OperationType.String("process"), OperationName.String("process"),
			Destination.String(j.Queue), MessageID.String(strconv.FormatInt(id, 10)), Kind.String(j.Kind), Attempt.Int(attempt)}
		if j.Key != "" {
			attrs = append(attrs, Group.String(driver.GroupOf(j.Key)))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// EndProcess ends a run's span with its outcome (completed, retried,
// failed, snoozed, cancelled, returned, lost; unrecorded when the
// outcome could not be written, stale when the claim was reaped first).
// A run that failed, for good or to be retried, or was lost, records
// runErr and the Error status; unrecorded and stale set the status.
func (t *Tracer) EndProcess(span trace.Span, outcome string, runErr error) {
	if span.IsRecording() {
		span.SetAttributes(Outcome.String(outcome))
		switch outcome {
		case "failed", "retried", "lost":
			span.SetAttributes(attribute.String("error.type", errorType(outcome, runErr)))
			if runErr != nil {
				fail(span, runErr)
			} else {
				span.SetStatus(codes.Error, "run "+outcome)
			}
		case "unrecorded":
			span.SetStatus(codes.Error, "the run's outcome could not be recorded")
		case "stale":
			span.SetStatus(codes.Error, "the run's claim was reaped before its outcome landed")
		}
	}
	span.End()
}

// errorType is a failed run's error.type (OpenTelemetry's class of the
// error): "lease_lost" for a run stopped as its lease lapsed, "timeout"
// past its deadline, else the Go type of the first error of its chain
// that is more than fmt.Errorf's wrapping (an *fs.PathError, say).
func errorType(outcome string, err error) string {
	switch {
	case outcome == "lost":
		return "lease_lost"
	case err == nil:
		return "_OTHER"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	for {
		t := fmt.Sprintf("%T", err)
		next := errors.Unwrap(err)
		if next == nil || t != "*fmt.wrapError" {
			return t
		}
		err = next
	}
}

func fail(span trace.Span, err error) {
	span.RecordError(err)
	msg := err.Error()
	if len(msg) > maxStatusBytes {
		cut := maxStatusBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	span.SetStatus(codes.Error, msg)
}

// common returns f of every job when it is the same for all, else "".
func common(jobs []Job, f func(Job) string) string {
	if len(jobs) == 0 {
		return ""
	}
	v := f(jobs[0])
	for _, j := range jobs[1:] {
		if f(j) != v {
			return ""
		}
	}
	return v
}
