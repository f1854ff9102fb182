package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
)

// TestStatusAndExplainShowAdaptedKeys: a key whose adaptive limit
// throttles lowered shows in bq status (ADAPTED KEYS, and adapted_keys in
// --json) and in the explanation of a job blocked on it; neither says a
// word while no key is lowered.
func TestStatusAndExplainShowAdaptedKeys(t *testing.T) {
	ctx := context.Background()
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn, c := migratedClient(t, ctx, db)
			id := lastOfLine(t, c, 2) // a ready job and one blocked behind it (limit 1)
			if text, err := runCmd(runStatus, "--dsn", dsn); err != nil || strings.Contains(text, "ADAPTED KEYS") {
				t.Errorf("bq status with no key adapted: %v, want no ADAPTED KEYS section\n%s", err, text)
			}
			if text, err := runCmd(runExplain, id, "--dsn", dsn); err != nil || strings.Contains(text, "adapts") {
				t.Errorf("bq explain of a job of a key not adapted: %v\n%s", err, text)
			}
			const key, rate = "cli_test.inspect/a1", "cli_test.rate/r1"
			ex := driver.ClientEngine(c).Exec()
			if err := ex.KeyAdaptSet(ctx, driver.KeyAdapt{Key: key, Limit: 1, Min: 1, Successes: 0, AdaptedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			// A rate's (Rate.Adaptive), filed under its line key: shown as
			// the rate key, marked a rate, first.
			if err := ex.KeyAdaptSet(ctx, driver.KeyAdapt{Key: driver.RateLine(rate), Limit: 3, Min: 2, AdaptedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			text, err := runCmd(runStatus, "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, "\nADAPTED KEYS (limits and rates lowered by bq.Throttled; they rise back with completions)\n"+
				"KEY                  OF     LIMIT         MIN  SUCCESSES  CHANGED\n"+
				rate+"     rate   3 per period  2    0          ")
			wantIn(t, text, "\n"+key+"  slots  1             1    0          ")
			text, err = runCmd(runStatus, "--dsn", dsn, "--json")
			if err != nil {
				t.Fatal(err)
			}
			var h bq.Health
			if err := json.Unmarshal([]byte(text), &h); err != nil || len(h.AdaptedKeys) != 2 || h.AdaptedKeys[1].Key != key || h.AdaptedKeys[1].Limit != 1 ||
				h.AdaptedKeys[1].Rate || h.AdaptedKeys[0].Key != rate || !h.AdaptedKeys[0].Rate ||
				!strings.Contains(text, `"adapted_keys": [`) {
				t.Errorf("bq status --json: %v, adapted keys %v\n%s", err, h.AdaptedKeys, text)
			}
			if text, err := runCmd(runExplain, id, "--dsn", dsn); err != nil || !strings.Contains(text, "Its key's limit adapts to its downstream (bq.Adaptive): throttled runs lowered it to 1 (min 1)") {
				t.Errorf("bq explain of a job blocked on an adapted key: %v\n%s", err, text)
			}
		})
	}
}
