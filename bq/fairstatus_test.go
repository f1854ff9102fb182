package main

import (
	"context"
	"strings"
	"testing"

	"github.com/bqueue/bq"
)

// bq status lists a fair-share queue's keys with their weights, running
// and ready jobs and shares, the furthest below its share first.
func TestStatusFairShares(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			dsn, c := migratedClient(t, ctx, db)
			if err := c.SyncPolicies(ctx, "cli", []bq.Policy{{Queue: "cli", FairShare: true, MaxActive: 9}}); err != nil {
				t.Fatal(err)
			}
			if err := c.SetKeyWeight(ctx, bq.Key("cli_test.inspect", "b"), 2); err != nil {
				t.Fatal(err)
			}
			for _, account := range []string{"a", "b"} {
				if _, err := inspectJob.Enqueue(ctx, c, inspectArgs{Account: account}); err != nil {
					t.Fatal(err)
				}
			}
			code, out, errOut := bqCmd(t, ctx, "status", "--dsn", dsn)
			if code != 0 {
				t.Fatalf("bq status: exit %d\n%s", code, errOut)
			}
			for _, want := range []string{
				"FAIR SHARE OF QUEUE cli (capacity 9; the furthest below its share first)",
				"KEY                 WEIGHT  RUNNING  READY  SHARE\ncli_test.inspect/b  2       0        1      6.0\ncli_test.inspect/a  1       0        1      3.0\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("bq status lacks %q:\n%s", want, out)
				}
			}
		})
	}
}
