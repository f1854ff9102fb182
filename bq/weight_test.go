package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestWeightCommand: bq weight set stores a key's fair-share weight, list
// prints the stored weights as text and JSON (in key order), set again
// changes one, clear removes it, the same on every database.
func TestWeightCommand(t *testing.T) {
	ctx := context.Background()
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn, _ := migratedClient(t, ctx, db)
			if text, err := runCmd(runWeight, "list", "--dsn", dsn); err != nil || !strings.Contains(text, "no key weights") {
				t.Errorf("bq weight list with none: %v\n%s", err, text)
			}
			for _, kw := range [][2]string{{"api/zeta", "2"}, {"api/acme", "3"}, {"api/zeta", "1000"}} {
				text, err := runCmd(runWeight, "set", kw[0], kw[1], "--dsn", dsn)
				if err != nil || !strings.Contains(text, "key "+kw[0]+" weight set to "+kw[1]) {
					t.Fatalf("bq weight set %s %s: %v\n%s", kw[0], kw[1], err, text)
				}
			}
			text, err := runCmd(runWeight, "list", "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, "KEY       WEIGHT  CHANGED\napi/acme  3       ", "\napi/zeta  1000    ")
			text, err = runCmd(runWeight, "list", "--json", "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			var ws []map[string]any
			if err := json.Unmarshal([]byte(text), &ws); err != nil || len(ws) != 2 || ws[0]["key"] != "api/acme" ||
				ws[0]["weight"] != float64(3) || ws[1]["key"] != "api/zeta" || ws[1]["weight"] != float64(1000) || ws[0]["updated_at"] == nil {
				t.Errorf("bq weight list --json: %v\n%s", err, text)
			}
			for _, w := range ws {
				wantSnakeCase(t, "", w)
			}

			if text, err = runCmd(runWeight, "clear", "api/zeta", "--dsn", dsn); err != nil || !strings.Contains(text, "key api/zeta weight cleared") {
				t.Fatalf("bq weight clear: %v\n%s", err, text)
			}
			if text, err = runCmd(runWeight, "list", "--dsn", dsn); err != nil || strings.Contains(text, "api/zeta") || !strings.Contains(text, "api/acme  3") {
				t.Errorf("bq weight list after clearing api/zeta: %v, want api/acme alone\n%s", err, text)
			}
			if text, err = runCmd(runWeight, "clear", "api/zeta", "--dsn", dsn); err != nil {
				t.Errorf("bq weight clear of a key without a weight: %v, want it left as it is\n%s", err, text)
			}
		})
	}
}

// TestWeightCommandBadInput: missing arguments, a weight that is no
// number and flags of another action are usage errors naming the fix; a
// weight or key the client refuses is its error, printed as is.
func TestWeightCommandBadInput(t *testing.T) {
	_, dsn := migratedSQLite(t)
	wantUsageErrors(t, runWeight, "weight", dsn, []argsWant{
		{nil, "want an action"},
		{[]string{"show", "a/b"}, `unknown action "show"`},
		{[]string{"set"}, "give a key and a weight"},
		{[]string{"set", "a/b"}, "give a key and a weight"},
		{[]string{"set", "a/b", "1", "2"}, "give a key and a weight"},
		{[]string{"set", "a/b", "x"}, `weight "x": use a whole number, 1 to 1000`},
		{[]string{"set", "a/b", "2.5"}, `weight "2.5": use a whole number`},
		{[]string{"clear"}, "give one key"},
		{[]string{"clear", "a/b", "c/d"}, "give one key"},
		{[]string{"set", "a/b", "3", "--json"}, "--json is a flag of bq weight list"},
		{[]string{"list", "extra"}, "unexpected argument"},
	})
	wantInvalidArguments(t, runWeight, "weight", dsn, []argsWant{
		{[]string{"set", "a/b", "0"}, "the weight is 0: give a weight of 1 to 1000"},
		{[]string{"set", "a/b", "1001"}, "the weight is 1001: give a weight of 1 to 1000"},
		{[]string{"set", "acme", "2"}, "the key has no group"},
		{[]string{"set", "", "2"}, "SetKeyWeight"},
		{[]string{"clear", "a/b\x00"}, "NUL"},
	})
	if ws, err := runCmd(runWeight, "list", "--dsn", dsn); err != nil || !strings.Contains(ws, "no key weights") {
		t.Errorf("after refused sets, bq weight list: %v, want none stored\n%s", err, ws)
	}
	if code, _, errOut := bqCmd(t, context.Background(), "weight", "set", "a/b", "x", "--dsn", dsn); code != 2 || !strings.Contains(errOut, "run 'bq weight -h' for its flags") {
		t.Errorf("bq weight set with a bad weight: exit %d, stderr %q; want 2 with the hint to the usage", code, errOut)
	}
}
