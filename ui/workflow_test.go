package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

// TestWorkflowPage: a workflow's page draws its tasks by level, each with
// its job's state and the tasks it runs after; a task's job page links to
// it and names the jobs it still waits for; an unknown workflow is a 404.
func TestWorkflowPage(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, db)
			mail := func(to string) bq.Item { return mailJob.Item(mailArgs{To: to}) }
			res, err := bq.NewWorkflow("onboard").Add("welcome", mail("a@example.com")).
				Add("tips", mail("b@example.com"), "welcome").Add("survey", mail("c@example.com"), "tips", "welcome").
				Enqueue(ctx, f.client)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
			defer srv.Close()
			c := srv.Client()
			code, body := get(t, c, srv.URL+"/workflows/"+res.ID)
			for _, want := range []string{`id="workflow-graph"`, `data-level="2"`, `data-task="survey" data-state="waiting"`,
				`data-task="welcome" data-state="ready"`, "tips, welcome", "onboard"} {
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("GET /workflows/%s: %d, body lacks %q", res.ID, code, want)
				}
			}
			_, body = get(t, c, srv.URL+"/jobs/"+strconv.FormatInt(res.Tasks["survey"].ID, 10))
			for _, want := range []string{`href="/workflows/` + res.ID + `"`, `id="waiting-for"`, "(2 in all)"} {
				if !strings.Contains(body, want) {
					t.Errorf("the job page of a waiting task lacks %q", want)
				}
			}
			if code, _ := get(t, c, srv.URL+"/workflows/nope"); code != http.StatusNotFound {
				t.Errorf("GET /workflows/nope: %d, want 404", code)
			}
		})
	}
}
