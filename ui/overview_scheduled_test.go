package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

// scheduledCard is the overview's card of scheduled jobs: its link and count.
var scheduledCard = regexp.MustCompile(`<a class="card" id="card-scheduled" href="([^"]+)"><span class="n">(\d+)</span> scheduled</a>`)

// TestOverviewScheduledCard: the overview counts scheduled jobs beside
// the other states, over every queue (the fixture's mail job and a keyed
// export due in an hour), and the card links to the Jobs page listing
// them.
func TestOverviewScheduledCard(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			f := newFixture(t, db)
			later, err := exportJob.Enqueue(context.Background(), f.client, exportArgs{Tenant: "globex", Report: "later"}, bq.In(time.Hour))
			if err != nil || later.State != bq.StateScheduled {
				t.Fatalf("enqueue a scheduled export: %+v %v", later, err)
			}
			srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
			defer srv.Close()
			code, body := get(t, srv.Client(), srv.URL+"/")
			m := scheduledCard.FindStringSubmatch(body)
			if code != http.StatusOK || m == nil {
				t.Fatalf("GET /: %d, no scheduled card:\n%s", code, body)
			}
			if m[2] != "2" {
				t.Errorf("the scheduled card counts %s, want 2 (one in mail, one in exports)", m[2])
			}
			if m[1] != "/jobs/?state=scheduled" {
				t.Errorf("the scheduled card links to %q, want the Jobs page of scheduled jobs", m[1])
			}
			code, body = get(t, srv.Client(), srv.URL+m[1])
			if n := strings.Count(body, "<tr data-job="); code != http.StatusOK || n != 2 ||
				!strings.Contains(body, fmt.Sprintf(`<tr data-job="%d">`, later.ID)) {
				t.Errorf("the card's page: %d, %d jobs listed; want 200 listing the 2 scheduled jobs", code, n)
			}
		})
	}
}
