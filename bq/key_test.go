package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// TestKeyCommand: bq key pause stores a key's pause (twice changes
// nothing more), list prints the paused keys as text and JSON (in key
// order), bq status prints them as PAUSED KEYS and in --json, resume
// removes one (twice changes nothing more), the same on every database.
func TestKeyCommand(t *testing.T) {
	ctx := context.Background()
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn, c := migratedClient(t, ctx, db)
			for range 2 { // a ready job and one blocked behind it (limit 1)
				if _, err := inspectJob.Enqueue(ctx, c, inspectArgs{Account: "a1"}); err != nil {
					t.Fatal(err)
				}
			}
			if text, err := runCmd(runKey, "list", "--dsn", dsn); err != nil || !strings.Contains(text, "no paused keys") {
				t.Errorf("bq key list with none: %v\n%s", err, text)
			}
			if text, err := runCmd(runStatus, "--dsn", dsn); err != nil || strings.Contains(text, "PAUSED KEYS") {
				t.Errorf("bq status with no key paused: %v, want no PAUSED KEYS section\n%s", err, text)
			}
			before := time.Now().Add(-time.Second)
			for _, key := range []string{"cli_test.inspect/a1", "other.kind/zeta", "cli_test.inspect/a1"} {
				text, err := runCmd(runKey, "pause", key, "--dsn", dsn)
				if err != nil || text != "key "+key+" paused: its jobs are not claimed until 'bq key resume'\n" {
					t.Fatalf("bq key pause %s: %v\n%s", key, err, text)
				}
			}
			text, err := runCmd(runKey, "list", "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, "KEY                  PAUSED AT\ncli_test.inspect/a1  ", " ago\nother.kind/zeta      ")
			text, err = runCmd(runKey, "list", "--json", "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			var ks []map[string]any
			if err := json.Unmarshal([]byte(text), &ks); err != nil || len(ks) != 2 || ks[0]["key"] != "cli_test.inspect/a1" ||
				ks[1]["key"] != "other.kind/zeta" || ks[0]["paused_at"] == nil {
				t.Errorf("bq key list --json: %v\n%s", err, text)
			}
			for _, k := range ks {
				wantSnakeCase(t, "", k)
			}

			text, err = runCmd(runStatus, "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, "\nPAUSED KEYS (their jobs wait until 'bq key resume')\nKEY                  PAUSED AT\ncli_test.inspect/a1  ", "\nother.kind/zeta      ")
			text, err = runCmd(runStatus, "--dsn", dsn, "--json")
			if err != nil {
				t.Fatal(err)
			}
			var h bq.Health
			if err := json.Unmarshal([]byte(text), &h); err != nil || len(h.PausedKeys) != 2 || h.PausedKeys[0].Key != "cli_test.inspect/a1" ||
				h.PausedKeys[1].Key != "other.kind/zeta" || h.PausedKeys[0].PausedAt.Before(before) || !strings.Contains(text, `"paused_keys": [`) {
				t.Errorf("bq status --json: %v, paused keys %v\n%s", err, h.PausedKeys, text)
			}

			for range 2 { // resuming a key that is not paused changes nothing
				text, err := runCmd(runKey, "resume", "cli_test.inspect/a1", "--dsn", dsn)
				if err != nil || text != "key cli_test.inspect/a1 resumed: its workers are woken\n" {
					t.Fatalf("bq key resume: %v\n%s", err, text)
				}
			}
			if text, err = runCmd(runKey, "list", "--dsn", dsn); err != nil || strings.Contains(text, "cli_test.inspect/a1") || !strings.Contains(text, "other.kind/zeta") {
				t.Errorf("bq key list after resuming cli_test.inspect/a1: %v, want other.kind/zeta alone\n%s", err, text)
			}
			if _, err := runCmd(runKey, "resume", "other.kind/zeta", "--dsn", dsn); err != nil {
				t.Fatal(err)
			}
			if text, err := runCmd(runStatus, "--dsn", dsn, "--json"); err != nil || strings.Contains(text, "paused_keys") {
				t.Errorf("bq status --json with every key resumed still lists paused keys: %v\n%s", err, text)
			}
		})
	}
}

// TestKeyCommandBadInput: a missing or extra key, an unknown action and
// --json with pause or resume are usage errors naming the fix; a key the
// client refuses is its error, printed as is.
func TestKeyCommandBadInput(t *testing.T) {
	_, dsn := migratedSQLite(t)
	wantUsageErrors(t, runKey, "key", dsn, []argsWant{
		{nil, "want an action"},
		{[]string{"stop", "a/b"}, `unknown action "stop": use pause, resume or list`},
		{[]string{"pause"}, "give one key, e.g. bq key pause"},
		{[]string{"resume", "a/b", "c/d"}, "give one key, e.g. bq key resume"},
		{[]string{"pause", "a/b", "--json"}, "--json is a flag of bq key list"},
		{[]string{"list", "extra"}, "unexpected argument"},
	})
	wantInvalidArguments(t, runKey, "key", dsn, []argsWant{
		{[]string{"pause", "acme"}, "the key has no group"},
		{[]string{"pause", ""}, "PauseKey"},
		{[]string{"resume", "acme"}, "ResumeKey"},
		{[]string{"pause", "a/b\x00"}, "NUL"},
	})
	if ks, err := runCmd(runKey, "list", "--dsn", dsn); err != nil || !strings.Contains(ks, "no paused keys") {
		t.Errorf("after refused pauses, bq key list: %v, want none paused\n%s", err, ks)
	}
	if code, _, errOut := bqCmd(t, context.Background(), "key", "pause", "--dsn", dsn); code != 2 || !strings.Contains(errOut, "run 'bq key -h' for its flags") {
		t.Errorf("bq key pause without a key: exit %d, stderr %q; want 2 with the hint to the usage", code, errOut)
	}
}
