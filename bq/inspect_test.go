package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/bqueue/bq"
)

type inspectArgs struct{ Account string }

var inspectJob = bq.Define("cli_test.inspect", func(context.Context, inspectArgs) error { return nil },
	bq.JobOptions[inspectArgs]{Queue: "cli", Concurrency: &bq.Concurrency[inspectArgs]{
		Key: func(a inspectArgs) string { return a.Account }, To: 1}})

// inspectDB returns the DSN of a SQLite database holding one ready job
// of key cli_test.inspect/a1 and two blocked behind it, and the last id.
func inspectDB(t *testing.T) (string, int64) {
	t.Helper()
	ctx := context.Background()
	dsn := "sqlite://" + t.TempDir() + "/cli.db"
	c, err := bq.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
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
		if err != nil && !strings.Contains(err.Error(), "--token") {
			t.Errorf("refusal does not say how to fix it: %v", err)
		}
	}
}
