package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bqueue/bq"
)

// TestWorkflowCommand: bq workflow show prints a workflow's tasks by
// level with their states (and as JSON), cancel cancels what has not
// finished, cancel-batch a batch's jobs; bad usage exits 2 naming it.
func TestWorkflowCommand(t *testing.T) {
	ctx := context.Background()
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn, c := migratedClient(t, ctx, db)
			item := func(a string) bq.Item { return inspectJob.Item(inspectArgs{Account: a}) }
			res, err := bq.NewWorkflow("etl").Add("load", item("w1"), "extract").Add("extract", item("w2")).Enqueue(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			text, err := runCmd(runWorkflow, "show", res.ID, "--dsn", dsn)
			for _, want := range []string{"workflow etl (" + res.ID + "): 1 waiting, 1 ready", "LEVEL", "extract", "load", "waiting"} {
				if err != nil || !strings.Contains(text, want) {
					t.Errorf("bq workflow show: %v, output lacks %q:\n%s", err, want, text)
				}
			}
			text, err = runCmd(runWorkflow, "show", "--json", res.ID, "--dsn", dsn)
			var w bq.WorkflowState
			if err != nil || json.Unmarshal([]byte(text), &w) != nil || len(w.Tasks) != 2 || w.Tasks[1].Name != "load" || w.Tasks[1].Level != 1 {
				t.Errorf("bq workflow show --json: %v\n%s", err, text)
			}
			if text, err := runCmd(runWorkflow, "cancel", res.ID, "--dsn", dsn); err != nil || !strings.Contains(text, "2 unfinished tasks cancelled") {
				t.Errorf("bq workflow cancel: %v\n%s", err, text)
			}
			b, err := bq.NewBatch(item("b1"), item("b2")).OnFinish(item("b3")).Enqueue(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if text, err := runCmd(runWorkflow, "cancel-batch", b.ID, "--dsn", dsn); err != nil || !strings.Contains(text, "3 unfinished jobs cancelled") {
				t.Errorf("bq workflow cancel-batch: %v\n%s", err, text)
			}
		})
	}
	_, dsn := migratedSQLite(t)
	wantUsageErrors(t, runWorkflow, "workflow", dsn, []argsWant{
		{[]string{"show"}, "want an action and an id"},
		{[]string{"drop", "x"}, `unknown action "drop"`},
		{[]string{"cancel", "--json", "x"}, "--json is a flag of bq workflow show"},
	})
}
