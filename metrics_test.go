package bq_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// secret is a key value that must never reach a metric attribute.
const secret = "tenant-secret-42"

type metricArgs struct {
	Key  string
	Fail bool
}

func metricJob(_ context.Context, a metricArgs) error {
	if a.Fail {
		return errors.New("boom")
	}
	time.Sleep(20 * time.Millisecond)
	return nil
}

var (
	mBlock = bq.Define("metrics.block", metricJob, bq.JobOptions[metricArgs]{Queue: "metrics",
		MaxAttempts: 2, Backoff: func(int) time.Duration { return 0 },
		Concurrency: &bq.Concurrency[metricArgs]{Key: func(a metricArgs) string { return a.Key }}})
	mDiscard = bq.Define("metrics.discard", metricJob, bq.JobOptions[metricArgs]{Queue: "metrics",
		Concurrency: &bq.Concurrency[metricArgs]{Key: func(a metricArgs) string { return a.Key }, OnConflict: bq.Discard}})
	mReap  = bq.Define("metrics.reap", metricJob, bq.JobOptions[metricArgs]{Queue: "metrics-reap"})
	mPlain = bq.Define("metrics.plain", metricJob, bq.JobOptions[metricArgs]{Queue: "metrics"})
	mOnce  = bq.Define("metrics.once", metricJob, bq.JobOptions[metricArgs]{Queue: "metrics", MaxAttempts: 1})
)

// TestMetrics runs one job through each path and reads the instruments
// with the SDK's manual reader: every counter moves, the histograms and
// gauges report, and no attribute carries a key value.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	client, collect := meteredClient(t, bq.Config{
		Queues:       map[string]int{"metrics": 4, "metrics-reap": 1},
		PollInterval: 20 * time.Millisecond, DispatchInterval: 50 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, ProcessDeadAfter: time.Second,
	})
	var ids []int64
	enq := func(job *bq.Job[metricArgs], a metricArgs, opts ...bq.EnqueueOption) bq.EnqueueResult {
		t.Helper()
		res, err := job.Enqueue(ctx, client, a, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if res.State != bq.StateDiscarded {
			ids = append(ids, res.ID)
		}
		return res
	}
	enq(mBlock, metricArgs{Key: secret})
	if enq(mBlock, metricArgs{Key: secret}).State != bq.StateBlocked {
		t.Fatal("second job of a limit-1 key not blocked")
	}
	enq(mDiscard, metricArgs{Key: secret})
	if enq(mDiscard, metricArgs{Key: secret}).State != bq.StateDiscarded {
		t.Fatal("second job of a discarding key not discarded")
	}
	enq(mBlock, metricArgs{Key: secret + "-later"}, bq.In(100*time.Millisecond))
	failing := enq(mBlock, metricArgs{Key: secret + "-fail", Fail: true})
	lost := enq(mReap, metricArgs{})
	// A process that stopped heartbeating an hour ago claims one job: the
	// dispatcher reaps it.
	ex := driver.ClientEngine(client).Exec()
	dead, err := ex.ProcessRegister(ctx, driver.Process{Kind: "worker", Name: "dead", Hostname: "h", PID: 1,
		HeartbeatInterval: time.Second, StartedAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if claims, err := lifecycle.Claim(ctx, driver.ClientEngine(client), driver.ClaimParams{Queue: "metrics-reap", Max: 1, ProcessID: dead,
		Now: time.Now()}); err != nil || len(claims) != 1 || claims[0].ID != lost.ID {
		t.Fatalf("claim for the dead process: %v %v", claims, err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- client.Run(runCtx) }()
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range ids {
		want := bq.StateCompleted
		if id == failing.ID {
			want = bq.StateFailed
		}
		for {
			info, err := client.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if info.State == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d (%s) is %s, want %s", id, info.Kind, info.State, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	got := collect()
	for _, c := range []struct {
		name, attrs string
		min         int64
	}{
		{"bq.jobs.enqueued", "state=ready", 3},
		{"bq.jobs.enqueued", "state=blocked", 1},
		{"bq.jobs.enqueued", "state=scheduled", 1},
		{"bq.jobs.enqueued", "state=discarded", 1},
		{"bq.jobs.blocked", "group=metrics.block", 1},
		{"bq.jobs.discarded", "group=metrics.discard", 1},
		{"bq.jobs.promoted", "from=blocked", 1},
		{"bq.jobs.promoted", "from=scheduled", 1},
		{"bq.jobs.completed", "kind=metrics.block", 3},
		{"bq.jobs.retried", "kind=metrics.block", 1},
		{"bq.jobs.failed", "kind=metrics.block", 1},
		{"bq.jobs.reaped", "state=ready", 1},
		{"bq.job.queue_wait", "queue=metrics", 1},
		{"bq.job.run_duration", "outcome=completed", 4},
		{"bq.job.run_duration", "outcome=failed", 1},
		{"bq.queue.jobs", "state=failed", 1},
		{"bq.group.active", "group=metrics.block", 0},
	} {
		if n, ok := got.sum(c.name, c.attrs); !ok || n < c.min {
			t.Errorf("%s{%s} = %d (reported: %v), want at least %d", c.name, c.attrs, n, ok, c.min)
		}
	}
	for _, p := range got {
		for _, kv := range p.attrs {
			if kv.Key == "key" || strings.Contains(kv.Value.String(), secret) {
				t.Errorf("%s carries a key value in attribute %s=%q", p.name, kv.Key, kv.Value.String())
			}
		}
	}
}

// meteredClient opens a migrated SQLite client with cfg, its meter
// provider and logger replaced, closed when the test ends; collect reads
// what its instruments reported so far.
func meteredClient(t *testing.T, cfg bq.Config) (c *bq.Client, collect func() points) {
	t.Helper()
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := bq.Open(ctx, "sqlite://"+t.TempDir()+"/metrics.db", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return c, func() points {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		return readMetrics(t, rm)
	}
}

// point is one data point: its metric, attributes and value (a sum, a
// gauge's value, or a histogram's count).
type point struct {
	name  string
	attrs []attribute.KeyValue
	value int64
}

type points []point

func readMetrics(t *testing.T, rm metricdata.ResourceMetrics) points {
	var out points
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes.ToSlice(), dp.Value})
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes.ToSlice(), dp.Value})
				}
			case metricdata.Gauge[float64]: // in thousandths
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes.ToSlice(), int64(dp.Value*1000 + 0.5)})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes.ToSlice(), int64(dp.Count)})
				}
			default:
				t.Errorf("metric %s has unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// sum adds the values of name's points that carry the attribute k=v, and
// reports whether there was one.
func (ps points) sum(name, kv string) (int64, bool) {
	k, v, _ := strings.Cut(kv, "=")
	var n int64
	found := false
	for _, p := range ps {
		if p.name != name {
			continue
		}
		for _, a := range p.attrs {
			if string(a.Key) == k && a.Value.String() == v {
				n += p.value
				found = true
			}
		}
	}
	return n, found
}

// TestQueueGaugeReportsADrainedQueue: a queue whose jobs all finished is
// reported with zeros, not left out (a gauge that stops reporting reads
// as "no data" in Prometheus, not 0).
func TestQueueGaugeReportsADrainedQueue(t *testing.T) {
	ctx := context.Background()
	client, collect := meteredClient(t, bq.Config{Queues: map[string]int{"metrics-reap": 1},
		PollInterval: 20 * time.Millisecond, DispatchInterval: 50 * time.Millisecond, Retention: bq.NoRetention})
	res, err := mReap.Enqueue(ctx, client, metricArgs{})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := collect().sum("bq.queue.jobs", "state=ready"); !ok || n != 1 {
		t.Fatalf("bq.queue.jobs{state=ready} = %d (reported %v), want 1", n, ok)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- client.Run(runCtx) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := client.Job(ctx, res.ID); errors.Is(err, bq.ErrJobNotFound) {
			break // completed and deleted
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not complete")
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, ok := collect().sum("bq.queue.jobs", "state=ready"); !ok || n != 0 {
		t.Errorf("bq.queue.jobs{state=ready} of the drained queue = %d (reported %v), want 0 reported", n, ok)
	}
}

// TestFairShareGauges: a fair-share queue reports its keys with work and
// Jain's index of their running jobs against their shares, by queue
// alone (no key in any attribute).
func TestFairShareGauges(t *testing.T) {
	ctx := context.Background()
	client, collect := meteredClient(t, bq.Config{})
	if err := client.SyncPolicies(ctx, "metrics", []bq.Policy{{Queue: "metrics", FairShare: true}}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{secret, secret, "other"} {
		if _, err := mBlock.Enqueue(ctx, client, metricArgs{Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	ps := collect()
	if n, ok := ps.sum("bq.fair_share.keys", "queue=metrics"); !ok || n != 2 {
		t.Errorf("bq.fair_share.keys{queue=metrics} = %d (reported %v), want 2", n, ok)
	}
	// Nothing runs: every key is at its share of nothing.
	if n, ok := ps.sum("bq.fair_share.index", "queue=metrics"); !ok || n != 1000 {
		t.Errorf("bq.fair_share.index{queue=metrics} = %d/1000 (reported %v), want 1", n, ok)
	}
	for _, p := range ps {
		for _, a := range p.attrs {
			if strings.Contains(a.Value.String(), secret) {
				t.Errorf("%s carries the key in %s", p.name, a.Key)
			}
		}
	}
}

// TestMessagingMetrics: with Config.MessagingMetrics, OpenTelemetry's
// messaging conventions are reported beside bq's own (sent per job
// stored, consumed per claim, process per run, error.type on a failed
// one); without it, none is.
func TestMessagingMetrics(t *testing.T) {
	ctx := context.Background()
	for _, on := range []bool{true, false} {
		client, collect := meteredClient(t, bq.Config{Queues: map[string]int{"metrics": 2}, MessagingMetrics: on,
			PollInterval: 20 * time.Millisecond, DispatchInterval: 50 * time.Millisecond})
		ok, err := mOnce.Enqueue(ctx, client, metricArgs{})
		if err != nil {
			t.Fatal(err)
		}
		bad, err := mOnce.Enqueue(ctx, client, metricArgs{Fail: true})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- client.Run(runCtx) }()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			a, errA := client.Job(ctx, ok.ID)
			b, errB := client.Job(ctx, bad.ID)
			if errA == nil && errB == nil && a.State == bq.StateCompleted && b.State == bq.StateFailed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the jobs did not finish")
			}
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := collect()
		for _, c := range []struct {
			name, attrs string
			want        int64
		}{
			{"messaging.client.sent.messages", "messaging.destination.name=metrics", 2},
			{"messaging.client.consumed.messages", "messaging.system=bq", 2},
			{"messaging.process.duration", "messaging.operation.name=process", 2},
			{"messaging.process.duration", "error.type=failed", 1},
		} {
			n, reported := got.sum(c.name, c.attrs)
			if on && (!reported || n != c.want) {
				t.Errorf("%s{%s} = %d (reported %v), want %d", c.name, c.attrs, n, reported, c.want)
			}
			if !on && reported {
				t.Errorf("%s reported without MessagingMetrics", c.name)
			}
		}
	}
}
