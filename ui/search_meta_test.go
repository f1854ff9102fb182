package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

// metaRows finds the jobs listed in the search page's table of one
// metadata key's matches.
func metaRows(t *testing.T, body, key string) []string {
	t.Helper()
	table := regexp.MustCompile(`(?s)<table class="found" data-meta="` + regexp.QuoteMeta(key) + `">(.*?)</table>`).FindStringSubmatch(body)
	if table == nil {
		return nil
	}
	var ids []string
	for _, m := range regexp.MustCompile(`<tr data-job="(\d+)">`).FindAllStringSubmatch(table[1], -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestSearchMetadataValue: a plain word in the search box also finds the
// jobs whose metadata tenant is that word (the placeholder's "tenant"),
// exactly, the newest 50 with a link to the rest, beside the keys and tags
// it found; other metadata keys are not searched by default.
func TestSearchMetadataValue(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, db)
			enqueue := func(opts ...bq.EnqueueOption) string {
				t.Helper()
				res, err := mailJob.Enqueue(ctx, f.client, mailArgs{To: "ops@example.com"}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprint(res.ID)
			}
			tenant := enqueue(bq.WithMetadata(map[string]string{"tenant": "globex", "plan": "gold"}))
			customer := enqueue(bq.WithMetadata(map[string]string{"customer": "globex"}))
			enqueue(bq.WithMetadata(map[string]string{"tenant": "globex-2"}))
			enqueue(bq.WithMetadata(map[string]string{"tenant": "Globex"}))
			tagged := enqueue(bq.WithTags("globex"))
			srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
			defer srv.Close()
			c := srv.Client()

			code, body := get(t, c, srv.URL+"/search?q=globex")
			if code != http.StatusOK || !strings.Contains(body, "Jobs with tenant=globex") {
				t.Errorf("search globex: %d, want 200 with the jobs of tenant globex", code)
			}
			if got := metaRows(t, body, "tenant"); len(got) != 1 || got[0] != tenant {
				t.Errorf("search globex lists jobs %v of tenant globex, want only %s (not globex-2, not Globex)", got, tenant)
			}
			if got := metaRows(t, body, "customer"); got != nil {
				t.Errorf("search globex lists jobs %v under metadata customer, which is not searched by default", got)
			}
			if !strings.Contains(body, fmt.Sprintf(`<tr data-job="%s">`, tagged)) || strings.Contains(body, fmt.Sprintf(`<tr data-job="%s">`, customer)) {
				t.Errorf("search globex: want the tagged job %s listed too, and not job %s (customer=globex)", tagged, customer)
			}
			if strings.Contains(body, `id="search-hint"`) {
				t.Error("search globex found jobs but still says nothing matched")
			}

			// The newest 50 of many, and a link to them all.
			for range 51 {
				enqueue(bq.WithMetadata(map[string]string{"tenant": "initech"}))
			}
			code, body = get(t, c, srv.URL+"/search?q=initech")
			if got := metaRows(t, body, "tenant"); code != http.StatusOK || len(got) != 50 {
				t.Errorf("search initech: %d, %d jobs listed; want 200 and the newest 50", code, len(got))
			}
			if want := `href="/jobs/?meta=tenant%3Dinitech"`; !strings.Contains(body, want) {
				t.Errorf("search initech: no link to every job of the tenant (%s)", want)
			}

			code, body = get(t, c, srv.URL+"/search?q=nobody")
			if code != http.StatusOK || !strings.Contains(body, "no job has tenant=nobody") {
				t.Errorf("search nobody: %d, want the hint to say no job has tenant=nobody", code)
			}
		})
	}
}

// TestSearchMetadataOptions: Options.SearchMetadata names the metadata
// keys a plain word is looked up under, each once and in its order; an
// empty list searches none; past MaxSearchMetadata keys the rest are
// ignored, and the handler logs which. The search's help names them.
func TestSearchMetadataOptions(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, databases[0])
	ids := map[string]string{}
	for _, k := range []string{"customer", "tenant", "k3", "k4", "k5"} {
		res, err := mailJob.Enqueue(ctx, f.client, mailArgs{To: k + "@example.com"}, bq.WithMetadata(map[string]string{k: "globex"}))
		if err != nil {
			t.Fatal(err)
		}
		ids[k] = fmt.Sprint(res.ID)
	}
	search := func(opts ui.Options, q string) string {
		t.Helper()
		srv := httptest.NewServer(ui.Handler(f.client, opts))
		defer srv.Close()
		code, body := get(t, srv.Client(), srv.URL+"/search?q="+q)
		if code != http.StatusOK {
			t.Fatalf("search %q with %v: %d", q, opts.SearchMetadata, code)
		}
		return body
	}

	body := search(ui.Options{SearchMetadata: []string{"customer", " tenant ", "customer", ""}}, "globex")
	for _, k := range []string{"customer", "tenant"} {
		if got := metaRows(t, body, k); len(got) != 1 || got[0] != ids[k] {
			t.Errorf("search globex under customer and tenant: %s lists %v, want job %s", k, got, ids[k])
		}
	}
	if strings.Count(body, `data-meta="customer"`) != 1 || strings.Index(body, `data-meta="customer"`) > strings.Index(body, `data-meta="tenant"`) {
		t.Error("the metadata keys are not searched once each, in their order")
	}
	if help := search(ui.Options{SearchMetadata: []string{"customer", "tenant"}}, ""); !strings.Contains(help, "a key without its group or a value of metadata customer or tenant (acme)") {
		t.Errorf("the search's help does not name the metadata keys searched:\n%s", help)
	}

	body = search(ui.Options{SearchMetadata: []string{}}, "globex")
	if strings.Contains(body, "data-meta=") || strings.Contains(body, "no job has") || !strings.Contains(body, ", and no job is tagged globex.") {
		t.Errorf("with no metadata keys, the search still looks words up as metadata:\n%s", body)
	}

	var log bytes.Buffer
	body = search(ui.Options{SearchMetadata: []string{"customer", "tenant", "k3", "k4", "k5"},
		Logger: slog.New(slog.NewTextHandler(&log, nil))}, "globex")
	if got := metaRows(t, body, "k4"); len(got) != 1 {
		t.Errorf("the 4th metadata key is not searched: %v", got)
	}
	if got := metaRows(t, body, "k5"); got != nil {
		t.Errorf("a 5th metadata key is searched (%v): at most %d are", got, ui.MaxSearchMetadata)
	}
	if !strings.Contains(log.String(), "ignored=[k5]") {
		t.Errorf("the handler does not log the metadata key it ignores: %q", log.String())
	}
}
