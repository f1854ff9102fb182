package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/bqueue/bq"
)

// TestExplainSaysUnique: bq explain names a unique job's key, and says
// nothing of one for a job that is not unique.
func TestExplainSaysUnique(t *testing.T) {
	ctx := context.Background()
	c, dsn := migratedSQLite(t)
	unique, err := inspectJob.Enqueue(ctx, c, inspectArgs{Account: "u1"}, bq.WithUnique(bq.Unique{ByArgs: true}))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := inspectJob.Enqueue(ctx, c, inspectArgs{Account: "u2"})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := bqCmd(t, ctx, "explain", "--dsn", dsn, fmt.Sprint(unique.ID))
	if code != 0 || !regexp.MustCompile(`(?m)^Unique: key [0-9a-f]{64}$`).MatchString(out) {
		t.Errorf("explain of unique job %d: exit %d\n%s%s\nwant a line naming its unique key", unique.ID, code, out, errOut)
	}
	code, out, errOut = bqCmd(t, ctx, "explain", "--dsn", dsn, fmt.Sprint(plain.ID))
	if code != 0 || strings.Contains(out, "Unique") {
		t.Errorf("explain of plain job %d: exit %d\n%s%s\nwant no unique line", plain.ID, code, out, errOut)
	}
}
