package bq

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type trapArgs struct{ Tenant, Region string }

func trapNoop(context.Context, trapArgs) error { return nil }

func tenantOf(a trapArgs) string { return a.Tenant }

// field returns a key func reading one field: closures of one literal,
// each with a field of its own.
func field(name string) func(trapArgs) string {
	return func(a trapArgs) string {
		if name == "region" {
			return a.Region
		}
		return a.Tenant
	}
}

// Two limits of one kind with the same Group and the same Key func name
// the same key on every job, so every enqueue would be refused: Define
// refuses the kind instead. Closures of one literal with captures of
// their own, or another Group, are different keys and pass.
func TestDefineSameKeyTwice(t *testing.T) {
	shared := field("tenant")
	for _, tc := range []struct {
		name string
		opts JobOptions[trapArgs]
		want string // "" for valid
	}{
		{"one func", JobOptions[trapArgs]{Concurrency: &Concurrency[trapArgs]{Key: tenantOf, To: 2},
			MoreConcurrency: []Concurrency[trapArgs]{{Key: tenantOf, To: 5}}},
			`Concurrency and MoreConcurrency[0] have the same Group ("traps.one-func") and the same Key func: every job would name one key twice and be refused; give one of them a Group of its own (e.g. Group: "tenant") or another Key`},
		{"one closure", JobOptions[trapArgs]{MoreConcurrency: []Concurrency[trapArgs]{{Key: shared, To: 2, Group: "g"}, {Key: shared, To: 5, Group: "g"}}},
			`MoreConcurrency[0] and MoreConcurrency[1] have the same Group ("g") and the same Key func`},
		{"other groups", JobOptions[trapArgs]{Concurrency: &Concurrency[trapArgs]{Key: tenantOf, To: 2},
			MoreConcurrency: []Concurrency[trapArgs]{{Key: tenantOf, To: 5, Group: "tenant-wide"}}}, ""},
		{"closures of one literal", JobOptions[trapArgs]{Concurrency: &Concurrency[trapArgs]{Key: field("tenant"), To: 2},
			MoreConcurrency: []Concurrency[trapArgs]{{Key: field("region"), To: 5}}}, ""},
	} {
		j := Define("traps."+strings.ReplaceAll(tc.name, " ", "-"), trapNoop, tc.opts)
		switch err := j.Err(); {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalidJob saying %q", tc.name, err, tc.want)
		}
	}
}

// RequireKey refuses a job whose key for the limit is empty, which would
// otherwise run without it; without RequireKey an empty key still means
// no limit.
func TestRequireKey(t *testing.T) {
	ctx := context.Background()
	c := openMemory(t)
	strict := Define("traps.require-key", trapNoop, JobOptions[trapArgs]{
		Concurrency:     &Concurrency[trapArgs]{Key: tenantOf, To: 2, RequireKey: true},
		MoreConcurrency: []Concurrency[trapArgs]{{Key: field("region"), To: 5, Group: "region", RequireKey: true}},
		Rate:            &Rate[trapArgs]{Key: tenantOf, Limit: 10, Period: time.Second, Group: "api", RequireKey: true},
	})
	if err := strict.Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args trapArgs
		opts []EnqueueOption
		want string // "" for accepted
	}{
		{"every key", trapArgs{Tenant: "acme", Region: "eu"}, nil, ""},
		{"no tenant", trapArgs{Region: "eu"}, nil,
			`Concurrency.Key returned an empty key and Concurrency.RequireKey is set: the job would run without the limit; return the key to limit by, or leave RequireKey unset for such jobs to run unlimited`},
		{"no region", trapArgs{Tenant: "acme"}, nil, `MoreConcurrency[0].Key returned an empty key and MoreConcurrency[0].RequireKey is set`},
		{"empty WithConcurrencyKey", trapArgs{Tenant: "acme", Region: "eu"}, []EnqueueOption{WithConcurrencyKey("", 2)},
			`WithConcurrencyKey gave an empty key and Concurrency.RequireKey is set`},
		{"empty WithRateKey", trapArgs{Tenant: "acme", Region: "eu"}, []EnqueueOption{WithRateKey("", 0, 0)},
			`WithRateKey gave an empty key and Rate.RequireKey is set`},
	} {
		_, err := strict.Enqueue(ctx, c, tc.args, tc.opts...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalidJob saying %q", tc.name, err, tc.want)
		}
	}
	lax := Define("traps.lax-key", trapNoop, JobOptions[trapArgs]{Concurrency: &Concurrency[trapArgs]{Key: tenantOf, To: 2}})
	if res, err := lax.Enqueue(ctx, c, trapArgs{}); err != nil || res.State != StateReady {
		t.Errorf("an empty key without RequireKey: %+v, %v; want it ready, unlimited", res, err)
	}
}

// logLines is a logger's output, safe to read while it writes.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

var unworked = Define("traps.unworked", trapNoop, JobOptions[trapArgs]{Queue: "traps-unworked"})

// Run with Config.Queues warns, at its start and in one line, of each
// queue of a job defined in this process that the process does not work:
// its jobs wait for another process.
func TestRunWarnsOfUnworkedQueues(t *testing.T) {
	for _, tc := range []struct {
		queues map[string]int
		warn   bool
	}{
		{map[string]int{"traps-worked": 1}, true},
		{map[string]int{"traps-worked": 1, "traps-unworked": 1}, false},
		{nil, false}, // every defined queue is worked
	} {
		var log logLines
		c := openMemoryWith(t, Config{Queues: tc.queues, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Run(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		const want = `msg="Config.Queues leaves out queues of jobs defined in this process: it runs none of their jobs, which wait for a process that works their queue" queues="`
		said := log.String()
		if got := strings.Contains(said, want) && strings.Contains(said, "traps-unworked (traps.unworked)"); got != tc.warn {
			t.Errorf("Run with Config.Queues %v: warned of traps-unworked %v, want %v; the log:\n%s", tc.queues, got, tc.warn, said)
		}
		if strings.Contains(said, "traps-worked (") {
			t.Errorf("Run with Config.Queues %v warned of a queue it works:\n%s", tc.queues, said)
		}
		if strings.Count(said, "level=WARN") > 1 {
			t.Errorf("Run warned in more than one line:\n%s", said)
		}
	}
}

// PauseQueue of a queue that no job defined in this process and no
// stored job uses pauses it (ahead of its first job) and warns: the name
// may be a typo.
func TestPauseQueueWarnsOfUnusedQueue(t *testing.T) {
	ctx := context.Background()
	var log logLines
	c := openMemoryWith(t, Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if _, err := unworked.Enqueue(ctx, c, trapArgs{}, Queue("traps-stored")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		queue string
		warn  bool
	}{
		{"traps-unworked", false}, // a defined job's queue
		{"traps-stored", false},   // a stored job's
		{"traps-unwroked", true},
	} {
		before := log.String()
		if err := c.PauseQueue(ctx, tc.queue); err != nil {
			t.Fatal(err)
		}
		said := strings.TrimPrefix(log.String(), before)
		want := `msg="PauseQueue(\"` + tc.queue + `\"): no job kind defined in this process and no stored job uses the queue; it is paused anyway, ahead of its first job: check the name if you meant another queue" queue=` + tc.queue
		if got := strings.Contains(said, want); got != tc.warn {
			t.Errorf("PauseQueue(%q): warned %v, want %v; the log: %s", tc.queue, got, tc.warn, said)
		}
	}
	paused, err := c.PausedQueues(ctx)
	if err != nil || len(paused) != 3 {
		t.Errorf("PausedQueues: %v, %v; want all three paused", paused, err)
	}
}
