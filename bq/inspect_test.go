package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

type inspectArgs struct{ Account string }

var inspectJob = bq.Define("cli_test.inspect", func(context.Context, inspectArgs) error { return nil },
	bq.JobOptions[inspectArgs]{Queue: "cli", Concurrency: &bq.Concurrency[inspectArgs]{
		Key: func(a inspectArgs) string { return a.Account }, To: 1}})

// migratedSQLite opens a client on a migrated SQLite file of the test's
// own, closed when the test ends, and returns it with its DSN.
func migratedSQLite(t *testing.T) (*bq.Client, string) {
	t.Helper()
	ctx := context.Background()
	dsn := "sqlite://" + t.TempDir() + "/cli.db"
	c, err := bq.Open(ctx, dsn, bq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return c, dsn
}

// claimAs registers a worker process named name and claims n jobs of
// queue for it, as its worker would; the claims stay open. It returns the
// process id and the claims.
func claimAs(t *testing.T, c *bq.Client, name, queue string, n int, hb time.Duration) (int64, []*driver.Claim) {
	t.Helper()
	ctx := context.Background()
	eng := driver.ClientEngine(c)
	proc, err := eng.Exec().ProcessRegister(ctx, driver.Process{Kind: "worker", Name: name, Hostname: "h",
		PID: 1, Queues: queue, HeartbeatInterval: hb, StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := lifecycle.Claim(ctx, eng, driver.ClaimParams{Queue: queue, Max: n, ProcessID: proc, Now: time.Now()})
	if err != nil || len(claims) != n {
		t.Fatalf("claim %d of %s: %v %v", n, queue, claims, err)
	}
	return proc, claims
}

// inspectDB returns the DSN of a SQLite database holding one ready job
// of key cli_test.inspect/a1 and two blocked behind it, and the last id.
func inspectDB(t *testing.T) (string, int64) {
	t.Helper()
	ctx := context.Background()
	c, dsn := migratedSQLite(t)
	var err error
	var last bq.EnqueueResult
	for range 3 {
		if last, err = inspectJob.Enqueue(ctx, c, inspectArgs{Account: "a1"}); err != nil {
			t.Fatal(err)
		}
	}
	return dsn, last.ID
}

// runCmd runs one subcommand and returns its error and stdout.
func runCmd(fn func(context.Context, *env, []string) error, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	err := fn(context.Background(), &env{stdout: &out, stderr: &errOut}, args)
	return out.String(), err
}

func TestStatusCommand(t *testing.T) {
	dsn, _ := inspectDB(t)
	text, err := runCmd(runStatus, "--dsn", dsn)
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.NewBufferString(text)
	for _, want := range []string{
		"QUEUE  READY  RUNNING  SCHEDULED  BLOCKED  FAILED  OLDEST READY",
		"cli    1      0        0          2        0",
		"cli_test.inspect  1      1     1       2        1",
		"cli_test.inspect/a1  1      1        0     2",
		"none registered",
		"INBOX\n  nothing waiting",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bq status output lacks %q:\n%s", want, out.String())
		}
	}
	text, err = runCmd(runStatus, "--dsn", dsn, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var h bq.Health
	if err := json.Unmarshal([]byte(text), &h); err != nil || len(h.TopKeys) != 1 || h.TopKeys[0].Blocked != 2 {
		t.Errorf("bq status --json: %v, %+v", err, h)
	}
}

func TestExplainCommand(t *testing.T) {
	dsn, last := inspectDB(t)
	text, err := runCmd(runExplain, strconv.FormatInt(last, 10), "--dsn", dsn)
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.NewBufferString(text)
	for _, want := range []string{"): blocked", `the holder of key "cli_test.inspect/a1", a ready job`, "1 ahead of it",
		"number 2 in line", "HOLDER  KIND              STATE"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bq explain output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := runCmd(runExplain, "--dsn", dsn, "x"); err == nil {
		t.Error("a job id that is not a number was accepted")
	}
}

func TestUIExposure(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"localhost:0", "", true},
		{"[::1]:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"192.0.2.1:8080", "", false},
		{"0.0.0.0:8080", "t", true},
	} {
		err := checkExposure(c.addr, c.token)
		if (err == nil) != c.ok {
			t.Errorf("addr %q token %q: %v, want ok=%v", c.addr, c.token, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--token-file") {
			t.Errorf("refusal does not say how to fix it: %v", err)
		}
	}
}

// hostile is a key built from a tenant name that retitles the terminal,
// erases lines and reverses what follows it. Keys are valid UTF-8, so its
// C1 CSI is the character U+009B; the process name below carries the
// stray byte 0x9b too.
const hostile = "acme\x1b]0;PWNED\x07\x1b[2K\r\x1b[1A\u202eexe.\u2066\u200f\u009b31m\xc2\x85\x7f\u200b\u2028\u3164\U000e0041 lit\\u202e"

// wantNoControls fails if out carries a byte or character that drives a
// terminal: C0 controls other than tab and newline, DEL, C1 controls,
// bidi overrides, isolates and marks.
func wantNoControls(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		bad := (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) ||
			(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f ||
			r == 0x200b || r == 0x2028 || r == 0x3164 || r == 0xe0041 ||
			(r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD"))
		if bad {
			t.Errorf("%s prints %U at byte %d: %q", what, r, i, out[max(0, i-20):min(len(out), i+20)])
			return
		}
	}
}

// TestTerminalEscapes: bq status and bq explain print a hostile key and
// process name with their control characters written out, never raw.
func TestTerminalEscapes(t *testing.T) {
	ctx := context.Background()
	c, dsn := migratedSQLite(t)
	var err error
	var last bq.EnqueueResult
	for range 2 {
		if last, err = inspectJob.Enqueue(ctx, c, inspectArgs{Account: hostile}); err != nil {
			t.Fatal(err)
		}
	}
	claimAs(t, c, "w\x1b]0;PWNED\x07\u202e\x9b31m", "cli", 1, time.Hour)
	for _, args := range [][]string{
		{"status", "--dsn", dsn},
		{"explain", "--dsn", dsn, strconv.FormatInt(last.ID, 10)},
		{"status", "--dsn", dsn, "--json"},
		{"explain", "--dsn", dsn, "--json", strconv.FormatInt(last.ID, 10)},
	} {
		fn := map[string]func(context.Context, *env, []string) error{"status": runStatus, "explain": runExplain}[args[0]]
		out, err := runCmd(fn, args[1:]...)
		if err != nil {
			t.Fatalf("bq %s: %v", strings.Join(args, " "), err)
		}
		what := "bq " + strings.Join(args, " ")
		wantNoControls(t, what, out)
		if !strings.Contains(out, `acme\u001b]0;PWNED\u0007\u001b[2K`) {
			t.Errorf("%s does not show the key's escapes written out:\n%s", what, out)
		}
		asJSON := args[len(args)-1] == "--json" || args[len(args)-2] == "--json"
		if !asJSON && !strings.Contains(out, `\u200b\u2028\u3164\U000e0041 lit\\u202e`) {
			t.Errorf("%s does not show the look-alikes written out and the spelled escape with its backslash doubled:\n%s", what, out)
		}
		if asJSON {
			var v any
			if err := json.Unmarshal([]byte(out), &v); err != nil || !strings.Contains(fmt.Sprint(v), hostile[:20]) {
				t.Errorf("%s is not JSON holding the key as it is: %v", what, err)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUIToken: bq ui never prints the token it was given, and a token
// holding ; " \ and a space logs in.
func TestUIToken(t *testing.T) {
	dsn, _ := inspectDB(t)
	const token = `s3;cr"e\t x-long-enough`
	for _, viaEnv := range []bool{false, true} {
		args := []string{"--dsn", dsn, "--addr", "127.0.0.1:0"}
		if viaEnv {
			t.Setenv("BQ_UI_TOKEN", token)
		} else {
			args = append(args, "--token", token)
		}
		var stderr syncBuffer
		ctx, cancel := context.WithCancel(context.Background())
		ready, done := make(chan string, 1), make(chan error, 1)
		go func() { done <- serveUI(ctx, &env{stdout: io.Discard, stderr: &stderr}, args, ready) }()
		var addr string
		select {
		case addr = <-ready:
		case err := <-done:
			t.Fatalf("bq ui: %v", err)
		}
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.Get("http://" + addr + "/processes?token=" + url.QueryEscape(token))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" {
			t.Errorf("log in with the token (env %v): %d at %s, want 200 without the token in the URL", viaEnv, resp.StatusCode, resp.Request.URL)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if out := stderr.String(); strings.Contains(out, "s3") || !strings.Contains(out, "?token=<token>") {
			t.Errorf("bq ui printed (env %v):\n%s\nwant no token, and how to pass it", viaEnv, out)
		}
	}
}

// TestStatusWatch: --watch redraws the report with the last hour's
// history as sparklines until its context ends (Ctrl-C), and returns
// nil then.
func TestStatusWatch(t *testing.T) {
	dsn, _ := inspectDB(t)
	ctx := context.Background()
	c, err := bq.Open(ctx, dsn, bq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hs, _ := driver.HistoryOf(driver.ClientEngine(c))
	now := time.Now().Truncate(time.Minute)
	var counts []driver.Throughput
	for i := range 10 {
		m := now.Add(-time.Duration(9-i) * time.Minute)
		counts = append(counts, driver.Throughput{Minute: m, Queue: "cli", Completed: i + 1})
		if i != 4 {
			_, err := hs.HistoryInsertSnapshot(ctx, driver.HistorySnapshot{Minute: m, TakenAt: m,
				Queues: []driver.QueueCounts{{Queue: "cli", Ready: 1, Blocked: i}},
				Keys:   []driver.Semaphore{{Key: "cli_test.inspect/a1", Blocked: i}}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := hs.HistoryAddThroughput(ctx, counts); err != nil {
		t.Fatal(err)
	}

	defer func(every time.Duration) { watchEvery = every }(watchEvery)
	watchEvery = 100 * time.Millisecond
	var out syncBuffer
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- runStatus(wctx, &env{stdout: &out, stderr: io.Discard}, []string{"--dsn", dsn, "--watch"})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(out.String(), "Ctrl-C to stop") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("bq status --watch returned %v after Ctrl-C, want nil", err)
	}
	text := out.String()
	if n := strings.Count(text, "QUEUES"); n < 2 {
		t.Fatalf("bq status --watch drew %d frames in 20s, want at least 2:\n%s", n, text)
	}
	frame := text[strings.LastIndex(text, "QUEUES"):]
	// 50 minutes of nothing, then 10 of 1 to 10 completed runs.
	completed := strings.Repeat("▁", 50) + sparkline([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, nil, 10)
	for _, want := range []string{
		"LAST HOUR",
		"completed  " + completed + "  10   10",
		// The blocked line has a blank where no snapshot was taken.
		"blocked    " + strings.Repeat(" ", 50) + "▁▂▃▄ ▅▆▇██  9    9",
		"cli_test.inspect/a1",
	} {
		if !strings.Contains(frame, want) {
			t.Errorf("the last frame lacks %q:\n%s", want, frame)
		}
	}
	if strings.Contains(text, clearScreen) {
		t.Error("a frame written to a non-terminal clears the screen")
	}
	if _, err := runCmd(runStatus, "--dsn", dsn, "--watch", "--json"); !errors.Is(err, errUsage) {
		t.Errorf("--watch with --json: %v, want a usage error", err)
	}
}

func TestSparkline(t *testing.T) {
	for _, c := range []struct {
		values []int
		known  []bool
		top    int
		want   string
	}{
		{[]int{0, 1, 50, 100}, nil, 100, "▁▂▅█"},
		{[]int{1}, nil, 1, "█"},
		{[]int{0, 0}, nil, 0, "▁▁"},
		{[]int{3, 7, 2}, []bool{true, false, true}, 3, "█ ▆"},
	} {
		if got := sparkline(c.values, c.known, c.top); got != c.want {
			t.Errorf("sparkline(%v, %v, %d) = %q, want %q", c.values, c.known, c.top, got, c.want)
		}
	}
}

func TestQueueCommand(t *testing.T) {
	dsn, _ := inspectDB(t)
	for range 2 { // pausing twice changes nothing more
		if text, err := runCmd(runQueue, "pause", "--dsn", dsn, "cli"); err != nil || !strings.Contains(text, "queue cli paused") {
			t.Fatalf("bq queue pause: %q, %v", text, err)
		}
	}
	text, err := runCmd(runStatus, "--dsn", dsn)
	if err != nil || !strings.Contains(text, "OLDEST READY  PAUSED") || !regexp.MustCompile(`cli +1 +0 +0 +2 +0 +\S+ +yes`).MatchString(text) {
		t.Errorf("bq status after a pause: %v\n%s", err, text)
	}
	if text, err := runCmd(runQueue, "resume", "--dsn", dsn, "cli"); err != nil || !strings.Contains(text, "queue cli resumed") {
		t.Fatalf("bq queue resume: %q, %v", text, err)
	}
	if text, err := runCmd(runStatus, "--dsn", dsn, "--json"); err != nil || strings.Contains(text, `"paused"`) {
		t.Errorf("bq status --json after the resume still shows a pause: %v\n%s", err, text)
	}
	for _, args := range [][]string{{"pause"}, {"stop", "cli"}, {"pause", "cli", "more"}} {
		if _, err := runCmd(runQueue, append(args, "--dsn", dsn)...); !errors.Is(err, errUsage) {
			t.Errorf("bq queue %v: %v, want a usage error", args, err)
		}
	}
	if _, err := runCmd(runQueue, "pause", "--dsn", dsn, "bad name"); err == nil || !strings.Contains(err.Error(), "queue name") {
		t.Errorf("bq queue pause 'bad name': %v, want the queue name rule", err)
	}
}
