package conformance

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/testdb"
)

// pgbouncerScenarios are the scenarios TestConformancePgBouncer runs
// through PgBouncer in transaction mode: what a pooler that hands each
// transaction a server connection of its choosing could break. Admission
// and release of keyed jobs under concurrency from several clients and
// processes, claim and completion, a worker woken by a notification (the
// listener on listen_dsn, straight to PostgreSQL, hearing NOTIFYs sent
// through the pooler, from Notify and from inside the caller's
// transaction), unique jobs (advisory transaction locks), and migrations
// racing under the migration lock.
var pgbouncerScenarios = []string{
	"PromotionOrder",
	"Discard",
	"DoubleCompletionReleasesOnce",
	"EnqueueTimeKeysAcrossProcesses",
	"OverlapAcrossProcesses",
	"MultiKeyAcrossProcesses",
	"RetryThenFail",
	"OtherProcessesWakeWithoutPolling",
	"BatchTxWakesEachQueueAtCommit",
	"UniqueConcurrentProcesses",
	"MigrationsAtOnce",
}

// TestConformancePgBouncer runs pgbouncerScenarios against PostgreSQL
// through a PgBouncer of its own in transaction mode (testdb.PgBouncer),
// each on a schema of its own, with bq.Open's DSN naming the bouncer and
// listen_dsn the server. It runs wherever PostgreSQL is selected
// (BQ_TEST_DRIVERS); without pgbouncer it fails, naming the script that
// installs it.
func TestConformancePgBouncer(t *testing.T) {
	testdb.Require(t, testdb.Postgres)
	byName := map[string]scenario{}
	for _, s := range scenarios {
		byName[s.name] = s
	}
	b := testdb.PrivatePgBouncer(t)
	// The harness's name: scenarios spell their SQL for PostgreSQL.
	db := database{name: testdb.Postgres, fresh: func(t *testing.T) string { return b.FreshPostgres(t, true) }}
	for _, name := range pgbouncerScenarios {
		s, ok := byName[name]
		if !ok {
			t.Errorf("no scenario %q in the suite: update pgbouncerScenarios", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s.fn(t, newHarness(t, db))
		})
	}
}

// TestPgBouncerWithoutListenDSN: through PgBouncer in transaction mode
// without listen_dsn, a worker's listener hears nothing; the client logs
// one warning naming the bouncer and listen_dsn, and its workers still
// run what another client enqueues, found by polling.
func TestPgBouncerWithoutListenDSN(t *testing.T) {
	testdb.Require(t, testdb.Postgres)
	b := testdb.PrivatePgBouncer(t)
	h := newHarness(t, database{name: testdb.Postgres, fresh: func(t *testing.T) string { return b.FreshPostgres(t, false) }})
	warnings := &warnLog{}
	cfg := testConfig()
	cfg.Logger = slog.New(warnings)
	cfg.PollInterval = 200 * time.Millisecond
	h.run(h.clientWith(cfg))
	res := enqueue(t, h, unkeyedJob, Args{}) // by h.client, another process
	h.waitState(res.ID, bq.StateCompleted)

	want := "notifications through 127.0.0.1:" + strconv.Itoa(b.Port) + " are not delivered"
	h.eventually(20*time.Second, "the warning of a listener that hears nothing", func() bool { return warnings.count(want) > 0 })
	time.Sleep(time.Second)
	if n := warnings.count(want); n != 1 {
		t.Errorf("the warning was logged %d times, want once", n)
	}
	if !warnings.has("listen_dsn=postgres://host:5432") {
		t.Errorf("the warning does not name the fix, listen_dsn: %q", warnings.all())
	}
	if warnings.has("database calls are failing") {
		t.Errorf("a listener that hears nothing was logged as an outage: %q", warnings.all())
	}
}

// warnLog keeps the messages of warnings and errors.
type warnLog struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnLog) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnLog) WithGroup(string) slog.Handler                { return w }
func (w *warnLog) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}

func (w *warnLog) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

func (w *warnLog) count(sub string) int {
	n := 0
	for _, m := range w.all() {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

func (w *warnLog) has(sub string) bool { return w.count(sub) > 0 }
