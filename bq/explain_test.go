package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

var pairJob = bq.Define("cli_test.pair", func(context.Context, inspectArgs) error { return nil },
	bq.JobOptions[inspectArgs]{Queue: "pairs", Concurrency: &bq.Concurrency[inspectArgs]{
		Key: func(a inspectArgs) string { return a.Account }, To: 2}})

// instant is how bq writes instants: RFC 3339, UTC, to the second.
var instant = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?`)

// TestExplainWording: bq explain says who would move a job on, and only
// what is true: a ready holder's queue that no live process works, one
// sentence per process that stopped heartbeating, no promise of a
// dispatcher when none is alive, one way of writing instants, and JSON in
// snake_case with the args as JSON and the key's line filled.
func TestExplainWording(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			dsn, c := migratedClient(t, ctx, db)
			var err error
			// Key a1 of queue cli: a ready holder, a job blocked behind it.
			var ready, behindReady bq.EnqueueResult
			for _, r := range []*bq.EnqueueResult{&ready, &behindReady} {
				if *r, err = inspectJob.Enqueue(ctx, c, inspectArgs{Account: "a1"}); err != nil {
					t.Fatal(err)
				}
			}
			// Key p of queue pairs (limit 2): two running on one process,
			// 58 blocked.
			const pairs = 60
			args := make([]inspectArgs, pairs)
			for i := range args {
				args[i].Account = "p"
			}
			results, err := pairJob.EnqueueMany(ctx, c, args)
			if err != nil {
				t.Fatal(err)
			}
			proc, claims := claimAs(t, c, "newcomer-worker", "pairs", 2, time.Second)
			last := results[pairs-1].ID

			// An hour on, the worker has stopped heartbeating, and no
			// dispatcher has ever run.
			later, err := bq.Open(ctx, dsn, bq.Config{Now: func() time.Time { return time.Now().Add(time.Hour) }})
			if err != nil {
				t.Fatal(err)
			}
			defer later.Close()
			texts := map[string]string{}
			for name, id := range map[string]int64{"ready": ready.ID, "behind a ready holder": behindReady.ID, "behind a dead process": last, "running": claims[0].ID} {
				e, err := later.Explain(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				if err := printExplanation(&buf, e); err != nil {
					t.Fatal(err)
				}
				texts[name] = buf.String()
				t.Logf("%s:\n%s", name, texts[name])
			}
			wantIn(t, texts["behind a ready holder"], `No live process works queue "cli", where 1 ready holder waits: start a worker that does.`)
			dead := texts["behind a dead process"]
			wantIn(t, dead, "Process newcomer-worker (#"+strconv.FormatInt(proc, 10)+") stopped heartbeating while running jobs "+
				strconv.FormatInt(claims[0].ID, 10)+" and "+strconv.FormatInt(claims[1].ID, 10)+": their claims will be reaped once a dispatcher runs.",
				"No live dispatcher is registered", "First in line: jobs ", "and 48 more")
			if n := strings.Count(dead, "stopped heartbeating"); n != 1 {
				t.Errorf("one process stopped heartbeating, the explanation says so %d times:\n%s", n, dead)
			}
			wantIn(t, texts["running"], "no live dispatcher is registered to reap the claim")
			wantIn(t, texts["ready"], "Ready since 20", `No live process works queue "cli"`)
			for name, text := range texts {
				if strings.Contains(text, "the dispatcher will") || strings.Contains(text, "since at") || strings.Contains(text, "at at") {
					t.Errorf("%s: the explanation promises a dispatcher none runs, or doubles a preposition:\n%s", name, text)
				}
				for _, at := range instant.FindAllString(text, -1) {
					if _, err := time.Parse("2006-01-02T15:04:05Z", at); err != nil {
						t.Errorf("%s: instant %q is not RFC 3339 UTC to the second:\n%s", name, at, text)
					}
				}
			}

			code, out, errOut := bqCmd(t, ctx, "explain", "--json", "--dsn", dsn, strconv.FormatInt(last, 10))
			if code != 0 {
				t.Fatalf("explain --json: exit %d\n%s", code, errOut)
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("explain --json: %v\n%s", err, out)
			}
			wantSnakeCase(t, "", doc)
			job, _ := doc["job"].(map[string]any)
			if args, ok := job["args"].(map[string]any); !ok || args["Account"] != "p" {
				t.Errorf("explain --json: job.args = %#v, want the args as a JSON object", job["args"])
			}
			key, _ := doc["key"].(map[string]any)
			if line, _ := key["line"].([]any); len(line) != 50 || key["blocked"] != float64(pairs-2) {
				t.Errorf("explain --json: key.line holds %d jobs of %v blocked, want the first 50", len(line), key["blocked"])
			}
		})
	}
}

func wantIn(t *testing.T, text string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Errorf("output lacks %q:\n%s", p, text)
		}
	}
}

// wantSnakeCase fails on a JSON object key that is not snake_case.
func wantSnakeCase(t *testing.T, path string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(k) && path != ".job.args" {
				t.Errorf("JSON key %s.%s is not snake_case", path, k)
			}
			wantSnakeCase(t, path+"."+k, x)
		}
	case []any:
		for _, x := range v {
			wantSnakeCase(t, path+"[]", x)
		}
	}
}
