package metrics

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/bqueue/bq/internal/driver"
)

// Snapshot is what the gauges report at one collection.
type Snapshot struct {
	Queues []driver.QueueCounts
	Groups []driver.GroupStats
	Rates  []driver.RateGroupStats
	Fair   []FairQueue
	// Adapted counts, by limit group, the keys whose adaptive limit
	// throttles lowered; AdaptedRates, by rate group, the rate keys whose
	// adaptive rate they lowered.
	Adapted, AdaptedRates map[string]int
}

// FairQueue is how a fair-share queue shares its slots, with no key
// named: how many keys have work, and Jain's fairness index of their
// running jobs against their weighted shares (1: each key runs its
// share; 1/Keys: one key runs everything).
type FairQueue struct {
	Queue string
	Keys  int
	Index float64
}

// ObserveGauges registers the gauges of jobs per queue and state and of
// each limit group, all fed by one call of read per collection. Call the
// returned function to unregister.
func (m *Instruments) ObserveGauges(read func(ctx context.Context) (Snapshot, error)) (unregister func() error, err error) {
	queueJobs, err := m.meter.Int64ObservableGauge(QueueJobs, metric.WithUnit("{job}"),
		metric.WithDescription("Jobs of a queue in each live state (ready, running, scheduled, blocked, failed)."))
	if err != nil {
		return nil, err
	}
	active, err := m.meter.Int64ObservableGauge(GroupActive, metric.WithUnit("{job}"),
		metric.WithDescription("Slots held (ready and running jobs) over a limit group's keys."))
	if err != nil {
		return nil, err
	}
	blocked, err := m.meter.Int64ObservableGauge(GroupBlocked, metric.WithUnit("{job}"),
		metric.WithDescription("Jobs waiting for a slot of one of a limit group's keys."))
	if err != nil {
		return nil, err
	}
	saturated, err := m.meter.Int64ObservableGauge(SaturatedKeys, metric.WithUnit("{key}"),
		metric.WithDescription("Keys of a limit group with no free slot."))
	if err != nil {
		return nil, err
	}
	rateWaiting, err := m.meter.Int64ObservableGauge(RateWaiting, metric.WithUnit("{job}"),
		metric.WithDescription("Jobs waiting for a start of one of a rate group's keys (throttled by its rate)."))
	if err != nil {
		return nil, err
	}
	throttled, err := m.meter.Int64ObservableGauge(ThrottledKeys, metric.WithUnit("{key}"),
		metric.WithDescription("Rate keys of a group with jobs waiting for a start."))
	if err != nil {
		return nil, err
	}
	fairKeys, err := m.meter.Int64ObservableGauge(FairKeys, metric.WithUnit("{key}"),
		metric.WithDescription("Keys of a fair-share queue with jobs ready or running."))
	if err != nil {
		return nil, err
	}
	fairIndex, err := m.meter.Float64ObservableGauge(FairIndex, metric.WithUnit("1"),
		metric.WithDescription("Jain's fairness index of a fair-share queue's running jobs against its keys' weighted shares: 1 is every key at its share."))
	if err != nil {
		return nil, err
	}
	adapted, err := m.meter.Int64ObservableGauge(AdaptedKeys, metric.WithUnit("{key}"),
		metric.WithDescription("Keys of a limit group whose adaptive limit throttled runs lowered (bq.Adaptive)."))
	if err != nil {
		return nil, err
	}
	adaptedRates, err := m.meter.Int64ObservableGauge(AdaptedRates, metric.WithUnit("{key}"),
		metric.WithDescription("Rate keys of a group whose adaptive rate throttled runs lowered (bq.Rate's Adaptive)."))
	if err != nil {
		return nil, err
	}
	// Queues seen at an earlier collection, each reported with zeros
	// once it drains (a queue with no live job is in no count): a gauge
	// that stops reporting reads as "no data", not 0.
	seen := map[string]bool{}
	var seenMu sync.Mutex
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		snap, err := read(ctx)
		if err != nil {
			return err
		}
		seenMu.Lock()
		now := map[string]bool{}
		for _, q := range snap.Queues {
			now[q.Queue] = true
		}
		for q := range seen {
			if !now[q] {
				snap.Queues = append(snap.Queues, driver.QueueCounts{Queue: q})
			}
		}
		for q := range now {
			seen[q] = true
		}
		seenMu.Unlock()
		for _, q := range snap.Queues {
			for state, n := range map[driver.JobState]int{
				driver.StateReady: q.Ready, driver.StateRunning: q.Running, driver.StateScheduled: q.Scheduled,
				driver.StateBlocked: q.Blocked, driver.StateFailed: q.Failed,
			} {
				o.ObserveInt64(queueJobs, int64(n), metric.WithAttributes(
					attribute.String("queue", q.Queue), attribute.String("state", string(state))))
			}
		}
		for _, g := range snap.Groups {
			attrs := metric.WithAttributes(attribute.String("group", g.Group))
			o.ObserveInt64(active, int64(g.Active), attrs)
			o.ObserveInt64(blocked, int64(g.Blocked), attrs)
			o.ObserveInt64(saturated, int64(g.Saturated), attrs)
		}
		for _, g := range snap.Rates {
			attrs := metric.WithAttributes(attribute.String("group", g.Group))
			o.ObserveInt64(rateWaiting, int64(g.Waiting), attrs)
			o.ObserveInt64(throttled, int64(g.Throttled), attrs)
		}
		for _, f := range snap.Fair {
			attrs := metric.WithAttributes(attribute.String("queue", f.Queue))
			o.ObserveInt64(fairKeys, int64(f.Keys), attrs)
			o.ObserveFloat64(fairIndex, f.Index, attrs)
		}
		for g, n := range snap.Adapted {
			o.ObserveInt64(adapted, int64(n), metric.WithAttributes(attribute.String("group", g)))
		}
		for g, n := range snap.AdaptedRates {
			o.ObserveInt64(adaptedRates, int64(n), metric.WithAttributes(attribute.String("group", g)))
		}
		return nil
	}, queueJobs, active, blocked, saturated, rateWaiting, throttled, fairKeys, fairIndex, adapted, adaptedRates)
	if err != nil {
		return nil, err
	}
	return reg.Unregister, nil
}
