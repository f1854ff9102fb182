package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// TestJobsCommand: bq jobs filters by key prefix, metadata, tag and
// state, prints a table with the command for the next page, which lists
// the rest, and --json prints the page in snake_case; bq explain shows a
// job's metadata and tags.
func TestJobsCommand(t *testing.T) {
	ctx := context.Background()
	c, dsn := migratedSQLite(t)
	var ids []int64
	for _, acct := range []string{"acme-1", "acme-2", "acme-3", "globex"} {
		res, err := inspectJob.Enqueue(ctx, c, inspectArgs{Account: acct},
			bq.WithMetadata(map[string]string{"tenant": strings.Split(acct, "-")[0]}), bq.WithTags("cli"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	code, out, errOut := bqCmd(t, ctx, "jobs", "--dsn", dsn, "--key-prefix", "cli_test.inspect/acme-", "--meta", "tenant=acme",
		"--tag", "cli", "--state", "ready", "--limit", "2")
	if code != 0 {
		t.Fatalf("bq jobs: exit %d\n%s%s", code, out, errOut)
	}
	// acme-1 is ready (it holds its key's slot), as are acme-2 and acme-3 (keys of their own).
	for _, want := range []string{"ID", "KIND", "cli_test.inspect/acme-3", "cli_test.inspect/acme-2", "Metadata: tenant=acme; tags: cli"} {
		if !strings.Contains(out, want) {
			t.Errorf("bq jobs output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "acme-1") || strings.Contains(out, "globex") {
		t.Errorf("the first page of 2 lists more than the two newest acme jobs:\n%s", out)
	}
	next := regexp.MustCompile(`Next page: bq (jobs .*)\n`).FindStringSubmatch(out)
	if next == nil {
		t.Fatalf("no next-page command in:\n%s", out)
	}
	args := strings.Fields(next[1])
	code, out, errOut = bqCmd(t, ctx, args...)
	if code != 0 || !strings.Contains(out, "cli_test.inspect/acme-1") || strings.Contains(out, "acme-2") || strings.Contains(out, "Next page") {
		t.Errorf("the next-page command %q: exit %d, want acme-1 alone and no further page:\n%s%s", next[1], code, out, errOut)
	}

	code, out, errOut = bqCmd(t, ctx, "jobs", "--dsn", dsn, "--key", "cli_test.inspect/globex", "--json")
	if code != 0 {
		t.Fatalf("bq jobs --json: exit %d\n%s%s", code, out, errOut)
	}
	var page struct {
		Jobs []struct {
			ID       int64             `json:"id"`
			Metadata map[string]string `json:"metadata"`
			Tags     []string          `json:"tags"`
		} `json:"jobs"`
		Next *string `json:"next"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("--json is not JSON: %v\n%s", err, out)
	}
	if len(page.Jobs) != 1 || page.Jobs[0].ID != ids[3] || page.Jobs[0].Metadata["tenant"] != "globex" || page.Next != nil {
		t.Errorf("--json page = %+v, want job %d with its metadata and no next", page, ids[3])
	}

	code, out, errOut = bqCmd(t, ctx, "explain", "--dsn", dsn, strconv.FormatInt(ids[0], 10))
	if code != 0 || !strings.Contains(out, "Metadata: tenant=acme; tags: cli") {
		t.Errorf("bq explain of a job with metadata: exit %d, want its metadata and tags:\n%s%s", code, out, errOut)
	}
	code, out, _ = bqCmd(t, ctx, "jobs", "--dsn", dsn, "--tag", "nope")
	if code != 0 || !strings.Contains(out, "No jobs match.") {
		t.Errorf("an empty page: exit %d, %q; want it said", code, out)
	}
}

// TestJobsBadInput: bad flags are usage errors naming the fix; a bad
// cursor is the filter's error.
func TestJobsBadInput(t *testing.T) {
	ctx := context.Background()
	_, dsn := migratedSQLite(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--state", "done"}, 2, "use one of scheduled, blocked"},
		{[]string{"--key", "a/b", "--key-prefix", "a/"}, 2, "not both"},
		{[]string{"--meta", "novalue"}, 2, "key=value"},
		{[]string{"--created-after", "yesterday"}, 2, "RFC 3339"},
		{[]string{"--after", "x"}, 1, "cursor"},
		{[]string{"--limit", "501"}, 1, "use 1 to 500"},
	} {
		code, out, errOut := bqCmd(t, ctx, append([]string{"jobs", "--dsn", dsn}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("bq jobs %q: exit %d, stderr %q (stdout %q); want exit %d saying %q", tc.args, code, errOut, out, tc.code, tc.want)
		}
	}
}

// TestJobsErrorColumn: bq jobs --state failed shows why each job failed,
// in an ERROR column (the error's first line, cut to 80 characters); a
// page with no error has no such column. On every database.
func TestJobsErrorColumn(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			dsn, c := migratedClient(t, ctx, db)
			for _, account := range []string{"e1", "e2", "e3"} {
				if _, err := inspectJob.Enqueue(ctx, c, inspectArgs{Account: account}); err != nil {
					t.Fatal(err)
				}
			}
			_, claims := claimAs(t, c, "error-worker", "cli", 2, time.Hour)
			long := "charge declined: " + strings.Repeat("x", 100) + "\ngoroutine 1 [running]"
			for i, msg := range []string{"smtp: 550 mailbox unavailable", long} {
				err := driver.InTx(ctx, driver.ClientEngine(c), func(ex driver.Executor) error {
					_, err := lifecycle.Fail(ctx, ex, claims[i], msg, time.Now())
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			code, out, errOut := bqCmd(t, ctx, "jobs", "--dsn", dsn, "--state", "failed")
			if code != 0 {
				t.Fatalf("bq jobs --state failed: exit %d\n%s%s", code, out, errOut)
			}
			header, _, _ := strings.Cut(out, "\n")
			if !strings.HasSuffix(strings.TrimSpace(header), "ERROR") {
				t.Errorf("bq jobs --state failed: header %q, want an ERROR column last", header)
			}
			cut := "charge declined: " + strings.Repeat("x", 80-len("charge declined: ")) + "…"
			if !strings.Contains(out, "smtp: 550 mailbox unavailable") || !strings.Contains(out, cut+"\n") || strings.Contains(out, "goroutine") {
				t.Errorf("bq jobs --state failed:\n%s\nwant each job's error, the long one's first 80 characters and an ellipsis", out)
			}
			code, out, errOut = bqCmd(t, ctx, "jobs", "--dsn", dsn, "--state", "ready")
			if code != 0 || strings.Contains(out, "ERROR") || !strings.Contains(out, "LABELS") {
				t.Errorf("bq jobs --state ready: exit %d, want no ERROR column:\n%s%s", code, out, errOut)
			}
		})
	}
}
