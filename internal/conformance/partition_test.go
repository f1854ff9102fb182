package conformance

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/bqueue/bq"
)

// Network partitions (issue 36, item 1): one worker process reaches the
// database through a Toxiproxy proxy run inside the test process, which a
// scenario blackholes (no byte gets through either way and no connection
// is closed, as when a link or a firewall drops every packet) or slows
// down. That process records its runs over a direct connection
// (BQ_RECORD_DSN): a partition must not hide the evidence the scenarios
// judge by. SQLite is one embedded file, with no network to cut: the
// scenarios skip it.
var _ = register(
	scenario{"PartitionedWorkerStopsItsRuns", testPartitionedWorker},
	scenario{"SlowNetworkStaysCorrect", testSlowNetwork},
)

// netProxy is a TCP proxy in the test process between one worker process
// and the database server.
type netProxy struct {
	h     *harness
	proxy *toxiproxy.Proxy
	// dsn is the harness's DSN with the server's address replaced by the
	// proxy's.
	dsn string
}

// netProxy starts a proxy to the harness's database server, stopped (its
// connections closed) when the test ends. On SQLite it skips the test.
func (h *harness) netProxy() *netProxy {
	h.t.Helper()
	if h.db == "sqlite" {
		h.t.Skip("SQLite: one embedded file, with no network between a process and its database to partition or slow down")
	}
	u, err := url.Parse(h.dsn)
	if err != nil {
		h.t.Fatalf("parse the DSN: %v", err)
	}
	upstream := u.Host
	if u.Port() == "" {
		upstream = net.JoinHostPort(u.Hostname(), map[string]string{"postgres": "5432", "mysql": "3306"}[h.db])
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, h.db+"-"+h.test, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		h.t.Fatalf("start the proxy to %s: %v", upstream, err)
	}
	h.t.Cleanup(p.Stop)
	u.Host = p.Listen
	return &netProxy{h: h, proxy: p, dsn: u.String()}
}

// toxic adds a toxic of kind to both directions of every connection
// through the proxy, open or to come.
func (np *netProxy) toxic(kind, attributes string) {
	np.h.t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		spec := fmt.Sprintf(`{"name": %q, "type": %q, "stream": %q, "toxicity": 1, "attributes": %s}`,
			kind+"-"+stream, kind, stream, attributes)
		if _, err := np.proxy.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			np.h.t.Fatalf("add toxic %s: %v", spec, err)
		}
	}
}

// partition blackholes every connection through the proxy, both ways
// (Toxiproxy's timeout toxic with timeout 0: every byte is dropped, no
// connection is closed; a new connection is accepted and gets nothing
// through either). It returns when it began: just before the toxics.
func (np *netProxy) partition() time.Time {
	np.h.t.Helper()
	at := time.Now()
	np.toxic("timeout", `{"timeout": 0}`)
	return at
}

// heal removes the toxics, and returns when they are gone. Toxiproxy then
// closes the connections the blackhole held (bytes were dropped in their
// midst, so no protocol could go on over them): the process must notice
// and connect again.
func (np *netProxy) heal() time.Time {
	np.proxy.Toxics.ResetToxics(context.Background())
	return time.Now()
}

// openRuns counts the runs in progress in process pid.
func (h *harness) openRuns(pid int) int {
	h.t.Helper()
	return h.count(fmt.Sprintf(`SELECT count(*) FROM test_runs WHERE pid = %d AND ended_ns = 0`, pid))
}

// testPartitionedWorker: a dispatcher process, a worker process W that
// reaches the database through the proxy and, once W runs four jobs, two
// worker processes on direct connections (heartbeat 250 ms, dead after
// 3 s). Two of W's jobs run 6 s, long enough to still run when their
// lease lapses; two end 0.7-1.2 s into the partition, their completions
// then stuck in it, and run 5 s when run again, so the re-runs still hold
// the jobs' claims when W's stale outcomes land after the heal. Other
// jobs of 0.2-2 s over To=1 and To=2 keys keep the direct workers busy.
// 1.3 s after W's runs began, W is cut off (blackholed both ways) for 6 s,
// twice ProcessDeadAfter, then healed, and jobs are enqueued until W runs
// one again. Judged by the jobs' own records: every run of W in progress
// at the partition ended before its job started again anywhere, and
// before ProcessDeadAfter into the partition, either done or with its ctx
// cancelled with the lease lost (at least one so); no key ever ran beyond
// its limit; each job completed, and by its last successful run (a stale
// outcome of W finished none), a run whose success was stuck in the
// partition being the only one ever repeated; W works again after the
// heal and exits cleanly at the end; the semaphores are whole and Verify
// finds no drift.
func testPartitionedWorker(t *testing.T, h *harness) {
	np := h.netProxy()
	limits := map[string]int{}
	for i := range 6 {
		limits[fmt.Sprintf("n%d", i)] = 1 + i%2
	}
	var ids []int64
	add := func(a Args) {
		job := limit1Job
		if limits[a.Key] == 2 {
			job = limit2Job
		}
		ids = append(ids, enqueue(t, h, job, a).ID)
	}
	shorts := func(n int) {
		for range n {
			add(Args{Key: fmt.Sprintf("n%d", rand.IntN(len(limits))), SleepMS: 200 + rand.IntN(1800)})
		}
	}

	// The dispatcher and W alone at first, so that the runs the
	// partition catches are W's.
	var out lockedBuffer
	disp := h.spawn("dispatcher", 0, chaosEnv()...)
	cut := h.spawnTo(&out, "workers", 4, append(chaosEnv(), "BQ_DSN="+np.dsn, "BQ_RECORD_DSN="+h.dsn)...)
	stopFirst := h.fleet(disp, cut)
	h.waitProcesses(2)
	add(Args{Key: "n0", SleepMS: 6000})
	add(Args{Key: "n1", SleepMS: 6000})
	add(Args{Key: "n2", Mode: "rerun-n", SleepMS: 2500, N: 5000})
	add(Args{Key: "n3", Mode: "rerun-n", SleepMS: 2000, N: 5000})
	pid := cut.Process.Pid
	h.eventually(30*time.Second, "the worker to be cut off to run its four jobs", func() bool { return h.openRuns(pid) == 4 })
	began := time.Unix(0, int64(h.count(fmt.Sprintf(`SELECT min(started_ns) FROM test_runs WHERE pid = %d`, pid))))
	stopDirect := h.fleet(h.spawn("workers", 3, chaosEnv()...), h.spawn("workers", 3, chaosEnv()...))
	shorts(24)
	time.Sleep(time.Until(began.Add(1300 * time.Millisecond)))

	w := window{pid: pid}
	w.stop = np.partition()
	time.Sleep(2 * chaosDeadAfter)
	w.cont = np.heal()
	var back time.Time // W's first run after the heal
	h.eventually(30*time.Second, "the healed worker to run a job again", func() bool {
		if n := h.count(fmt.Sprintf(`SELECT count(*) FROM test_runs WHERE pid = %d AND started_ns > %d`, pid, w.cont.UnixNano())); n > 0 {
			back = time.Unix(0, int64(h.count(fmt.Sprintf(`SELECT min(started_ns) FROM test_runs WHERE pid = %d AND started_ns > %d`, pid, w.cont.UnixNano()))))
			return true
		}
		if h.count(`SELECT count(*) FROM bq_ready_executions`) < 3 {
			shorts(3)
		}
		return false
	})
	h.waitFinished(len(ids), 60*time.Second)
	stopDirect()
	stopFirst()

	runs := h.outcomeRuns(t)
	byJob := map[int64][]outcomeRun{}
	var plain []run
	for _, r := range runs {
		if r.End.Before(r.Start) {
			t.Errorf("job %d: run in process %d never recorded its end", r.JobID, r.PID)
			r.End = time.Now()
		}
		byJob[r.JobID] = append(byJob[r.JobID], r)
		plain = append(plain, r.run)
	}
	rel := func(at time.Time) string { return fmtDur(at.Sub(w.stop)) }

	// The runs the partition caught.
	var caught, margins []time.Duration
	fenced := 0
	for _, r := range runs {
		if r.PID != pid || !r.Start.Before(w.stop) || !r.End.After(w.stop) {
			continue
		}
		into := r.End.Sub(w.stop)
		caught = append(caught, into)
		switch {
		case r.Outcome == "ok":
		case strings.HasPrefix(r.Outcome, "ctx: ") && strings.Contains(r.Outcome, bq.ErrLeaseLost.Error()):
			fenced++
		default:
			t.Errorf("job %d: the partitioned run ended %q, want it done or its ctx cancelled with the lease lost", r.JobID, r.Outcome)
		}
		if into >= chaosDeadAfter {
			t.Errorf("job %d: the partitioned run went on %s into the partition, past ProcessDeadAfter (%s): its claim could be reaped as it ran",
				r.JobID, fmtDur(into), chaosDeadAfter)
		}
		i := slices.IndexFunc(byJob[r.JobID], func(o outcomeRun) bool { return o.Start.After(r.Start) })
		if i < 0 {
			t.Logf("%s: job %d (%q): partitioned run ended %s into the partition, %s; not run again", h.db, r.JobID, r.Key, fmtDur(into), r.Outcome)
			continue
		}
		next := byJob[r.JobID][i]
		margins = append(margins, next.Start.Sub(r.End))
		t.Logf("%s: job %d (%q): partitioned run ended %s into the partition, %s; run again from %s in pid %d",
			h.db, r.JobID, r.Key, fmtDur(into), r.Outcome, rel(next.Start), next.PID)
		if next.Start.Before(r.End) {
			t.Errorf("job %d started again in process %d %s into the partition, %s before its partitioned run ended",
				r.JobID, next.PID, rel(next.Start), fmtDur(r.End.Sub(next.Start)))
		}
	}
	if fenced == 0 {
		t.Errorf("no run of the partitioned process ended with its lease lost (caught runs ended %s into the partition): the partition tested no fence", durs(caught))
	}

	overlap := checkOverlap(t, plain, limits)

	// Completed once, and by the last successful run: a run whose success
	// was stuck in the partition (ended less than inFlightAllowance
	// before it, or in it) is the only one that may be repeated.
	lostCompletions := 0
	for _, id := range ids {
		var ok []outcomeRun
		for _, r := range byJob[id] {
			if r.Outcome == "ok" {
				ok = append(ok, r)
			}
		}
		if len(ok) == 0 {
			t.Errorf("job %d: no successful run", id)
			continue
		}
		for _, r := range ok[:len(ok)-1] {
			if r.PID == pid && r.End.After(w.stop.Add(-inFlightAllowance)) && r.End.Before(w.cont) {
				lostCompletions++
				continue
			}
			t.Errorf("job %d ran to success more than once: pid %d %s..%s, and later again (its completion was not stuck in the partition)",
				id, r.PID, rel(r.Start), rel(r.End))
		}
		last := ok[len(ok)-1]
		if info := jobInfo(t, h, id); info.FinishedAt != nil && info.FinishedAt.Before(last.End.Add(-time.Millisecond)) {
			t.Errorf("job %d finished %s into the partition, before its last successful run ended (pid %d, %s): a stale outcome finished it",
				id, rel(*info.FinishedAt), last.PID, rel(last.End))
		}
	}
	h.checkDrained(ids)

	log := out.String()
	reaped := h.count(`SELECT count(*) FROM bq_jobs WHERE last_error LIKE 'process lost%'`)
	t.Logf("%s: %d jobs, %d runs; partition %s; %d runs caught, ended %s into it, %d with the lease lost; "+
		"re-run %s after the partitioned run ended; %d successes stuck in the partition run again; %d jobs reaped as process lost",
		h.db, len(ids), len(runs), fmtDur(w.cont.Sub(w.stop)), len(caught), durs(caught), fenced,
		durs(margins), lostCompletions, reaped)
	t.Logf("%s: the healed process ran a job again %s after the heal; it logged %d stale outcomes ignored, %d re-registrations; max overlap per key %v",
		h.db, fmtDur(back.Sub(w.cont)), strings.Count(log, "stale completion ignored"), strings.Count(log, "registering again"), overlap)
}

// Timings of SlowNetworkStaysCorrect: a heartbeat and the semaphore
// renewal that follows it take round trips of their own (on MySQL each
// is a transaction: START TRANSACTION, the statement, COMMIT), one after
// the other, and a beat must land within two heartbeat intervals or is
// given up (its connection with it). With 400 ms round trips, S's
// heartbeat ages up to 3-7 s in the database: well within these timings,
// not within the chaos ones (250 ms, 3 s), under which S hardly ever
// lands a beat and runs no job.
const (
	slowHeartbeat = 2 * time.Second
	slowDeadAfter = 12 * time.Second
)

// testSlowNetwork: a dispatcher process, two worker processes on direct
// connections and one, S, whose every packet takes 200 ms more each way
// (Toxiproxy's latency toxic), drain 100 jobs of 100-400 ms over 25
// To=1 and To=2 keys (heartbeat 2 s, dead after 12 s: a 400 ms round
// trip is well within them). No lease is lost: S's heartbeat, as the database
// saw it, never aged past its lease bound, it logged no lapsed lease,
// every job ran exactly once, with no run cut short and no job reaped;
// no key ran beyond its limit; everything completed and the semaphores
// are whole. S ran some of the jobs: throughput that degrades, not a
// worker lost (the counts are logged).
func testSlowNetwork(t *testing.T, h *harness) {
	ctx := context.Background()
	np := h.netProxy()
	const latency = 200 * time.Millisecond
	np.toxic("latency", fmt.Sprintf(`{"latency": %d}`, latency.Milliseconds()))
	env := []string{"BQ_HEARTBEAT=" + slowHeartbeat.String(), "BQ_DEAD_AFTER=" + slowDeadAfter.String()}
	limits := map[string]int{}
	for i := range 25 {
		limits[fmt.Sprintf("s%d", i)] = 1 + i%2
	}
	var out lockedBuffer
	slow := h.spawnTo(&out, "workers", 2, append(env, "BQ_DSN="+np.dsn, "BQ_RECORD_DSN="+h.dsn)...)
	stop := h.fleet(h.spawn("dispatcher", 0, env...), slow, h.spawn("workers", 3, env...), h.spawn("workers", 3, env...))
	h.waitProcesses(4)

	// Watch S's heartbeat age as the database has it.
	watchedAge := h.watchBeatAge(func(p bq.ProcessHealth) bool { return p.PID == slow.Process.Pid })

	byJob := map[*bq.Job[Args]][]Args{}
	for i := range 100 {
		a := Args{Test: h.test, Seq: i, Key: fmt.Sprintf("s%d", i%len(limits)), SleepMS: 100 + rand.IntN(301)}
		job := limit1Job
		if limits[a.Key] == 2 {
			job = limit2Job
		}
		byJob[job] = append(byJob[job], a)
	}
	began := time.Now()
	var ids []int64
	for job, args := range byJob {
		res, err := job.EnqueueMany(ctx, h.client, args)
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	h.waitFinished(len(ids), 90*time.Second)
	drained := time.Since(began)
	oldest := watchedAge()
	stop()

	runs := h.outcomeRuns(t)
	var plain []run
	perPID := map[int]int{}
	for _, r := range runs {
		plain = append(plain, r.run)
		perPID[r.PID]++
		if r.Outcome != "ok" {
			t.Errorf("job %d: run in process %d ended %q, want ok", r.JobID, r.PID, cmp.Or(r.Outcome, "never"))
		}
	}
	checkOnce(t, plain, ids)
	overlap := checkOverlap(t, plain, limits)
	if n := h.count(`SELECT count(*) FROM bq_jobs WHERE last_error LIKE 'process lost%'`); n != 0 {
		t.Errorf("%d jobs were reaped as process lost, though every process was alive", n)
	}
	if bound := slowDeadAfter - slowHeartbeat; oldest >= bound {
		t.Errorf("the slow process's heartbeat aged %s in the database, past its lease bound %s", fmtDur(oldest), bound)
	}
	log := out.String()
	for _, sign := range []string{"no heartbeat landed for too long", "declared dead"} {
		if n := strings.Count(log, sign); n != 0 {
			t.Errorf("the slow process logged %q %d times: it lost leases", sign, n)
		}
	}
	if perPID[slow.Process.Pid] == 0 {
		t.Errorf("the slow process ran none of the %d jobs: its throughput fell to nothing", len(ids))
	}
	h.checkDrained(ids)
	var direct []string
	for p, n := range perPID {
		if p != slow.Process.Pid {
			direct = append(direct, fmt.Sprint(n))
		}
	}
	slices.Sort(direct)
	t.Logf("%s: %d jobs drained in %s; the process with %s more latency each way ran %d (its heartbeat aged up to %s), the direct ones %s; max overlap per key %v",
		h.db, len(ids), fmtDur(drained), latency, perPID[slow.Process.Pid], fmtDur(oldest), strings.Join(direct, " and "), overlap)
}
