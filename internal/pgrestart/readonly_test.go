package pgrestart

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/drivers/sqlite"
	"github.com/bqueue/bq/internal/testdb"
)

// The read-only tests turn a server of the test's own read-only under a
// running fleet, for longer than ProcessDeadAfter, then writable again,
// and check what bq promises (issue 36, item 4): the cause is logged once
// per process (as for an outage), not per failed call; enqueues are
// refused with ErrReadOnly and store nothing; nothing accepted is lost or
// run twice, no key runs more than its limit at once; and work resumes by
// itself, without a restart, as soon as writes work again.

// roArgs are the args of roJob: N numbers each enqueue attempt. A Long
// job's first run lasts until its context ends.
type roArgs struct {
	Key  string
	N    int
	Long bool `json:",omitempty"`
}

// roRun is one run of roJob, as the job saw it.
type roRun struct {
	n          int
	key        string
	attempt    int
	start, end time.Time // end is zero while it runs
	ok         bool      // the job's code returned nil
	cause      error     // why its context ended, if it did
}

// roRuns are the runs of roJob in this process.
var roRuns struct {
	sync.Mutex
	list []roRun
}

const roLimit = 2

var roKeys = []string{"k0", "k1", "k2", "k3"}

var roJob = bq.Define("pgrestart.readonly", func(ctx context.Context, a roArgs) error {
	m, _ := bq.JobFromContext(ctx)
	roRuns.Lock()
	i := len(roRuns.list)
	roRuns.list = append(roRuns.list, roRun{n: a.N, key: a.Key, attempt: m.Attempt, start: time.Now()})
	roRuns.Unlock()
	d := time.Duration(20+(a.N+1000)*53%181) * time.Millisecond // 20-200 ms
	if a.Long && m.Attempt == 1 {
		d = time.Minute
	}
	var err error
	select {
	case <-time.After(d):
	case <-ctx.Done():
		err = ctx.Err()
	}
	roRuns.Lock()
	r := &roRuns.list[i]
	r.end, r.ok, r.cause = time.Now(), err == nil, context.Cause(ctx)
	roRuns.Unlock()
	return err
}, bq.JobOptions[roArgs]{
	Backoff:     func(int) time.Duration { return 100 * time.Millisecond },
	Concurrency: &bq.Concurrency[roArgs]{Key: func(a roArgs) string { return a.Key }, To: roLimit},
})

// TestPostgresReadOnly turns a PostgreSQL server of the test's own
// read-only (default_transaction_read_only, as a standby refuses writes)
// under a running fleet, then writable again.
func TestPostgresReadOnly(t *testing.T) {
	gate(t, testdb.Postgres, "BQ_TEST_PG_RESTART")
	srv := testdb.PrivatePostgres(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	// The test's own session stays writable whatever the server's
	// default: it turns the default back.
	if _, err := admin.Exec(ctx, "SET default_transaction_read_only = off"); err != nil {
		t.Fatal(err)
	}
	// What a session that just connected sees: the postmaster reloads the
	// file before it signals the sessions it has, and a session reloads
	// before it runs the next statement it reads.
	newSessionSees := func() string {
		c, err := pgx.Connect(ctx, srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var v string
		if err := c.QueryRow(ctx, "SHOW default_transaction_read_only").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	reader, err := sql.Open("pgx", srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	readOnlyUnder(t, roServer{
		bqDSN: srv.DSN, adminDSN: srv.DSN,
		setReadOnly: func(on bool) {
			stmt, want := "ALTER SYSTEM SET default_transaction_read_only = on", "on"
			if !on {
				stmt, want = "ALTER SYSTEM RESET default_transaction_read_only", "off"
			}
			for _, q := range []string{stmt, "SELECT pg_reload_conf()"} {
				if _, err := admin.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			waitFor(t, 10*time.Second, "sessions to see default_transaction_read_only = "+want, func() bool { return newSessionSees() == want })
		},
		admin: reader, argsQuery: "SELECT args::text FROM bq_jobs WHERE kind = 'pgrestart.readonly'",
	})
}

// TestMariaDBReadOnly turns a MariaDB server of the test's own read-only
// (SET GLOBAL read_only) under a running fleet, then writable again. The
// fleet connects as a user of its own: read_only spares users with
// READ ONLY ADMIN (root).
func TestMariaDBReadOnly(t *testing.T) {
	gate(t, testdb.MySQL, "BQ_TEST_MYSQL_RESTART")
	srv := testdb.PrivateMariaDB(t)
	ctx := context.Background()
	root, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/test", srv.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// The private server starts without its grant tables (every session
	// may do anything, read_only binds none): load them, then make the
	// fleet's user.
	for _, q := range []string{"FLUSH PRIVILEGES", "CREATE USER 'bq'@'127.0.0.1' IDENTIFIED BY 'bq'",
		"GRANT ALL ON test.* TO 'bq'@'127.0.0.1'"} {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	readOnlyUnder(t, roServer{
		bqDSN: fmt.Sprintf("mysql://bq:bq@127.0.0.1:%d/test", srv.Port), adminDSN: srv.DSN,
		setReadOnly: func(on bool) {
			if _, err := root.ExecContext(ctx, fmt.Sprintf("SET GLOBAL read_only = %t", on)); err != nil {
				t.Fatal(err)
			}
			var v bool
			if err := root.QueryRowContext(ctx, "SELECT @@GLOBAL.read_only").Scan(&v); err != nil || v != on {
				t.Fatalf("read_only is %t (%v), want %t", v, err, on)
			}
		},
		admin: root, argsQuery: "SELECT args FROM bq_jobs WHERE kind = 'pgrestart.readonly'",
	})
}

// roServer is a server of the test's own that readOnlyUnder turns
// read-only and back.
type roServer struct {
	bqDSN    string // the fleet's: a user read-only binds
	adminDSN string // migrations'
	// setReadOnly turns the server read-only (or writable) and returns
	// once a new session sees it.
	setReadOnly func(on bool)
	// admin reads bq's tables: argsQuery, the args (JSON) of every job
	// of roJob stored.
	admin     *sql.DB
	argsQuery string
}

// roAttempt is one enqueue of the producer.
type roAttempt struct {
	n          int
	begin, end time.Time
	id         int64
	err        error
}

// roLogSink keeps every log line with when it was written (a slog handler
// writes each record at once).
type roLogSink struct {
	mu    sync.Mutex
	lines []roLogLine
}

type roLogLine struct {
	at   time.Time
	text string
}

func (s *roLogSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, roLogLine{time.Now(), strings.TrimRight(string(p), "\n")})
	return len(p), nil
}

func (s *roLogSink) snapshot() []roLogLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lines)
}

// client is the name of the client that logged l (its logger's
// client=...).
func (l roLogLine) client() string {
	_, after, _ := strings.Cut(l.text, " client=")
	name, _, _ := strings.Cut(after, " ")
	return name
}

// roProducer enqueues one job after another until stopped.
type roProducer struct {
	mu       sync.Mutex
	attempts []roAttempt
	cancel   context.CancelFunc
	done     chan struct{}
}

// roProduce calls enqueue with 0, 1, 2, ..., pausing every between
// calls, until stop.
func roProduce(every time.Duration, enqueue func(n int) (int64, error)) *roProducer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &roProducer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for n := 0; ctx.Err() == nil; n++ {
			a := roAttempt{n: n, begin: time.Now()}
			a.id, a.err = enqueue(n)
			a.end = time.Now()
			p.mu.Lock()
			p.attempts = append(p.attempts, a)
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}()
	return p
}

// soFar is every attempt made yet.
func (p *roProducer) soFar() []roAttempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.attempts)
}

// stop ends the producer and returns every attempt it made.
func (p *roProducer) stop() []roAttempt {
	p.cancel()
	<-p.done
	return p.soFar()
}

// roPeaks is, for each key, the most runs in progress at once, by the
// runs' own records.
func roPeaks(runs []roRun) map[string]int {
	peak := map[string]int{}
	for _, r := range runs {
		n := 0
		for _, o := range runs {
			if o.key == r.key && !o.start.After(r.start) && (o.end.IsZero() || o.end.After(r.start)) {
				n++
			}
		}
		peak[r.key] = max(peak[r.key], n)
	}
	return peak
}

// roRefusalLine matches a log line that mentions the database refusing
// writes: bq's own words, PostgreSQL's error and MariaDB's.
var roRefusalLine = regexp.MustCompile(`(?i)refuses writes|read-only|read_only|full \(out of`)

// readOnlyUnder runs a fleet of three processes on srv (one with the
// dispatcher, two with workers only) working keyed jobs while a producer
// enqueues steadily; turns the server read-only for longer than
// ProcessDeadAfter, then writable again; and checks the promise: every
// enqueue while it is read-only is refused with ErrReadOnly and stores
// nothing, each process logs the cause once (no line per failed call),
// the fleet resumes by itself within seconds of writes working again,
// every job accepted completes exactly once, no key ever runs more than
// its limit at once, and Verify finds no drift.
func readOnlyUnder(t *testing.T, srv roServer) {
	ctx := context.Background()
	roRuns.Lock()
	roRuns.list = nil
	roRuns.Unlock()

	migrator, err := bq.Open(ctx, srv.adminDSN, bq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := migrator.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	migrator.Close()

	var logs roLogSink
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range logs.snapshot() {
				t.Log(l.text)
			}
		}
	})
	base := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := bq.Config{
		Queues:            map[string]int{"default": 4},
		PollInterval:      50 * time.Millisecond,
		DispatchInterval:  250 * time.Millisecond,
		HeartbeatInterval: 250 * time.Millisecond,
		ProcessDeadAfter:  3 * time.Second,
		ShutdownTimeout:   5 * time.Second,
	}
	names := []string{"A", "B", "C"}
	clients := make([]*bq.Client, len(names))
	for i, name := range names {
		c := cfg
		c.Name, c.Logger = name, base.With("client", name)
		if clients[i], err = bq.Open(ctx, srv.bqDSN, c); err != nil {
			t.Fatal(err)
		}
		defer clients[i].Close()
	}
	runCtx, stopRuns := context.WithCancel(ctx)
	defer stopRuns()
	runErrs := make(chan error, len(clients))
	for i, c := range clients {
		run := c.RunWorkers
		if i == 0 {
			run = c.Run // A dispatches too
		}
		go func() { runErrs <- run(runCtx) }()
	}

	// The producer: an enqueue through A every 20 ms, each of its own N.
	prod := roProduce(20*time.Millisecond, func(n int) (int64, error) {
		res, err := roJob.Enqueue(ctx, clients[0], roArgs{Key: roKeys[n%len(roKeys)], N: n})
		return res.ID, err
	})
	completed := func() int {
		roRuns.Lock()
		defer roRuns.Unlock()
		n := 0
		for _, r := range roRuns.list {
			if r.ok {
				n++
			}
		}
		return n
	}
	running := func(at time.Time) (n int) {
		roRuns.Lock()
		defer roRuns.Unlock()
		for _, r := range roRuns.list {
			if !r.start.After(at) && (r.end.IsZero() || r.end.After(at)) {
				n++
			}
		}
		return n
	}
	waitFor(t, 30*time.Second, "some jobs to complete", func() bool { return completed() >= 30 })
	// A backlog, so jobs are queued (and blocked behind their keys) as
	// well as running when the server turns read-only; and two long
	// runs, which the read-only period outlasts: their leases lapse.
	backlog := map[int]int64{}
	long := []int{-101, -102}
	for i := range 40 {
		res, err := roJob.Enqueue(ctx, clients[1], roArgs{Key: roKeys[i%len(roKeys)], N: -1 - i})
		if err != nil {
			t.Fatal(err)
		}
		backlog[-1-i] = res.ID
	}
	for _, n := range long {
		res, err := roJob.Enqueue(ctx, clients[1], roArgs{Key: "long", N: n, Long: true})
		if err != nil {
			t.Fatal(err)
		}
		backlog[n] = res.ID
	}
	waitFor(t, 10*time.Second, "the long runs to start", func() bool {
		roRuns.Lock()
		defer roRuns.Unlock()
		started := 0
		for _, r := range roRuns.list {
			if slices.Contains(long, r.n) {
				started++
			}
		}
		return started == len(long)
	})

	roIssued := time.Now()
	srv.setReadOnly(true)
	roSeen := time.Now()
	t.Logf("read-only %s after it was asked for", roSeen.Sub(roIssued).Round(time.Millisecond))
	time.Sleep(5 * time.Second) // past ProcessDeadAfter (3 s): every run's lease lapses
	rwIssued := time.Now()
	srv.setReadOnly(false)
	rwSeen := time.Now()
	time.Sleep(2 * time.Second) // enqueues go on after the switch
	tried := prod.stop()
	accepted := maps.Clone(backlog) // N -> job id
	refused, refusedInside := map[int]bool{}, 0
	grace := 500 * time.Millisecond
	for _, a := range tried {
		inside := a.begin.After(roSeen.Add(grace)) && a.end.Before(rwIssued)
		outside := a.end.Before(roIssued) || a.begin.After(rwSeen.Add(grace))
		switch {
		case a.err == nil && inside:
			t.Errorf("enqueue %d, from %s to %s after the server was seen read-only, succeeded (job %d)",
				a.n, a.begin.Sub(roSeen).Round(time.Millisecond), a.end.Sub(roSeen).Round(time.Millisecond), a.id)
		case a.err == nil:
			accepted[a.n] = a.id
		case !errors.Is(a.err, bq.ErrReadOnly):
			t.Errorf("enqueue %d at %s (read-only from %s to %s): %v; want bq.ErrReadOnly",
				a.n, a.begin.Format("15:04:05.000"), roSeen.Format("15:04:05.000"), rwSeen.Format("15:04:05.000"), a.err)
			refused[a.n] = true
		case outside:
			t.Errorf("enqueue %d refused while the server was writable: %v", a.n, a.err)
			refused[a.n] = true
		default:
			refused[a.n] = true
			if inside {
				refusedInside++
			}
		}
	}
	if refusedInside < 100 {
		t.Errorf("%d enqueues refused while read-only, want about one every 20 ms for 5 s", refusedInside)
	}
	firstErr := ""
	for _, a := range tried {
		if a.err != nil {
			firstErr = a.err.Error()
			break
		}
	}
	t.Logf("%d enqueues: %d accepted, %d refused while read-only (%s)", len(tried), len(accepted)-len(backlog), len(refused), firstErr)

	waitFor(t, 40*time.Second, "every accepted job to complete", func() bool {
		roRuns.Lock()
		defer roRuns.Unlock()
		done := map[int]bool{}
		for _, r := range roRuns.list {
			if r.ok {
				done[r.n] = true
			}
		}
		for n := range accepted {
			if !done[n] {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond) // a completion's batch commits after its run returned
	for n, id := range accepted {
		if info, err := clients[2].Job(ctx, id); err != nil || info.State != bq.StateCompleted {
			t.Errorf("job %d (enqueue %d): %+v, %v; want completed", id, n, info, err)
		}
	}
	stopRuns()
	for range clients {
		if err := <-runErrs; err != nil {
			t.Errorf("Run: %v", err)
		}
	}

	// Nothing refused was stored, everything accepted was, once.
	stored := map[int]int{}
	rows, err := srv.admin.QueryContext(ctx, srv.argsQuery)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var raw []byte
		var a roArgs
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("stored args %s: %v", raw, err)
		}
		stored[a.N]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for n := range refused {
		if stored[n] > 0 {
			t.Errorf("enqueue %d was refused, yet its job is stored", n)
		}
	}
	for n := range accepted {
		if stored[n] != 1 {
			t.Errorf("enqueue %d was accepted; %d jobs of it stored, want 1", n, stored[n])
		}
	}
	if len(stored) != len(accepted) {
		t.Errorf("%d jobs stored, %d accepted", len(stored), len(accepted))
	}

	roRuns.Lock()
	runs := slices.Clone(roRuns.list)
	roRuns.Unlock()
	// Each accepted job's code returned nil once; no refused one ran.
	ok, cut := map[int]int{}, 0
	for _, r := range runs {
		switch {
		case refused[r.n]:
			t.Errorf("enqueue %d was refused, yet its job ran", r.n)
		case r.ok:
			ok[r.n]++
		default:
			cut++
		}
	}
	for n := range accepted {
		if ok[n] != 1 {
			t.Errorf("job of enqueue %d completed %d times, want once", n, ok[n])
		}
	}
	// No key ran more than its limit at once, by the runs' own records.
	peak := roPeaks(runs)
	for key, n := range peak {
		if n > roLimit {
			t.Errorf("key %s: %d runs at once, limit %d", key, n, roLimit)
		}
	}
	// Nothing claimed while read-only: no run started between the switch
	// and its end (a claim is a write).
	for _, r := range runs {
		if r.start.After(roSeen.Add(grace)) && r.start.Before(rwIssued) {
			t.Errorf("job of enqueue %d started %s into the read-only period", r.n, r.start.Sub(roSeen).Round(time.Millisecond))
		}
	}
	if n := running(roIssued); n <= len(long) {
		t.Errorf("%d jobs running as the server turned read-only, want the long ones and more", n)
	}
	// The long runs were stopped, their leases lapsed, while read-only:
	// before any other process could take their claims. Each ran again
	// once the server took writes (checked above: completed once).
	for _, r := range runs {
		if !slices.Contains(long, r.n) || r.attempt != 1 {
			continue
		}
		if r.ok || !errors.Is(r.cause, bq.ErrLeaseLost) || r.end.Before(roSeen) || r.end.After(rwIssued) {
			t.Errorf("long job %d's first run: ok %t, ended %s into the read-only period (%s), cause %v; want stopped by its lapsed lease while read-only",
				r.n, r.ok, r.end.Sub(roSeen).Round(time.Millisecond), rwIssued.Sub(roSeen).Round(time.Millisecond), r.cause)
		}
	}

	// Work resumed by itself soon after writes worked again.
	var starts []time.Time
	for _, r := range runs {
		starts = append(starts, r.start)
	}
	slices.SortFunc(starts, time.Time.Compare)
	i, _ := slices.BinarySearchFunc(starts, rwSeen, time.Time.Compare)
	if i == len(starts) {
		t.Fatal("no job started after the server was writable again")
	}
	resumed := starts[i].Sub(rwSeen)
	if resumed > 5*time.Second {
		t.Errorf("the first job started %s after the server was writable again, want within 5 s", resumed)
	}

	// The logs name the cause, once per process and outage, not per call.
	lines := logs.snapshot()
	perClient := map[string]int{}
	endedAfter := map[string]bool{}
	for _, l := range lines {
		if l.at.After(roIssued) && roRefusalLine.MatchString(l.text) {
			perClient[l.client()]++
		}
		if l.at.After(rwIssued) && strings.Contains(l.text, "database calls succeed again") {
			endedAfter[l.client()] = true
		}
	}
	for _, name := range names {
		// Once for the workers' calls, once more for A's dispatcher
		// passes (logged apart: a pass can fail while claims succeed);
		// a reminder every 30 s would come on top, none in 5 s.
		bound := 1
		if name == "A" {
			bound = 2
		}
		if n := perClient[name]; n == 0 || n > bound {
			t.Errorf("process %s logged the refusal %d times in a %s read-only period, want 1 to %d", name, n, rwIssued.Sub(roIssued).Round(time.Second), bound)
		}
		if !endedAfter[name] {
			t.Errorf("process %s did not log that database calls succeed again", name)
		}
	}
	nameCause := false
	for _, l := range lines {
		nameCause = nameCause || strings.Contains(l.text, "the database refuses writes (read-only")
	}
	if !nameCause {
		t.Error("no log line names the cause: the database refuses writes (read-only ...)")
	}

	rep, err := clients[1].Verify(ctx, bq.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drift) > 0 {
		t.Errorf("Verify found drift after the read-only period: %+v", rep.Drift)
	}
	t.Logf("%d jobs accepted completed once each (%d runs cut short by lapsed leases), limits held (peak %v, limit %d); %d lines of %d logged the refusal (%v); the first job started %s after the server was writable again",
		len(accepted), cut, peak, roLimit, roSum(perClient), len(lines), perClient, resumed.Round(time.Millisecond))
}

func roSum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// fullArgs are the args of fullJob: N numbers each enqueue attempt, Pad
// fills the database sooner.
type fullArgs struct {
	Key string
	N   int
	Pad string
}

// fullRuns are the runs of fullJob in this process; fullGate holds each
// run until it is closed.
var (
	fullRuns struct {
		sync.Mutex
		list []roRun
	}
	fullGate chan struct{}
)

var fullJob = bq.Define("pgrestart.full", func(ctx context.Context, a fullArgs) error {
	m, _ := bq.JobFromContext(ctx)
	fullRuns.Lock()
	i := len(fullRuns.list)
	fullRuns.list = append(fullRuns.list, roRun{n: a.N, key: a.Key, attempt: m.Attempt, start: time.Now()})
	gate := fullGate
	fullRuns.Unlock()
	var err error
	select {
	case <-gate:
		select {
		case <-time.After(time.Duration(20+a.N*53%181) * time.Millisecond): // 20-200 ms
		case <-ctx.Done():
			err = ctx.Err()
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	fullRuns.Lock()
	r := &fullRuns.list[i]
	r.end, r.ok, r.cause = time.Now(), err == nil, context.Cause(ctx)
	fullRuns.Unlock()
	return err
}, bq.JobOptions[fullArgs]{
	Backoff:     func(int) time.Duration { return 100 * time.Millisecond },
	Concurrency: &bq.Concurrency[fullArgs]{Key: func(a fullArgs) string { return a.Key }, To: roLimit},
})

// TestSQLiteFull fills a SQLite database under a running fleet (its
// connections' max_page_count caps the file's pages) and checks:
// enqueues are refused with ErrDatabaseFull and store nothing; the runs
// in progress keep their leases past their bound (heartbeats rewrite a
// row in place, which takes no page) and finish; once the fleet frees
// space (its jobs are deleted as they complete, Retention NoRetention)
// enqueues succeed again through the same clients, nothing reopened;
// every job accepted completes exactly once, within its key's limit; no
// process floods its log; Verify finds no drift. What max_page_count
// cannot show: on a full disk the WAL cannot grow either, so heartbeats
// would be refused too, as on a read-only database (the tests above);
// here the fleet's own writes (claims, heartbeats, completions) still
// fit and none is refused. It starts no server and times nothing
// tightly, so unlike the tests above it runs with the rest of the suite.
func TestSQLiteFull(t *testing.T) {
	testdb.Require(t, testdb.SQLite)
	ctx := context.Background()
	path := testdb.SQLitePath(t)
	migrator, err := bq.Open(ctx, "sqlite://"+path, bq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := migrator.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	migrator.Close()
	plain, err := sql.Open("sqlite", sqlite.DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var pages int
	if err := plain.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	// Room for about a hundred jobs beside the schema.
	limitPages := pages + 64

	fullRuns.Lock()
	fullRuns.list = nil
	fullGate = make(chan struct{})
	gate := fullGate
	fullRuns.Unlock()
	var logs roLogSink
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range logs.snapshot() {
				t.Log(l.text)
			}
		}
	})
	base := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	names := []string{"A", "B"}
	clients := make([]*bq.Client, len(names))
	for i, name := range names {
		db, err := sql.Open("sqlite", sqlite.DSN(path)+fmt.Sprintf("&_pragma=max_page_count(%d)", limitPages))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		clients[i], err = bq.NewClient(sqlite.New(db), bq.Config{
			Name:              name,
			Logger:            base.With("client", name),
			Queues:            map[string]int{"default": 4},
			PollInterval:      50 * time.Millisecond,
			DispatchInterval:  250 * time.Millisecond,
			HeartbeatInterval: 250 * time.Millisecond,
			ProcessDeadAfter:  3 * time.Second,
			ShutdownTimeout:   5 * time.Second,
			Retention:         bq.NoRetention, // completed jobs are deleted: the fleet frees space itself
		})
		if err != nil {
			t.Fatal(err)
		}
		defer clients[i].Close()
	}
	runCtx, stopRuns := context.WithCancel(ctx)
	defer stopRuns()
	runErrs := make(chan error, len(clients))
	go func() { runErrs <- clients[0].Run(runCtx) }()
	go func() { runErrs <- clients[1].RunWorkers(runCtx) }()

	// The producer: an enqueue through A every 2 ms, faster than the
	// fleet works them off.
	pad := strings.Repeat("x", 1000)
	prod := roProduce(2*time.Millisecond, func(n int) (int64, error) {
		res, err := fullJob.Enqueue(ctx, clients[0], fullArgs{Key: roKeys[n%len(roKeys)], N: n, Pad: pad})
		return res.ID, err
	})
	var fullAt time.Time
	waitFor(t, 30*time.Second, "the database to fill", func() bool {
		for _, a := range prod.soFar() {
			if a.err != nil {
				fullAt = a.end
				return true
			}
		}
		return false
	})
	// Full for 3 s, the runs in progress held (nothing frees space):
	// they outlast their leases' bound (2.75 s), which holds only as
	// their processes' heartbeats land.
	time.Sleep(3 * time.Second)
	opened := time.Now()
	close(gate)
	// The fleet works the jobs off, deleting them, while the producer
	// still enqueues faster than that; then it stops, and the fleet
	// catches up.
	time.Sleep(3 * time.Second)
	all := prod.stop()
	accepted, refused := map[int]int64{}, map[int]bool{}
	var refusedFull, refusedHeld, acceptedHeld int
	for _, a := range all {
		held := a.begin.After(fullAt.Add(200*time.Millisecond)) && a.end.Before(opened)
		switch {
		case a.err == nil:
			accepted[a.n] = a.id
			if held {
				acceptedHeld++
			}
		case errors.Is(a.err, bq.ErrDatabaseFull):
			refused[a.n] = true
			refusedFull++
			if held {
				refusedHeld++
			}
		default:
			refused[a.n] = true
			t.Errorf("enqueue %d: %v; want bq.ErrDatabaseFull", a.n, a.err)
		}
	}
	if refusedHeld < 100 || acceptedHeld > 0 {
		t.Errorf("while the database was full and nothing freed space: %d enqueues refused, %d accepted; want hundreds refused and none accepted", refusedHeld, acceptedHeld)
	}
	// The first enqueue accepted once the fleet had freed space.
	var again time.Time
	for _, a := range all {
		if a.err == nil && a.begin.After(opened) {
			again = a.end
			break
		}
	}
	if again.IsZero() {
		t.Fatal("no enqueue was accepted after the fleet freed space")
	}
	if d := again.Sub(opened); d > 5*time.Second {
		t.Errorf("the first enqueue accepted %s after the runs were let go, want within 5 s", d)
	}
	t.Logf("%d enqueues: %d accepted, %d refused as full (%d while nothing freed space); enqueues accepted again %s after the fleet could free space",
		len(all), len(accepted), refusedFull, refusedHeld, again.Sub(opened).Round(time.Millisecond))

	waitFor(t, 60*time.Second, "every accepted job to complete", func() bool {
		fullRuns.Lock()
		defer fullRuns.Unlock()
		done := map[int]bool{}
		for _, r := range fullRuns.list {
			if r.ok {
				done[r.n] = true
			}
		}
		for n := range accepted {
			if !done[n] {
				return false
			}
		}
		return true
	})
	// Space is free again: the same client takes an enqueue.
	res, err := fullJob.Enqueue(ctx, clients[0], fullArgs{Key: "after", N: -1})
	if err != nil {
		t.Errorf("enqueue once the fleet has caught up: %v", err)
	} else {
		accepted[-1] = res.ID
		waitFor(t, 10*time.Second, "the last job to complete", func() bool {
			fullRuns.Lock()
			defer fullRuns.Unlock()
			return slices.ContainsFunc(fullRuns.list, func(r roRun) bool { return r.n == -1 && r.ok })
		})
	}
	time.Sleep(300 * time.Millisecond) // a completion's batch commits after its run returned
	stopRuns()
	for range clients {
		if err := <-runErrs; err != nil {
			t.Errorf("Run: %v", err)
		}
	}

	fullRuns.Lock()
	runs := slices.Clone(fullRuns.list)
	fullRuns.Unlock()
	ok, held := map[int]int{}, 0
	for _, r := range runs {
		switch {
		case refused[r.n]:
			t.Errorf("enqueue %d was refused, yet its job ran", r.n)
		case !r.ok:
			t.Errorf("a run of enqueue %d's job was cut short: %v", r.n, r.cause)
		default:
			ok[r.n]++
		}
		if r.start.Before(fullAt) && r.end.After(opened) {
			held++
		}
	}
	for n := range accepted {
		if ok[n] != 1 {
			t.Errorf("job of enqueue %d completed %d times, want once", n, ok[n])
		}
	}
	if held == 0 {
		t.Error("no run was in progress across the full period: the scenario checks nothing of running jobs")
	}
	peak := roPeaks(runs)
	for key, n := range peak {
		if n > roLimit {
			t.Errorf("key %s: %d runs at once, limit %d", key, n, roLimit)
		}
	}
	var left int
	if err := plain.QueryRow("SELECT count(*) FROM bq_jobs").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d jobs left in bq_jobs (%v), want none: every job stored completed and was deleted", left, err)
	}

	lines := logs.snapshot()
	perClient := map[string]int{}
	for _, l := range lines {
		if roRefusalLine.MatchString(l.text) {
			perClient[l.client()]++
		}
	}
	for _, name := range names {
		if n := perClient[name]; n > 2 {
			t.Errorf("process %s logged the database being full %d times, want at most twice (once for its calls, once for its passes)", name, n)
		}
	}
	rep, err := clients[1].Verify(ctx, bq.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drift) > 0 {
		t.Errorf("Verify found drift after the database was full: %+v", rep.Drift)
	}
	t.Logf("%d jobs accepted completed once each (%d runs held across the full period kept their leases), limits held (peak %v, limit %d); %d lines of %d logged the refusal (%v)",
		len(accepted), held, peak, roLimit, roSum(perClient), len(lines), perClient)
}
