// Package metrics holds bq's OpenTelemetry instruments. It uses the
// metric API only; the application brings the SDK and exporter.
//
// Attributes are the queue, the job kind and the limit group (the part of
// a concurrency key before its first "/"), never a key itself: keys are
// unbounded in number and may carry private values.
package metrics

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/bqueue/bq/internal/driver"
)

// Scope is the instrumentation scope of every bq instrument.
const Scope = "github.com/bqueue/bq"

// Instrument names; docs/observability.md describes each.
const (
	Enqueued    = "bq.jobs.enqueued"
	Blocked     = "bq.jobs.blocked"
	Discarded   = "bq.jobs.discarded"
	Promoted    = "bq.jobs.promoted"
	Completed   = "bq.jobs.completed"
	Failed      = "bq.jobs.failed"
	Retried     = "bq.jobs.retried"
	Reaped      = "bq.jobs.reaped"
	Snoozed     = "bq.jobs.snoozed"
	Throttled   = "bq.jobs.throttled"
	Cancelled   = "bq.jobs.cancelled"
	QueueWait   = "bq.job.queue_wait"
	RunDuration = "bq.job.run_duration"

	// OpenTelemetry's messaging semantic conventions, reported beside
	// bq's own when New is asked for them.
	MessagingSent     = "messaging.client.sent.messages"
	MessagingConsumed = "messaging.client.consumed.messages"
	MessagingProcess  = "messaging.process.duration"

	QueueJobs     = "bq.queue.jobs"
	GroupActive   = "bq.group.active"
	GroupBlocked  = "bq.group.blocked"
	SaturatedKeys = "bq.group.saturated_keys"
	AdaptedKeys   = "bq.group.adapted_keys"
	RateWaiting   = "bq.rate.waiting"
	ThrottledKeys = "bq.rate.throttled_keys"
	AdaptedRates  = "bq.rate.adapted_keys"
	FairKeys      = "bq.fair_share.keys"
	FairIndex     = "bq.fair_share.index"
)

// Job is what an event's attributes are made of. Key is used only to
// derive the group.
type Job struct {
	Queue, Kind, Key string
}

// JobOf returns the attributes source of a stored job.
func JobOf(j *driver.Job) Job { return Job{Queue: j.Queue, Kind: j.Kind, Key: j.Limit.Key} }

// attrKey names one attribute set: a job's queue, kind and group, and at
// most one extra attribute.
type attrKey struct{ queue, kind, group, extraKey, extraValue string }

// attrCache keeps each attribute set built once: building one hashes its
// attributes, which on every job was a sixth of a worker's CPU. The sets
// are few (queues x kinds x groups x states), never raw keys.
var attrCache sync.Map // attrKey -> metric.MeasurementOption

func (j Job) attrs(extra ...attribute.KeyValue) metric.MeasurementOption {
	if len(extra) > 1 {
		return j.buildAttrs(extra...)
	}
	k := attrKey{queue: j.Queue, kind: j.Kind, group: driver.GroupOf(j.Key)}
	if len(extra) == 1 {
		k.extraKey, k.extraValue = string(extra[0].Key), extra[0].Value.String()
	}
	if opt, ok := attrCache.Load(k); ok {
		return opt.(metric.MeasurementOption)
	}
	opt := j.buildAttrs(extra...)
	attrCache.Store(k, opt)
	return opt
}

func (j Job) buildAttrs(extra ...attribute.KeyValue) metric.MeasurementOption {
	kv := make([]attribute.KeyValue, 0, 3+len(extra))
	kv = append(kv, attribute.String("queue", j.Queue), attribute.String("kind", j.Kind))
	if j.Key != "" {
		kv = append(kv, attribute.String("group", driver.GroupOf(j.Key)))
	}
	return metric.WithAttributeSet(attribute.NewSet(append(kv, extra...)...))
}

// Instruments are bq's counters and histograms on one MeterProvider.
type Instruments struct {
	meter                                  metric.Meter
	enqueued, blocked, discarded, promoted metric.Int64Counter
	completed, failed, retried, reaped     metric.Int64Counter
	snoozed, cancelled, throttled          metric.Int64Counter
	queueWait, runDuration                 metric.Float64Histogram
	// The messaging conventions' instruments; nil unless asked for.
	msgSent, msgConsumed metric.Int64Counter
	msgProcess           metric.Float64Histogram
}

// New creates the instruments on mp; with messaging, also OpenTelemetry's
// messaging semantic-convention instruments (messaging.system "bq", the
// queue as messaging.destination.name).
func New(mp metric.MeterProvider, messaging bool) (*Instruments, error) {
	m := &Instruments{meter: mp.Meter(Scope)}
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := m.meter.Int64Counter(name, metric.WithUnit("{job}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600))
		errs = append(errs, err)
		return h
	}
	m.enqueued = counter(Enqueued, "Jobs handed to Enqueue, by the state admission gave them (ready, blocked, scheduled, discarded).")
	m.blocked = counter(Blocked, "Jobs that went to wait for a slot of their concurrency key.")
	m.discarded = counter(Discarded, "Jobs dropped because their key had no free slot, or discarded by hand.")
	m.promoted = counter(Promoted, "Jobs made ready: from=blocked as a slot freed, from=scheduled as they came due.")
	m.completed = counter(Completed, "Jobs that ran to success.")
	m.failed = counter(Failed, "Jobs moved to failed: attempts spent or a permanent error.")
	m.retried = counter(Retried, "Failed attempts that will run again, and failed jobs retried by hand.")
	m.reaped = counter(Reaped, "Claims of lost processes returned to ready, failed or (a cancel requested) cancelled by the dispatcher.")
	m.snoozed = counter(Snoozed, "Runs that ended with bq.Snooze: rescheduled, their attempt not spent.")
	m.throttled = counter(Throttled, "Runs that ended with bq.Throttled: rescheduled, their attempt not spent; lowered=true when their key's adaptive limit fell, rate_lowered=true when their adaptive rate did.")
	m.cancelled = counter(Cancelled, "Jobs finished as cancelled: by client.Cancel (from=client) or by their own bq.Cancel (from=job).")
	m.queueWait = histogram(QueueWait, "Time from a job's due time to its first claim.")
	m.runDuration = histogram(RunDuration, "Time one run of a job took.")
	if messaging {
		msg := func(name, desc string) metric.Int64Counter {
			c, err := m.meter.Int64Counter(name, metric.WithUnit("{message}"), metric.WithDescription(desc))
			errs = append(errs, err)
			return c
		}
		m.msgSent = msg(MessagingSent, "Messages (jobs) a producer sent: every job admission stored.")
		m.msgConsumed = msg(MessagingConsumed, "Messages (jobs) a consumer received: every claim of a job.")
		h, err := m.meter.Float64Histogram(MessagingProcess, metric.WithUnit("s"),
			metric.WithDescription("Duration of processing a message: one run of a job."),
			metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10))
		errs = append(errs, err)
		m.msgProcess = h
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Enqueue counts one enqueued job and what admission did with it.
func (m *Instruments) Enqueue(ctx context.Context, j Job, state driver.JobState) {
	m.enqueued.Add(ctx, 1, j.attrs(attribute.String("state", string(state))))
	m.Admitted(ctx, j, state)
	if m.msgSent != nil && state != driver.StateDiscarded {
		m.msgSent.Add(ctx, 1, messagingAttrs(j.Queue, "send", ""))
	}
}

// Claimed counts one claim of a job (the messaging conventions'
// consumed message).
func (m *Instruments) Claimed(ctx context.Context, j Job) {
	if m.msgConsumed != nil {
		m.msgConsumed.Add(ctx, 1, messagingAttrs(j.Queue, "receive", ""))
	}
}

// messagingAttrs are the messaging conventions' attributes of one
// operation on queue; errorType is set for a failed process.
func messagingAttrs(queue, operation, errorType string) metric.MeasurementOption {
	kv := []attribute.KeyValue{attribute.String("messaging.system", "bq"),
		attribute.String("messaging.destination.name", queue), attribute.String("messaging.operation.name", operation)}
	if errorType != "" {
		kv = append(kv, attribute.String("error.type", errorType))
	}
	return metric.WithAttributes(kv...)
}

// Admitted counts a job that went through admission into state: blocked
// and discarded are counted; ready is counted by the caller as it knows
// whether that was a promotion.
func (m *Instruments) Admitted(ctx context.Context, j Job, state driver.JobState) {
	switch state {
	case driver.StateBlocked:
		m.blocked.Add(ctx, 1, j.attrs())
	case driver.StateDiscarded:
		m.discarded.Add(ctx, 1, j.attrs())
	}
}

// PromotedScheduled counts a due scheduled job made ready.
func (m *Instruments) PromotedScheduled(ctx context.Context, j Job) {
	m.promoted.Add(ctx, 1, j.attrs(attribute.String("from", "scheduled")))
}

// PromotedBlocked counts n blocked jobs of key made ready. The blocked
// rows' queues and kinds are not read back, so only the group is known.
func (m *Instruments) PromotedBlocked(ctx context.Context, key string, n int) {
	if n <= 0 {
		return
	}
	m.promoted.Add(ctx, int64(n), metric.WithAttributes(
		attribute.String("from", "blocked"), attribute.String("group", driver.GroupOf(key))))
}

// Ran records one run's duration and how it ended: completed, snoozed,
// retried, failed, cancelled, or returned (cut short by shutdown).
func (m *Instruments) Ran(ctx context.Context, j Job, seconds float64, outcome string) {
	m.runDuration.Record(ctx, seconds, j.attrs(attribute.String("outcome", outcome)))
	if m.msgProcess != nil {
		errType := ""
		switch outcome {
		case "failed", "retried", "lost", "unrecorded", "stale":
			errType = outcome
		}
		m.msgProcess.Record(ctx, seconds, messagingAttrs(j.Queue, "process", errType))
	}
}

// Waited records a first claim's time in line.
func (m *Instruments) Waited(ctx context.Context, j Job, seconds float64) {
	m.queueWait.Record(ctx, seconds, j.attrs())
}

// Finished counts a run's recorded end by the job's new state: completed,
// failed, or retried (scheduled, or admitted again at once).
func (m *Instruments) Finished(ctx context.Context, j Job, state driver.JobState) {
	switch state {
	case driver.StateCompleted:
		m.completed.Add(ctx, 1, j.attrs())
	case driver.StateFailed:
		m.failed.Add(ctx, 1, j.attrs())
	case driver.StateScheduled:
		m.retried.Add(ctx, 1, j.attrs())
	case driver.StateReady, driver.StateBlocked, driver.StateDiscarded:
		m.retried.Add(ctx, 1, j.attrs())
		m.Admitted(ctx, j, state)
	}
}

// Snoozed counts a run that ended with bq.Snooze.
func (m *Instruments) Snoozed(ctx context.Context, j Job) {
	m.snoozed.Add(ctx, 1, j.attrs())
}

// Throttled counts a run that ended with bq.Throttled; lowered: its
// key's adaptive limit fell; rateLowered: its adaptive rate fell.
func (m *Instruments) Throttled(ctx context.Context, j Job, lowered, rateLowered bool) {
	m.throttled.Add(ctx, 1, j.attrs(attribute.Bool("lowered", lowered), attribute.Bool("rate_lowered", rateLowered)))
}

// Cancelled counts a job finished as cancelled; from says who asked:
// "client" (client.Cancel, ending at once or as its run ends) or "job"
// (its own bq.Cancel).
func (m *Instruments) Cancelled(ctx context.Context, j Job, from string) {
	m.cancelled.Add(ctx, 1, j.attrs(attribute.String("from", from)))
}

// RetriedByHand counts a failed job retried by hand and its admission.
func (m *Instruments) RetriedByHand(ctx context.Context, j Job, state driver.JobState) {
	m.retried.Add(ctx, 1, j.attrs())
	m.Admitted(ctx, j, state)
}

// DiscardedByHand counts a failed job discarded by hand.
func (m *Instruments) DiscardedByHand(ctx context.Context, j Job) {
	m.discarded.Add(ctx, 1, j.attrs())
}

// Reap counts a lost claim returned to ready, failed, or (marked by a
// cancel) cancelled.
func (m *Instruments) Reap(ctx context.Context, j Job, state driver.JobState) {
	m.reaped.Add(ctx, 1, j.attrs(attribute.String("state", string(state))))
	switch state {
	case driver.StateFailed:
		m.failed.Add(ctx, 1, j.attrs())
	case driver.StateCancelled: // a cancel marked it before its process died
		m.Cancelled(ctx, j, "client")
	}
}
