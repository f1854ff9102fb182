package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// TestPolicyCommand: bq policy list prints the policies SyncPolicies
// stored, as text and JSON, the same on every database, fair share and
// its key weight, MaxWait and Adaptive included.
func TestPolicyCommand(t *testing.T) {
	ctx := context.Background()
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn, c := migratedClient(t, ctx, db)
			if text, err := runCmd(runPolicy, "list", "--dsn", dsn); err != nil || !strings.Contains(text, "No queue policies") {
				t.Errorf("bq policy list with none: %v\n%s", err, text)
			}
			err := c.SyncPolicies(ctx, "billing", []bq.Policy{
				{Queue: "charges", MaxActive: 20, MaxActivePerKey: 2, MaxWait: 90 * time.Second, Adaptive: &bq.Adaptive{Min: 1}},
				{Queue: "calls", MaxStartsPerKey: 10, StartsPeriod: time.Second, MaxBlocked: 500, FairShare: true},
				{Queue: "shared", FairShare: true, KeyWeight: 3},
			})
			if err != nil {
				t.Fatal(err)
			}
			text, err := runCmd(runPolicy, "list", "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, "QUEUE    NAMESPACE  MAX ACTIVE  PER KEY  MAX BLOCKED  MAX WAIT  RATE PER KEY  FAIR SHARE     ADAPTIVE  CHANGED",
				"calls    billing    -           -        500          -         10 per 1s     yes            -         ",
				"charges  billing    20          2        -            1m30s     -             -              min 1     ",
				"shared   billing    -           -        -            -         -             yes, weight 3  -         ")
			text, err = runCmd(runPolicy, "list", "--json", "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			var ps []map[string]any
			if err := json.Unmarshal([]byte(text), &ps); err != nil || len(ps) != 3 || ps[0]["queue"] != "calls" ||
				ps[0]["max_starts_per_key"] != float64(10) || ps[0]["starts_period_ms"] != float64(1000) || ps[1]["max_active"] != float64(20) ||
				ps[0]["fair_share"] != true || ps[0]["key_weight"] != float64(0) || ps[1]["fair_share"] != false ||
				ps[2]["fair_share"] != true || ps[2]["key_weight"] != float64(3) ||
				ps[1]["max_wait_us"] != float64(90e6) || ps[1]["adaptive_min"] != float64(1) || ps[0]["max_wait_us"] != float64(0) || ps[0]["adaptive_min"] != float64(0) {
				t.Errorf("bq policy list --json: %v\n%s", err, text)
			}
			if _, err := runCmd(runPolicy, "set", "--dsn", dsn); err == nil {
				t.Error("bq policy set: want an error naming list, the only action")
			}
		})
	}
}
