package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

// The overview marks a fair-share queue and lists its keys with their
// weights, running and ready jobs and shares.
func TestFairSharesOnOverview(t *testing.T) {
	// The fixture's acme has two jobs running in exports.
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, db)
			if err := f.client.SyncPolicies(ctx, "ui", []bq.Policy{{Queue: "exports", FairShare: true, MaxActive: 6}}); err != nil {
				t.Fatal(err)
			}
			if err := f.client.SetKeyWeight(ctx, bq.Key("ui.export", "globex"), 2); err != nil {
				t.Fatal(err)
			}
			for _, tenant := range []string{"globex", "globex", "initech"} {
				if _, err := exportJob.Enqueue(ctx, f.client, exportArgs{Tenant: tenant, Report: "q1"}); err != nil {
					t.Fatal(err)
				}
			}
			srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
			t.Cleanup(srv.Close)
			code, body := get(t, srv.Client(), srv.URL+"/")
			for _, want := range []string{
				`>fair share</span>`,
				`<h3>Fair share of queue exports <span class="hint">(capacity 6;`,
				// The fixture's acme runs 2; weights 2+1+1 share the cap of 6,
				// the furthest below its share first.
				`<tbody><tr><td><a href="/key?key=ui.export%2Fglobex">ui.export/globex</a></td><td class="num">2</td><td class="num running">0</td><td class="num ready">2</td><td class="num">3.0</td></tr>` +
					`<tr><td><a href="/key?key=ui.export%2Finitech">ui.export/initech</a></td><td class="num">1</td><td class="num running">0</td><td class="num ready">1</td><td class="num">1.5</td></tr>` +
					`<tr><td><a href="/key?key=ui.export%2Facme">ui.export/acme</a></td><td class="num">1</td><td class="num running">2</td><td class="num ready">0</td><td class="num">1.5</td></tr></tbody>`,
			} {
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("GET /: %d, body lacks %q", code, want)
				}
			}
		})
	}
}
