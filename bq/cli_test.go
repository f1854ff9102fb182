package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every command's help writes its flags as the docs do, --dsn, never
// Go's -dsn.
func TestHelpWritesDoubleDashes(t *testing.T) {
	single := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	for _, c := range commands {
		code, stdout, stderr := bqCmd(t, context.Background(), c.name, "-h")
		if code != 0 {
			t.Errorf("bq %s -h: exit %d\n%s", c.name, code, stderr)
			continue
		}
		if m := single.FindString(stdout); m != "" {
			t.Errorf("bq %s -h writes a flag with one dash (%q):\n%s", c.name, m, stdout)
		}
		if !strings.Contains(stdout, "Flags:") {
			t.Errorf("bq %s -h has no flags section:\n%s", c.name, stdout)
		}
	}
	_, stdout, _ := bqCmd(t, context.Background(), "status", "-h")
	if !strings.Contains(stdout, "\n  --dsn DSN\n") || !strings.Contains(stdout, "\n  --prefix prefix\n") {
		t.Errorf("bq status -h lacks --dsn DSN and --prefix prefix:\n%s", stdout)
	}
}

// Bad usage prints the error and a hint, one line each, not the whole
// usage; flags in the error have two dashes.
func TestUsageErrorIsOneLineAndAHint(t *testing.T) {
	t.Setenv("BQ_DSN", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--bogus"}, "bq status: flag provided but not defined: --bogus\nrun 'bq status -h' for its flags\n"},
		{[]string{"status"}, "bq status: --dsn is required (or set BQ_DSN)\nrun 'bq status -h' for its flags\n"},
		{[]string{"jobs", "--limit", "many"}, "bq jobs: invalid value \"many\" for flag --limit: parse error\nrun 'bq jobs -h' for its flags\n"},
		{[]string{"migrate", "sideways", "--dsn", "sqlite::memory:"}, "bq migrate: unknown action \"sideways\": use up, down or status\nrun 'bq migrate -h' for its flags\n"},
		{[]string{"frobnicate"}, "bq: unknown command \"frobnicate\"\nrun 'bq help' for the commands\n"},
	} {
		code, stdout, stderr := bqCmd(t, context.Background(), tc.args...)
		if code != 2 || stderr != tc.want || stdout != "" {
			t.Errorf("bq %s: exit %d, stderr %q, stdout %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stderr, stdout, tc.want)
		}
	}
}

// `bq migrate up` on a database already at the latest version says
// there was nothing to do.
func TestMigrateUpNothingToDo(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := db.fresh(t)
			code, stdout, stderr := bqCmd(t, ctx, "migrate", "up", "--dsn", dsn)
			if code != 0 || !atLatest(stdout) || strings.Contains(stdout, "nothing to do") {
				t.Fatalf("first migrate up: exit %d\n%s%s", code, stdout, stderr)
			}
			code, stdout, stderr = bqCmd(t, ctx, "migrate", "up", "--dsn", dsn)
			if code != 0 || !strings.Contains(stdout, "migrate up: nothing to do; tables bq_* are already at the latest version") {
				t.Fatalf("second migrate up: exit %d\n%s%s; want it to say there was nothing to do", code, stdout, stderr)
			}
		})
	}
}

// terminal is a writer that says it is a terminal.
type terminal struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *terminal) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *terminal) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (*terminal) isTerminal() bool { return true }

// bq bench draws progress bars only on a terminal: piped to a file or a
// CI log, their redraws are noise.
func TestBenchProgressOnlyOnATerminal(t *testing.T) {
	args := []string{"bench", "--dsn", "sqlite", "--mode", "drain", "--jobs", "50", "--slots", "5", "--json"}
	code, _, stderr := bqCmd(t, context.Background(), args...)
	if code != 0 || strings.Contains(stderr, "jobs/") || strings.Contains(stderr, "%") {
		t.Fatalf("bq %s to a pipe: exit %d, stderr %q; want no progress bar", strings.Join(args, " "), code, stderr)
	}
	var out bytes.Buffer
	errOut := &terminal{}
	if code := run(context.Background(), args, &env{stdout: &out, stderr: errOut}); code != 0 || !strings.Contains(errOut.String(), "jobs/") {
		t.Fatalf("bq %s to a terminal: exit %d, stderr %q; want progress bars", strings.Join(args, " "), code, errOut)
	}
	// Behind the redactor that hides a DSN's password, stderr is still
	// the terminal it writes to.
	errOut = &terminal{}
	e, flush := (&env{stdout: &out, stderr: errOut}).redacting([]string{"a-long-secret"})
	if !isTerminal(e.stderr) {
		t.Error("the redactor hides that stderr is a terminal")
	}
	flush()
}

// A progress bar's rate is jobs over the time since the bar began, never
// the count over the nanoseconds since its first redraw (which showed
// 1066098081 jobs/s): here n jobs arrive evenly over 300ms.
func TestBarRate(t *testing.T) {
	const n, over = 1000, 300 * time.Millisecond
	errOut := &terminal{}
	b := &bencher{e: &env{stdout: &bytes.Buffer{}, stderr: errOut}, o: benchOptions{mode: "drain", progress: true}}
	start := time.Now()
	stop := b.bar(n, "enqueue", func() int64 { return int64(min(n, n*time.Since(start)/over)) })
	time.Sleep(over + 150*time.Millisecond)
	stop()
	rates := regexp.MustCompile(`(\d+) jobs/s`).FindAllStringSubmatch(errOut.String(), -1)
	if len(rates) == 0 {
		t.Fatalf("no rate drawn:\n%q", errOut)
	}
	want := float64(n) / over.Seconds()
	for _, m := range rates {
		if r, _ := strconv.Atoi(m[1]); float64(r) > 2*want {
			t.Errorf("bar drew %d jobs/s; jobs arrived at %.0f/s", r, want)
		}
	}
	if last, _ := strconv.Atoi(rates[len(rates)-1][1]); float64(last) < want/2 {
		t.Errorf("the finished bar shows %d jobs/s; jobs arrived at %.0f/s", last, want)
	}
}

// Run with `go run`, the demo prints follow-up commands that run the
// same way.
func TestCommandName(t *testing.T) {
	for _, tc := range []struct {
		arg0, cwd string
		hasBq     bool
		path, ver string
		want      string
	}{
		{"/usr/local/bin/bq", "/home/ann", false, "github.com/bqueue/bq/bq", "(devel)", "bq"},
		{"bq", "/src/bq", true, "github.com/bqueue/bq/bq", "(devel)", "bq"},
		{"/tmp/go-build123/b001/exe/bq", "/src/bq", true, "github.com/bqueue/bq/bq", "(devel)", "go run ./bq"},
		{"/root/.cache/go-build/4c/4ca3f807f840903abd2c6cfcf6416fb2df25d008ca4e94b9ba5a427e54bd5481-d/bq", "/src/bq", true, "github.com/bqueue/bq/bq", "(devel)", "go run ./bq"},
		{"/root/.cache/go-build/4c/4cxx-d/bq", "/src/bq", true, "github.com/bqueue/bq/bq", "(devel)", "bq"},
		{"/tmp/go-build123/b001/exe/bq", "/home/ann", false, "github.com/bqueue/bq/bq", "v0.2.0", "go run github.com/bqueue/bq/bq@v0.2.0"},
		{"/tmp/go-build123/b001/exe/bq", "/home/ann", false, "github.com/bqueue/bq/bq", "(devel)", "go run github.com/bqueue/bq/bq"},
	} {
		got := commandName(tc.arg0, func(string) bool { return tc.hasBq }, tc.path, tc.ver)
		if got != tc.want {
			t.Errorf("commandName(%q, ./bq there: %v, %s@%s) = %q, want %q", tc.arg0, tc.hasBq, tc.path, tc.ver, got, tc.want)
		}
	}

	var out bytes.Buffer
	d := &demo{e: &env{stdout: &out, stderr: &out, prog: "go run ./bq"}}
	d.afterwards("sqlite:///tmp/d/demo.db", "", "/tmp/d/demo.db", false)
	d.afterwards("postgres://u@h/db", "bq_demo_", "", false)
	for _, want := range []string{"run `go run ./bq demo --keep` to keep it",
		"  go run ./bq status --dsn postgres://u@h/db --prefix bq_demo_\n", "  go run ./bq ui --dsn postgres://u@h/db --prefix bq_demo_\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's follow-ups under go run lack %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	code := run(context.Background(), []string{"status", "--bogus"}, &env{stdout: &out, stderr: &out, prog: "go run ./bq"})
	if want := "run 'go run ./bq status -h' for its flags"; code != 2 || !strings.Contains(out.String(), want) {
		t.Errorf("usage hint under go run: exit %d, %q; want %q", code, out.String(), want)
	}
}

// bq queue pause of a queue no job uses pauses it and warns, on the
// command's stderr: the name may be a typo.
func TestQueuePauseWarnsOfUnusedQueue(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite://" + t.TempDir() + "/bq.db"
	if code, _, stderr := bqCmd(t, ctx, "migrate", "up", "--dsn", dsn); code != 0 {
		t.Fatalf("migrate up: %s", stderr)
	}
	code, stdout, stderr := bqCmd(t, ctx, "queue", "pause", "--dsn", dsn, "mial")
	if code != 0 || !strings.Contains(stdout, "queue mial paused") ||
		!strings.Contains(stderr, `no job kind defined in this process and no stored job uses the queue; it is paused anyway, ahead of its first job: check the name`) {
		t.Errorf("bq queue pause mial: exit %d, stdout %q, stderr %q; want it paused, with a warning", code, stdout, stderr)
	}
}
