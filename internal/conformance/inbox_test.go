package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"ClientProducersRaceGoProducers", testPythonRacesGo},
)

// pythonFor returns a python3 that imports what the Python client needs
// on db (BQ_PYTHON first, as make test sets it), or fails the test
// saying how to get one: the scenario is never skipped quietly.
func pythonFor(t *testing.T, db string) string {
	t.Helper()
	module := map[string]string{"postgres": "psycopg", "mysql": "pymysql", "sqlite": "sqlite3"}[db]
	var tried []string
	for _, py := range []string{os.Getenv("BQ_PYTHON"), "python3", "/usr/bin/python3"} {
		if py == "" {
			continue
		}
		if out, err := exec.Command(py, "-c", "import "+module).CombinedOutput(); err == nil {
			return py
		} else {
			tried = append(tried, fmt.Sprintf("%s: %v %s", py, err, bytes.TrimSpace(out)))
		}
	}
	t.Fatalf("no python3 that imports %s for the Python producers (tried %s): run make test, or scripts/ensure-python.sh "+
		"(apt-get install -y python3-psycopg python3-pymysql python3-pytest), or set BQ_PYTHON", module, strings.Join(tried, "; "))
	return ""
}

// nodePath is where the TypeScript producers find pg and mysql: make
// test-typescript's unpacked Debian packages (BQ_NODE_DEPS), then any
// NODE_PATH of the environment.
func nodePath() string {
	deps := os.Getenv("BQ_NODE_DEPS")
	if deps == "" {
		deps = "/usr/local/lib/bq-node"
	}
	return strings.Trim(deps+"/usr/share/nodejs:"+os.Getenv("NODE_PATH"), ":")
}

// nodeFor returns a node that loads the built TypeScript client and the
// driver of db, or fails the test saying how to get them: the scenario
// is never skipped quietly.
func nodeFor(t *testing.T, db string) string {
	t.Helper()
	module := map[string]string{"postgres": "pg", "mysql": "mysql"}[db]
	node, err := exec.LookPath("node")
	if err == nil {
		cmd := exec.Command(node, "-e", `require("../../clients/typescript/dist/index.js"); require("`+module+`")`)
		cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath())
		out, err := cmd.CombinedOutput()
		if err == nil {
			return node
		}
		t.Fatalf("node cannot load the TypeScript client or %s (%v): %s\nrun make test (make test-typescript builds clients/typescript/dist and installs pg and mysql)", module, err, bytes.TrimSpace(out))
	}
	t.Fatalf("no node for the TypeScript producers (%v): run make test, or scripts/ensure-node-clients.sh and make test-typescript", err)
	return ""
}

// pyRow is one inbox row a Python or TypeScript producer wrote.
type pyRow struct {
	ID         int64  `json:"id"`
	Kind       string `json:"kind"`
	Key        string `json:"key"`
	Seq        int    `json:"seq"`
	RolledBack bool   `json:"rolled_back"`
}

// attempts counts one kind's attempts by what became of them.
type attempts struct{ stored, discarded, duplicate int }

// testPythonRacesGo: two Python processes (bqueue, clients/python), on
// PostgreSQL and MySQL two TypeScript ones (clients/typescript), and two
// Go producers enqueue on the same keys at once, while three worker
// processes admit the clients' rows (through the inbox) and run every
// job: limit-1 keys that block, limit-1 keys that discard, and unique
// jobs. Judged from the jobs' own start and end records and from every
// attempt's result: no key ran two at once; every stored job ran to
// completion exactly once; the jobs stored are exactly the attempts that
// said stored (ready/blocked), and the rest said discarded or duplicate;
// exactly one job per unique key, the other attempts naming it; every
// committed client row decided, every rolled-back one absent.
func testPythonRacesGo(t *testing.T, h *harness) {
	py := pythonFor(t, h.db)
	node := ""
	if h.db != "sqlite" {
		node = nodeFor(t, h.db)
	}
	ctx := context.Background()
	const perKey = 15 // per producer: 3 block keys, 2 discard keys, 1 unique key each round
	stop := h.spawnWorkers(3, 4)
	time.Sleep(500 * time.Millisecond) // the workers are up: the producers race them too

	var wg sync.WaitGroup
	var mu sync.Mutex
	goTally := map[string]*attempts{"c.limit1": {}, "c.discard1": {}, "c.unkeyed": {}}
	uniqueBy := map[string][]int64{} // unique key -> the stored job or duplicated one, per attempt
	var goErrs []error
	for p := range 2 {
		wg.Go(func() {
			for i := range perKey {
				for k := range 3 {
					a := Args{Test: h.test, Key: fmt.Sprintf("k%d", k), Seq: 900000 + p*100000 + i*10 + k, SleepMS: 10 + i%25}
					res, err := goEnqueue(ctx, h, limit1Job, a, i%2 == 0)
					mu.Lock()
					countAttempt(goTally["c.limit1"], res, err, &goErrs)
					mu.Unlock()
				}
				for k := range 2 {
					a := Args{Test: h.test, Key: fmt.Sprintf("d%d", k), Seq: 900000 + p*100000 + i*10 + 5 + k, SleepMS: 10 + i%25}
					res, err := goEnqueue(ctx, h, discard1Job, a, i%2 == 1)
					mu.Lock()
					countAttempt(goTally["c.discard1"], res, err, &goErrs)
					mu.Unlock()
				}
				a := Args{Test: h.test, Key: fmt.Sprintf("u%d", i), SleepMS: 10}
				res, err := unkeyedJob.Enqueue(ctx, h.client, a, bq.WithUnique(bq.Unique{ByArgs: true}))
				mu.Lock()
				countAttempt(goTally["c.unkeyed"], res, err, &goErrs)
				if err == nil {
					uniqueBy[a.Key] = append(uniqueBy[a.Key], max(res.ID, res.DuplicateOf))
				}
				mu.Unlock()
			}
		})
	}
	// Two Python producers, and on PostgreSQL and MySQL (the TypeScript
	// client's databases) two TypeScript ones.
	producers := 2
	if node != "" {
		producers = 4
	}
	pyRows := make([][]pyRow, producers)
	pyErrs := make([]error, producers)
	for p := range producers {
		wg.Go(func() {
			if p < 2 {
				pyRows[p], pyErrs[p] = runProducer(exec.Command(py, "testdata/inbox_producer.py"), h.dsn, h.test, p+1, perKey)
				return
			}
			cmd := exec.Command(node, "testdata/inbox_producer.mjs")
			cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath())
			pyRows[p], pyErrs[p] = runProducer(cmd, h.dsn, h.test, p+1, perKey)
		})
	}
	wg.Wait()
	if err := errors.Join(append(goErrs, pyErrs...)...); err != nil {
		t.Fatal(err)
	}

	// Every committed Python row is decided by a worker process.
	var committed, rolledBack []pyRow
	for _, rows := range pyRows {
		for _, r := range rows {
			if r.RolledBack {
				rolledBack = append(rolledBack, r)
			} else {
				committed = append(committed, r)
			}
		}
	}
	h.eventually(60*time.Second, "every committed Python row decided", func() bool {
		return h.count(`SELECT count(*) FROM bq_inbox WHERE outcome IS NULL`) == 0
	})
	if n := h.count(`SELECT count(*) FROM bq_inbox`); n != len(committed) {
		t.Errorf("the inbox holds %d rows; the Python producers committed %d (and rolled back %d)", n, len(committed), len(rolledBack))
	}
	pyTally := map[string]*attempts{"c.limit1": {}, "c.discard1": {}, "c.unkeyed": {}}
	for _, r := range committed {
		var outcome string
		var jobID int64
		q := h.sql(`SELECT outcome, coalesce(job_id, 0) FROM bq_inbox WHERE id = ?`)
		if err := h.raw.QueryRowContext(ctx, rebind(h.db, q), r.ID).Scan(&outcome, &jobID); err != nil {
			t.Fatalf("read inbox row %d: %v", r.ID, err)
		}
		switch outcome {
		case "ready", "blocked":
			pyTally[r.Kind].stored++
		case "discarded":
			pyTally[r.Kind].discarded++
		case "duplicate":
			pyTally[r.Kind].duplicate++
		default:
			t.Errorf("Python row %d (%s %s) = %s, want ready, blocked, discarded or duplicate", r.ID, r.Kind, r.Key, outcome)
		}
		if r.Kind == "c.unkeyed" {
			uniqueBy[r.Key] = append(uniqueBy[r.Key], jobID)
		}
	}

	total := func(kind string) (attempts, stored, discarded, duplicate int) {
		g, p := goTally[kind], pyTally[kind]
		return g.stored + g.discarded + g.duplicate + p.stored + p.discarded + p.duplicate,
			g.stored + p.stored, g.discarded + p.discarded, g.duplicate + p.duplicate
	}
	h.eventually(90*time.Second, "every stored job to complete", func() bool {
		return h.count(`SELECT count(*) FROM bq_jobs WHERE finished_at IS NULL`) == 0
	})
	stop()
	for _, kind := range []string{"c.limit1", "c.discard1", "c.unkeyed"} {
		attempts, stored, discarded, duplicate := total(kind)
		jobs := h.count(fmt.Sprintf(`SELECT count(*) FROM bq_jobs WHERE kind = '%s'`, kind))
		t.Logf("%s: %d attempts (Go %+v, Python and TypeScript %+v): %d stored, %d discarded, %d duplicates; %d jobs in the table",
			kind, attempts, *goTally[kind], *pyTally[kind], stored, discarded, duplicate, jobs)
		if jobs != stored {
			t.Errorf("%s: %d jobs stored, but %d attempts said stored (discards or duplicates not exact)", kind, jobs, stored)
		}
		if kind == "c.limit1" && (discarded != 0 || duplicate != 0) {
			t.Errorf("%s blocks: %d discarded, %d duplicates, want none", kind, discarded, duplicate)
		}
	}
	if _, _, discarded, _ := total("c.discard1"); discarded == 0 {
		t.Errorf("no discard: the producers did not race on the discard keys")
	}
	// Exactly one job per unique key, every attempt naming it.
	perUnique := uniqueJobs(t, h)
	for key, ids := range uniqueBy {
		if n := perUnique[key]; n != 1 {
			t.Errorf("unique key %s: %d jobs stored, want 1", key, n)
		}
		for _, id := range ids {
			if id != ids[0] || id == 0 {
				t.Errorf("unique key %s: attempts name jobs %v, want one job", key, ids)
				break
			}
		}
	}
	// Each stored job ran to completion once; no key ran two at once.
	runs := h.dbRuns(t)
	ran := map[int64]int{}
	for _, r := range runs {
		ran[r.JobID]++
	}
	if jobs := h.count(`SELECT count(*) FROM bq_jobs`); len(ran) != jobs {
		t.Errorf("%d jobs ran, %d stored", len(ran), jobs)
	}
	for id, n := range ran {
		if n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
	overlap := maxOverlap(runs)
	t.Logf("most runs at once per key: %v", overlap)
	for key, n := range overlap {
		if strings.HasPrefix(key, "k") || strings.HasPrefix(key, "d") {
			if n > 1 {
				t.Errorf("key %s: %d runs overlapped, limit 1", key, n)
			}
		}
	}
	// A rolled-back row left nothing (SQLite reuses a rolled-back id, so
	// rows are told by their args' Seq; the unique rows share Seq 0).
	for _, r := range rolledBack {
		if r.Kind == "c.unkeyed" {
			continue
		}
		var n int
		q := rebind(h.db, `SELECT count(*) FROM bq_inbox WHERE args LIKE ?`)
		if err := h.raw.QueryRowContext(ctx, q, fmt.Sprintf(`%%"Seq":%d,%%`, r.Seq)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("rolled-back Python row (%s %s, Seq %d) is in the inbox", r.Kind, r.Key, r.Seq)
		}
	}
	h.checkSemaphores()
}

// uniqueJobs counts the stored unique jobs by their args' Key.
func uniqueJobs(t *testing.T, h *harness) map[string]int {
	rows, err := h.raw.QueryContext(context.Background(), `SELECT args FROM bq_jobs WHERE kind = 'c.unkeyed'`)
	if err != nil {
		t.Fatalf("read unique jobs: %v", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var raw []byte
		var a Args
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("unique job's args %s: %v", raw, err)
		}
		out[a.Key]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// goEnqueue enqueues a with job, in a transaction of the caller's own
// (EnqueueTx) when inTx, else with Enqueue.
func goEnqueue(ctx context.Context, h *harness, job *bq.Job[Args], a Args, inTx bool) (bq.EnqueueResult, error) {
	if !inTx {
		return job.Enqueue(ctx, h.client, a)
	}
	var res bq.EnqueueResult
	err := h.client.InTx(ctx, func(ctx context.Context, tx bq.Tx) (err error) {
		res, err = job.EnqueueTx(ctx, h.client, tx, a)
		return err
	})
	return res, err
}

// count adds one Go attempt's result to t.
func countAttempt(t *attempts, res bq.EnqueueResult, err error, errs *[]error) {
	switch {
	case err != nil:
		*errs = append(*errs, err)
	case res.Duplicate:
		t.duplicate++
	case res.State == bq.StateDiscarded:
		t.discarded++
	default:
		t.stored++
	}
}

// runProducer runs cmd, testdata/inbox_producer.py or .mjs, as producer
// number producer, and reads its rows.
func runProducer(cmd *exec.Cmd, dsn, test string, producer, perKey int) ([]pyRow, error) {
	cmd.Args = append(cmd.Args, dsn, test, strconv.Itoa(producer), strconv.Itoa(perKey))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("producer %d (%s): %w: %s", producer, cmd.Args[1], err, stderr.String())
	}
	var rows []pyRow
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r pyRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("producer %d (%s): line %q: %w", producer, cmd.Args[1], sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}
