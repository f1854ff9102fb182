package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// ratedJob allows one start an hour per account: of three jobs of a key,
// the first is ready and two wait in the key's line.
var ratedJob = bq.Define("cli_test.rated", func(context.Context, inspectArgs) error { return nil },
	bq.JobOptions[inspectArgs]{Queue: "rated", Rate: &bq.Rate[inspectArgs]{
		Key: func(a inspectArgs) string { return a.Account }, Limit: 1, Period: time.Hour}})

// ratedDB migrates a fresh database of db and enqueues three jobs of
// rate key cli_test.rated/t1; it returns the DSN and the jobs' ids.
func ratedDB(t *testing.T, db testDatabase) (string, []int64) {
	t.Helper()
	ctx := context.Background()
	dsn := db.fresh(t)
	if code, out, errOut := bqCmd(t, ctx, "migrate", "up", "--dsn", dsn); code != 0 {
		t.Fatalf("migrate up: exit %d\n%s%s", code, out, errOut)
	}
	c, err := bq.Open(ctx, dsn, bq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ids []int64
	for range 3 {
		res, err := ratedJob.Enqueue(ctx, c, inspectArgs{Account: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	return dsn, ids
}

// TestRateCommand: bq rate list and show print a key's rate, recent
// starts, waiting jobs and line, as text and JSON; set overrides the
// rate (and list marks it), clear removes the override; bq explain of a
// job waiting for a start prints the rate part.
func TestRateCommand(t *testing.T) {
	const key = "cli_test.rated/t1"
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn, ids := ratedDB(t, db)
			text, err := runCmd(runRate, "list", "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, "KEY                RATE      RECENT  WAITING  NEXT START", key+"  1/1h0m0s  ")
			if strings.Contains(text, "override") {
				t.Errorf("bq rate list marks an override none set:\n%s", text)
			}
			if fields := strings.Fields(strings.Split(text, "\n")[1]); len(fields) < 4 || fields[3] != "2" {
				t.Errorf("bq rate list: want 2 waiting for %s:\n%s", key, text)
			}
			// bq status sums the rate keys of each group.
			if text, err := runCmd(runStatus, "--dsn", dsn); err != nil {
				t.Fatal(err)
			} else {
				wantIn(t, text, "RATE GROUPS", "GROUP           KEYS  WAITING  THROTTLED KEYS", "cli_test.rated  1     2        1")
			}
			text, err = runCmd(runRate, "list", "--json", "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			var rates []map[string]any
			if err := json.Unmarshal([]byte(text), &rates); err != nil || len(rates) != 1 || rates[0]["key"] != key || rates[0]["waiting"] != float64(2) {
				t.Errorf("bq rate list --json: %v\n%s", err, text)
			}
			if text, err = runCmd(runRate, "list", "--after", key, "--dsn", dsn); err != nil || !strings.Contains(text, "no rate keys") {
				t.Errorf("bq rate list --after the last key: %v\n%s", err, text)
			}

			text, err = runCmd(runRate, "show", key, "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, "Rate key "+key+": 1/1h0m0s, ", "2 waiting", "next start in ",
				"JOB", strconv.FormatInt(ids[1], 10)+"    cli_test.rated  rated", strconv.FormatInt(ids[2], 10))
			text, err = runCmd(runRate, "show", "--json", key, "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			var st map[string]any
			if err := json.Unmarshal([]byte(text), &st); err != nil {
				t.Fatalf("bq rate show --json: %v\n%s", err, text)
			}
			wantSnakeCase(t, "", st)
			if line, _ := st["line"].([]any); len(line) != 2 || st["limit"] != float64(1) {
				t.Errorf("bq rate show --json: %s", text)
			}

			text, err = runCmd(runExplain, "--dsn", dsn, strconv.FormatInt(ids[2], 10))
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, "): blocked\n", "Rate key "+key+": 1/1h0m0s", "this job is number 2 in line",
				"First in line: jobs "+strconv.FormatInt(ids[1], 10)+", "+strconv.FormatInt(ids[2], 10))

			if text, err = runCmd(runRate, "set", key, "5", "2s", "--dsn", dsn); err != nil || !strings.Contains(text, "set to 5/2s") {
				t.Fatalf("bq rate set: %v\n%s", err, text)
			}
			text, err = runCmd(runRate, "list", "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, key+"  5/2s (override)")
			if text, err = runCmd(runRate, "show", key, "--dsn", dsn); err != nil || strings.Contains(text, "waiting, next") {
				// A raised rate readies the waiting jobs at once.
				t.Errorf("bq rate show after raising the rate: %v, want none waiting\n%s", err, text)
			}
			if text, err = runCmd(runRate, "clear", key, "--dsn", dsn); err != nil || !strings.Contains(text, "override cleared") {
				t.Fatalf("bq rate clear: %v\n%s", err, text)
			}
			if text, err = runCmd(runRate, "show", key, "--dsn", dsn); err != nil || strings.Contains(text, "override") || !strings.Contains(text, "1/1h0m0s") {
				t.Errorf("bq rate show after clear: %v, want the jobs' own 1/1h without override\n%s", err, text)
			}
		})
	}
}

// TestRateCommandBadInput: missing arguments, a limit that is no number,
// a bad duration and flags of another action are usage errors naming the
// fix; a rate the client refuses is its error, printed as is.
func TestRateCommandBadInput(t *testing.T) {
	_, dsn := migratedSQLite(t)
	wantUsageErrors(t, runRate, "rate", dsn, []argsWant{
		{nil, "want an action"},
		{[]string{"frob"}, `unknown action "frob"`},
		{[]string{"show"}, "give one rate key"},
		{[]string{"clear", "a/b", "c/d"}, "give one rate key"},
		{[]string{"set", "a/b", "5"}, "give a rate key, a limit and a period"},
		{[]string{"set", "a/b", "five", "1s"}, `limit "five": use a whole number`},
		{[]string{"set", "a/b", "5", "soon"}, `period "soon": use a Go duration`},
		{[]string{"set", "a/b", "5", "0s"}, `period "0s"`},
		{[]string{"show", "a/b", "--after", "x"}, "--after is a flag of bq rate list"},
		{[]string{"set", "a/b", "5", "1s", "--json"}, "--json is a flag of bq rate list and show"},
		{[]string{"list", "extra"}, "unexpected argument"},
		{[]string{"list", "--max", "0"}, "--max 0: use 1 to 1000"},
	})
	wantInvalidArguments(t, runRate, "rate", dsn, []argsWant{
		{[]string{"set", "a/b", "0", "1s"}, "Limit is 0: use 1 to 10000"},
		{[]string{"set", "a/b", "1", "1500us"}, "use whole milliseconds"},
		{[]string{"show", "a/b\x00"}, "NUL"},
	})
	if code, _, errOut := bqCmd(t, context.Background(), "rate", "set", "a/b", "x", "1s", "--dsn", dsn); code != 2 || !strings.Contains(errOut, "run 'bq rate -h' for its flags") {
		t.Errorf("bq rate set with a bad limit: exit %d, stderr %q; want 2 with the hint to the usage", code, errOut)
	}
}

// argsWant is a command line of a command and what its error must say.
type argsWant struct {
	args []string
	want string
}

// wantUsageErrors runs command run (bq name) with each case's args and
// --dsn dsn, and wants a usage error whose message on stderr says want.
func wantUsageErrors(t *testing.T, run func(context.Context, *env, []string) error, name, dsn string, cases []argsWant) {
	t.Helper()
	for _, c := range cases {
		var out, errOut strings.Builder
		err := run(context.Background(), &env{stdout: &out, stderr: &errOut}, append(c.args, "--dsn", dsn))
		if !errors.Is(err, errUsage) || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("bq %s %q: %v, stderr %q; want a usage error saying %q", name, c.args, err, errOut.String(), c.want)
		}
	}
}

// wantInvalidArguments runs command run (bq name) with each case's args
// and --dsn dsn, and wants the client's ErrInvalidArgument saying want.
func wantInvalidArguments(t *testing.T, run func(context.Context, *env, []string) error, name, dsn string, cases []argsWant) {
	t.Helper()
	for _, c := range cases {
		_, err := runCmd(run, append(c.args, "--dsn", dsn)...)
		if !errors.Is(err, bq.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bq %s %q: %v, want the client's ErrInvalidArgument saying %q", name, c.args, err, c.want)
		}
	}
}
