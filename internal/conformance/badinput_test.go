package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

var _ = register(
	scenario{"InvalidSpecs", testInvalidSpecs},
	scenario{"BadDSN", testBadDSN},
	scenario{"Unmigrated", testUnmigrated},
	scenario{"UnknownKindFailsTheJob", testUnknownKind},
	scenario{"UndecodableArgsFailTheJob", testUndecodableArgs},
	scenario{"ConcurrentMigrations", testConcurrentMigrations},
	scenario{"DuplicateDefinitionRefused", testDuplicateDefinition},
	scenario{"QueueNamesOneRule", testQueueNames},
	scenario{"KeysOneRule", testKeyRules},
	scenario{"ZeroLimitMeansTheDefault", testZeroLimit},
	scenario{"NonJobBadInputIsInvalidArgument", testInvalidArgument},
)

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func testInvalidSpecs(t *testing.T, h *harness) {
	ctx := context.Background()
	noop := func(context.Context, Args) error { return nil }
	cases := []struct {
		name string
		opts bq.JobOptions[Args]
		want []string
	}{
		{"negative To", bq.JobOptions[Args]{Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: -1}}, []string{"To is -1", "1 or more"}},
		{"negative Duration", bq.JobOptions[Args]{Concurrency: &bq.Concurrency[Args]{Key: keyOf, Duration: -time.Second}}, []string{"Duration is -1s", "positive"}},
		{"nil Key", bq.JobOptions[Args]{Concurrency: &bq.Concurrency[Args]{To: 2}}, []string{"Key is nil"}},
		{"negative MaxAttempts", bq.JobOptions[Args]{MaxAttempts: -3}, []string{"MaxAttempts is -3"}},
	}
	for _, c := range cases {
		j := bq.Define("c.invalid."+c.name, noop, c.opts)
		if !errors.Is(j.Err(), bq.ErrInvalidJob) {
			t.Errorf("%s: Err() = %v, want ErrInvalidJob", c.name, j.Err())
		}
		_, err := j.Enqueue(ctx, h.client, Args{Key: "k"})
		if !errors.Is(err, bq.ErrInvalidJob) {
			t.Errorf("%s: Enqueue error %v, want ErrInvalidJob", c.name, err)
		}
		wantErr(t, err, c.want...)
	}
	_, err := limit1Job.Enqueue(ctx, h.client, Args{Key: "k"}, bq.WithConcurrencyKey("k", -1))
	if !errors.Is(err, bq.ErrInvalidJob) {
		t.Errorf("WithConcurrencyKey(k, -1): %v, want ErrInvalidJob", err)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 0 {
		t.Errorf("%d jobs stored by invalid enqueues", n)
	}
}

func testBadDSN(t *testing.T, h *harness) {
	ctx := context.Background()
	_, err := bq.Open(ctx, "", bq.Config{})
	wantErr(t, err, "DSN is empty", "sqlite://")
	_, err = bq.Open(ctx, "mongodb://localhost/x", bq.Config{})
	wantErr(t, err, "unknown DSN", "mongodb")
	_, err = bq.Open(ctx, "postgres://nobody:secret@127.0.0.1:1/none?connect_timeout=2", bq.Config{})
	wantErr(t, err, "PostgreSQL")
	if err != nil && strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q leaks the password", err)
	}
	_, err = bq.Open(ctx, "sqlite:///nonexistent-dir-bq/sub/x.db", bq.Config{})
	wantErr(t, err, "SQLite")
}

func testUnmigrated(t *testing.T, h *harness) {
	ctx := context.Background()
	for _, db := range selected(t) {
		if db.name != h.db {
			continue
		}
		c, err := bq.Open(ctx, db.fresh(t), testConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = unkeyedJob.Enqueue(ctx, c, Args{})
		if !errors.Is(err, bq.ErrNotMigrated) {
			t.Errorf("Enqueue on an unmigrated database: %v, want ErrNotMigrated", err)
		}
		wantErr(t, err, "Migrate")
		if err := c.Run(ctx); !errors.Is(err, bq.ErrNotMigrated) {
			t.Errorf("Run on an unmigrated database: %v, want ErrNotMigrated", err)
		}
	}
}

// insertRaw stores a job as another binary might have, bypassing Define.
func insertRaw(t *testing.T, h *harness, kind, args string) int64 {
	t.Helper()
	ctx := context.Background()
	j := &driver.NewJob{Kind: kind, Queue: "default", Args: []byte(args), MaxAttempts: 3, ScheduledAt: time.Now()}
	err := driver.InTx(ctx, h.driver(), func(ex driver.Executor) error {
		_, _, err := lifecycle.Admit(ctx, ex, []*driver.NewJob{j}, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

func testUnknownKind(t *testing.T, h *harness) {
	id := insertRaw(t, h, "c.nobody.defines.this", `{}`)
	worker(h, 1)
	h.waitState(id, bq.StateFailed)
	info := jobInfo(t, h, id)
	if !strings.Contains(info.LastError, `unknown job kind "c.nobody.defines.this"`) {
		t.Errorf("error %q: want it to name the unknown kind", info.LastError)
	}
}

func testUndecodableArgs(t *testing.T, h *harness) {
	id := insertRaw(t, h, "c.once", `{"Seq": "not a number"}`)
	worker(h, 1)
	h.waitState(id, bq.StateFailed)
	info := jobInfo(t, h, id)
	if !strings.Contains(info.LastError, `decode args of job kind "c.once"`) {
		t.Errorf("error %q: want it to say the args did not decode", info.LastError)
	}
	if info.Attempts != 1 {
		t.Errorf("attempts %d: args that cannot decode must not be retried", info.Attempts)
	}
}

// testConcurrentMigrations: processes starting at once may all migrate a
// fresh database; each waits for the others (PostgreSQL: an advisory
// lock; MySQL: a named server lock; SQLite: a lock file), so none fails
// half-way on a table another just created.
func testConcurrentMigrations(t *testing.T, h *harness) {
	for _, db := range selected(t) {
		if db.name != h.db {
			continue
		}
		dsn := db.fresh(t)
		var cmds []*exec.Cmd
		for range 4 {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "BQ_HELPER=migrate", "BQ_DSN="+dsn)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("a migrating process failed: %v", err)
			}
		}
		if _, err := unkeyedJob.Enqueue(context.Background(), h.clientAt(dsn), Args{}); err != nil {
			t.Errorf("enqueue after the migrations: %v", err)
		}
	}
}

// here is its caller's file:line, as Define names its call site.
func here() string {
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%s:%d", file, line)
}

// duplicateReport is what duplicateMain saw.
type duplicateReport struct {
	FirstAt, SecondAt        string
	SecondErr, EnqueueErr    string
	SecondIsInvalid          bool
	FirstEnqueueErr          string
	RunErr, RunWorkersErr    string
	RunStarted, WorkersStart bool
}

// duplicateMain runs in a helper process of its own, since a duplicate
// definition stops every worker of its process: it defines "c.dup" twice
// and prints what each step returned as JSON.
func duplicateMain(ctx context.Context, client *bq.Client) int {
	noop := func(context.Context, Args) error { return nil }
	var r duplicateReport
	first, firstAt := bq.Define("c.dup", noop, bq.JobOptions[Args]{}), here()
	second, secondAt := bq.Define("c.dup", noop, bq.JobOptions[Args]{Queue: "dup"}), here()
	r.FirstAt, r.SecondAt = firstAt, secondAt
	if err := second.Err(); err != nil {
		r.SecondErr, r.SecondIsInvalid = err.Error(), errors.Is(err, bq.ErrInvalidJob)
	}
	if _, err := second.Enqueue(ctx, client, Args{}); err != nil {
		r.EnqueueErr = err.Error()
	}
	if _, err := first.Enqueue(ctx, client, Args{}); err != nil {
		r.FirstEnqueueErr = err.Error()
	}
	// A Run that starts runs until its context ends: bounded here.
	for _, run := range []struct {
		fn      func(context.Context) error
		err     *string
		started *bool
	}{{client.Run, &r.RunErr, &r.RunStarted}, {client.RunWorkers, &r.RunWorkersErr, &r.WorkersStart}} {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := run.fn(rctx)
		cancel()
		if err != nil {
			*run.err = err.Error()
		} else {
			*run.started = true
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "helper: report:", err)
		return 1
	}
	return 0
}

// testDuplicateDefinition: a second Define of a name is refused, naming
// both call sites; it is not registered, every enqueue through it returns
// that error, the first definition still works, and Run and RunWorkers
// refuse to start in the process with the same message: a worker must not
// start with a kind that two definitions claim. (In a helper process.)
func testDuplicateDefinition(t *testing.T, h *harness) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BQ_HELPER=duplicate", "BQ_DSN="+h.dsn)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the helper failed: %v\n%s", err, out)
	}
	var r duplicateReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("the helper's report: %v\n%s", err, out)
	}
	if r.SecondErr == "" || !r.SecondIsInvalid {
		t.Fatalf("second Define of \"c.dup\": Err() %q, ErrInvalidJob %v; want an ErrInvalidJob", r.SecondErr, r.SecondIsInvalid)
	}
	for _, want := range []string{`"c.dup"`, "defined twice", r.FirstAt, r.SecondAt} {
		if !strings.Contains(r.SecondErr, want) {
			t.Errorf("Err() %q does not mention %q", r.SecondErr, want)
		}
	}
	if r.EnqueueErr != r.SecondErr {
		t.Errorf("enqueue through the second definition: %q, want its Err(), %q", r.EnqueueErr, r.SecondErr)
	}
	if r.FirstEnqueueErr != "" {
		t.Errorf("enqueue through the first definition: %s; it stays registered and works", r.FirstEnqueueErr)
	}
	for name, got := range map[string]string{"Run": r.RunErr, "RunWorkers": r.RunWorkersErr} {
		if !strings.Contains(got, r.SecondErr) {
			t.Errorf("%s: %q, want it to refuse with %q", name, got, r.SecondErr)
		}
	}
	if r.RunStarted || r.WorkersStart {
		t.Errorf("Run started %v, RunWorkers started %v: neither may with a kind defined twice", r.RunStarted, r.WorkersStart)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs WHERE queue = 'dup'`); n != 0 {
		t.Errorf("%d jobs stored through the duplicate definition", n)
	}
}

// testQueueNames: one rule for queue names wherever they enter, checked
// before the database, with an error quoting the name and giving the rule.
func testQueueNames(t *testing.T, h *harness) {
	ctx := context.Background()
	noop := func(context.Context, Args) error { return nil }
	const rule = "ASCII letters, digits, '_', '-', '.' or ':', starting with a letter or digit"
	bad := []string{"bad queue name\n", "", " lead", "-dash", "tab\there", "nul\x00", "\xff\xfe", "ünï", "a/b", strings.Repeat("q", 129)}
	for _, q := range bad {
		if q != "" { // an empty JobOptions.Queue is the default
			j := bq.Define("c.badqueue", noop, bq.JobOptions[Args]{Queue: q})
			if !errors.Is(j.Err(), bq.ErrInvalidJob) {
				t.Errorf("Define with Queue %q: Err() %v, want ErrInvalidJob", q, j.Err())
			}
			wantErr(t, j.Err(), rule)
		}
		_, err := unkeyedJob.Enqueue(ctx, h.client, Args{}, bq.Queue(q))
		if !errors.Is(err, bq.ErrInvalidJob) {
			t.Errorf("bq.Queue(%q): %v, want ErrInvalidJob", q, err)
		}
		wantErr(t, err, "bq.Queue option", rule)
		if len(q) <= 64 && err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", q)) {
			t.Errorf("bq.Queue(%q): %q does not quote the name", q, err)
		}
		cfg := testConfig()
		cfg.Queues = map[string]int{q: 1}
		if c, err := bq.Open(ctx, h.dsn, cfg); err == nil {
			c.Close()
			t.Errorf("Config.Queues[%q]: accepted", q)
		} else {
			if !errors.Is(err, bq.ErrInvalidArgument) {
				t.Errorf("Config.Queues[%q]: %v, want ErrInvalidArgument", q, err)
			}
			wantErr(t, err, "Config.Queues", rule)
		}
		err = h.client.SyncPolicies(ctx, "c.test", []bq.Policy{{Queue: q, MaxActive: 1}})
		if !errors.Is(err, bq.ErrInvalidArgument) {
			t.Errorf("SyncPolicies with Queue %q: %v, want ErrInvalidArgument", q, err)
		}
		wantErr(t, err, "Policy.Queue", rule)
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`) + h.count(`SELECT count(*) FROM bq_policies`); n != 0 {
		t.Errorf("%d rows stored by refused input", n)
	}
	for _, q := range []string{"default", "a", "Q9", "mail.high:eu-west_1", strings.Repeat("q", 128)} {
		res, err := unkeyedJob.Enqueue(ctx, h.client, Args{}, bq.Queue(q))
		if err != nil {
			t.Errorf("bq.Queue(%q): %v", q, err)
			continue
		}
		if info := jobInfo(t, h, res.ID); info.Queue != q {
			t.Errorf("stored queue %q, want %q", info.Queue, q)
		}
	}
}

// testKeyRules: a full key (Group + "/" + Key) is at most bq.MaxKeyBytes
// of valid UTF-8 without NUL bytes on every database: one at the limit is
// stored whole, in any script; one over it, or with a NUL byte or invalid
// UTF-8, is refused before the database, whatever path it takes, with the
// same error on every database, and nothing is stored.
func testKeyRules(t *testing.T, h *harness) {
	ctx := context.Background()
	prefix := "c.limit1/"
	atLimit := strings.Repeat("🔑", (bq.MaxKeyBytes-len(prefix))/4)
	atLimit += strings.Repeat("k", bq.MaxKeyBytes-len(prefix)-len(atLimit))
	res := enqueue(t, h, limit1Job, Args{Key: atLimit})
	if info := jobInfo(t, h, res.ID); info.Key != prefix+atLimit || len(info.Key) != bq.MaxKeyBytes {
		t.Fatalf("stored key is %d bytes, want the full %d", len(info.Key), bq.MaxKeyBytes)
	}
	if _, err := limit1Job.Enqueue(ctx, h.client, Args{}, bq.WithConcurrencyKey(atLimit, 1)); err != nil {
		t.Errorf("WithConcurrencyKey at the limit: %v", err)
	}
	k, err := h.client.KeyState(ctx, prefix+atLimit)
	if err != nil || !k.Exists {
		t.Errorf("KeyState at the limit: %+v, %v", k, err)
	}

	stored := h.count(`SELECT count(*) FROM bq_jobs`)
	for what, c := range map[string]struct {
		key  string
		want string
	}{
		"too long":      {atLimit + "x", "bytes long"},
		"NUL":           {"a\x00b", "has a NUL byte"},
		"invalid UTF-8": {"caf\xe9", "is not valid UTF-8"},
	} {
		for path, try := range map[string]func() error{
			"due": func() error {
				_, err := limit1Job.Enqueue(ctx, h.client, Args{Key: c.key})
				return err
			},
			"scheduled": func() error {
				_, err := limit1Job.Enqueue(ctx, h.client, Args{Key: c.key}, bq.In(time.Hour))
				return err
			},
			"batch": func() error {
				_, err := limit1Job.EnqueueMany(ctx, h.client, []Args{{Key: "fine"}, {Key: c.key}})
				return err
			},
			"WithConcurrencyKey": func() error {
				_, err := unkeyedJob.Enqueue(ctx, h.client, Args{}, bq.WithConcurrencyKey(c.key, 1))
				return err
			},
		} {
			err := try()
			if !errors.Is(err, bq.ErrInvalidJob) {
				t.Errorf("%s key, %s: %v, want ErrInvalidJob", what, path, err)
			}
			wantErr(t, err, "concurrency key", c.want, "bq.MaxKeyBytes")
			if err != nil && strings.Contains(err.Error(), atLimit) {
				t.Errorf("%s key, %s: the error repeats the whole key", what, path)
			}
		}
		full := prefix + c.key
		for name, try := range map[string]func() error{
			"SetKeyLimit":   func() error { return h.client.SetKeyLimit(ctx, full, 2) },
			"ClearKeyLimit": func() error { return h.client.ClearKeyLimit(ctx, full) },
			"KeyState": func() error {
				_, err := h.client.KeyState(ctx, full)
				return err
			},
		} {
			err := try()
			if !errors.Is(err, bq.ErrInvalidArgument) {
				t.Errorf("%s of a %s key: %v, want ErrInvalidArgument", name, what, err)
			}
			wantErr(t, err, name, c.want)
		}
	}
	if g := bq.Define("c.badgroup", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, Group: "g\x00"}}); !errors.Is(g.Err(), bq.ErrInvalidJob) {
		t.Errorf("Group with a NUL byte: Err() %v, want ErrInvalidJob", g.Err())
	}
	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != stored {
		t.Errorf("%d jobs stored by refused enqueues", n-stored)
	}
	if n := h.count(`SELECT count(*) FROM bq_key_limits`); n != 0 {
		t.Errorf("%d key limits stored by refused calls", n)
	}
}

// testZeroLimit: WithConcurrencyKey(key, 0) means what Concurrency.To = 0
// means, the default: the queue policy's MaxActivePerKey, else 1. A
// negative limit is refused by both with the same words.
func testZeroLimit(t *testing.T, h *harness) {
	ctx := context.Background()
	limitOf := func(key string) int {
		t.Helper()
		k, err := h.client.KeyState(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return k.Limit
	}
	a := enqueue(t, h, unkeyedJob, Args{}, bq.WithConcurrencyKey("z", 0))
	b := enqueue(t, h, unkeyedJob, Args{}, bq.WithConcurrencyKey("z", 0))
	if a.State == bq.StateBlocked || b.State != bq.StateBlocked || limitOf("c.unkeyed/z") != 1 {
		t.Errorf("no policy: %+v, %+v, limit %d; want the default 1: the second blocked", a, b, limitOf("c.unkeyed/z"))
	}
	if err := h.client.SyncPolicies(ctx, "c.test", []bq.Policy{{Queue: "zq", MaxActivePerKey: 3}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if r := enqueue(t, h, unkeyedJob, Args{}, bq.Queue("zq"), bq.WithConcurrencyKey("zp", 0)); r.State == bq.StateBlocked {
			t.Errorf("policy MaxActivePerKey 3: job blocked before 3 held the key")
		}
	}
	if r := enqueue(t, h, unkeyedJob, Args{}, bq.Queue("zq"), bq.WithConcurrencyKey("zp", 0)); r.State != bq.StateBlocked || limitOf("c.unkeyed/zp") != 3 {
		t.Errorf("policy MaxActivePerKey 3: fourth %+v, limit %d; want blocked at 3", r, limitOf("c.unkeyed/zp"))
	}

	const words = "To is -1: use 1 or more jobs at once per key, or 0 for the default"
	_, err := unkeyedJob.Enqueue(ctx, h.client, Args{}, bq.WithConcurrencyKey("z", -1))
	wantErr(t, err, words)
	j := bq.Define("c.negativeto", behave, bq.JobOptions[Args]{Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: -1}})
	wantErr(t, j.Err(), words)
	h.checkSemaphores()
}

// testInvalidArgument: bad input that is not a job (a key limit, a
// policy, a Config) is bq.ErrInvalidArgument, not ErrInvalidJob, and the
// message names the argument and the fix.
func testInvalidArgument(t *testing.T, h *harness) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		err  error
		want []string
	}{
		{"SetKeyLimit(k, -1)", h.client.SetKeyLimit(ctx, "c.limit1/k", -1), []string{`SetKeyLimit("c.limit1/k", -1)`, "limit is -1", "1 or more", "ClearKeyLimit"}},
		{"SetKeyLimit(k, 0)", h.client.SetKeyLimit(ctx, "c.limit1/k", 0), []string{"limit is 0", "ClearKeyLimit"}},
		{"SetKeyLimit(\"\", 2)", h.client.SetKeyLimit(ctx, "", 2), []string{"SetKeyLimit", "key is empty", "bq.Key(group, key)"}},
		{"ClearKeyLimit(\"\")", h.client.ClearKeyLimit(ctx, ""), []string{"ClearKeyLimit", "key is empty"}},
		{"SyncPolicies without a namespace", h.client.SyncPolicies(ctx, "", nil), []string{"namespace is empty"}},
		{"SyncPolicies negative", h.client.SyncPolicies(ctx, "c.test", []bq.Policy{{Queue: "q", MaxActive: -1}}), []string{"MaxActive -1", "0 (no limit) or more"}},
	} {
		if !errors.Is(c.err, bq.ErrInvalidArgument) || errors.Is(c.err, bq.ErrInvalidJob) {
			t.Errorf("%s: %v, want ErrInvalidArgument (and not ErrInvalidJob)", c.name, c.err)
		}
		wantErr(t, c.err, c.want...)
		if c.err != nil && strings.Contains(c.err.Error(), "invalid job") {
			t.Errorf("%s: %q speaks of a job", c.name, c.err)
		}
	}
	cfg := testConfig()
	cfg.PollInterval = -time.Second
	if c, err := bq.Open(ctx, h.dsn, cfg); !errors.Is(err, bq.ErrInvalidArgument) {
		t.Errorf("a negative PollInterval: %v, want ErrInvalidArgument", err)
		if err == nil {
			c.Close()
		}
	}
	if n := h.count(`SELECT count(*) FROM bq_key_limits`) + h.count(`SELECT count(*) FROM bq_policies`); n != 0 {
		t.Errorf("%d rows stored by refused calls", n)
	}
}
