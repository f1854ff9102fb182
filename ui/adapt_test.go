package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// TestAdaptedKeyShown: a key whose adaptive limit throttles lowered is
// listed on the overview (Adapted keys, linked to its page) and its page
// says so beside its limit; nothing shows while no key is lowered.
func TestAdaptedKeyShown(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			const key = "ui.export/acme"
			f, srv, c, keyPage := keyForms(t, db, key)
			if _, overview := get(t, c, srv.URL+"/"); strings.Contains(overview, `id="adapted-keys"`) {
				t.Error("the overview lists adapted keys while none is")
			}
			if _, page := get(t, c, srv.URL+keyPage); strings.Contains(page, `id="key-adaptive"`) {
				t.Error("the key page says the key is adapted while it is not")
			}
			ex := driver.ClientEngine(f.client).Exec()
			if err := ex.KeyAdaptSet(context.Background(), driver.KeyAdapt{Key: key, Limit: 1, Min: 1, Successes: 0, AdaptedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			// A rate's (Rate.Adaptive), filed under its line key: linked to
			// the rate's page, said to be a rate.
			if err := ex.KeyAdaptSet(context.Background(), driver.KeyAdapt{Key: driver.RateLine("ui.rate/acme"), Limit: 3, Min: 2, AdaptedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			code, overview := get(t, c, srv.URL+"/")
			for _, want := range []string{`id="adapted-keys"`, `href="/key?key=ui.export%2Facme"`, "Adapted keys",
				`<tr class="rate"><td><a href="/rate?key=ui.rate%2Facme">ui.rate/acme</a></td><td>rate</td><td class="num">3 per period</td>`} {
				if code != http.StatusOK || !strings.Contains(overview, want) {
					t.Errorf("overview: %d, lacks %q", code, want)
				}
			}
			code, page := get(t, c, srv.URL+keyPage)
			if code != http.StatusOK || !strings.Contains(page, `id="key-adaptive"`) || !strings.Contains(page, "adapted: min 1, 0 completions since") {
				t.Errorf("key page: %d, does not say the key's limit is adapted", code)
			}
		})
	}
}
