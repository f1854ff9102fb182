package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/bqueue/bq/internal/testdb"
	"github.com/bqueue/bq/ui"
)

// narrowWidth is a phone's width in CSS pixels.
const narrowWidth = 420

// overflowCheck finds, on the page shown, the elements matching %s that
// reach beyond the viewport's right edge without a horizontally
// scrollable box (overflow-x auto or scroll, itself within the viewport)
// holding them, and how wide the page is against the viewport: a page
// wider than its viewport scrolls sideways as a whole.
const overflowCheck = `(() => {
	const vw = document.documentElement.clientWidth;
	const held = el => {
		for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
			const ox = getComputedStyle(a).overflowX;
			if ((ox === "auto" || ox === "scroll") && a.getBoundingClientRect().right <= vw + 0.5) return true;
		}
		return false;
	};
	const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
		(el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "") +
		" " + JSON.stringify((el.textContent || "").trim().slice(0, 30));
	const beyond = [];
	let checked = 0;
	for (const el of document.querySelectorAll(%q)) {
		const r = el.getBoundingClientRect();
		if (r.width === 0 && r.height === 0) continue;
		checked++;
		if (r.right > vw + 0.5 && !held(el)) beyond.push(name(el) + " ends at " + Math.round(r.right));
	}
	return JSON.stringify({viewport: vw, scrollWidth: document.documentElement.scrollWidth, checked, beyond: beyond.slice(0, 15), more: Math.max(0, beyond.length - 15)});
})()`

type overflowReport struct {
	Viewport, ScrollWidth, Checked, More int
	Beyond                               []string
}

// TestBrowserNarrow: at 420 px wide, as on a phone, the header (its nav
// and search box), the overview's queue table and every other page's
// tables stay within the viewport or scroll sideways inside a box of
// their own, and no page is wider than the viewport (which would scroll
// the whole page sideways).
func TestBrowserNarrow(t *testing.T) {
	path := chromium(t)
	shots := filepath.Join("..", ".artifacts", "screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, databases[0])
	f.seedHistory(t)
	ctx := context.Background()
	// A tenant id with no break in it, as keys often are, and a rate key.
	const longTenant = "4f9c2e1a7b3d4e5f9a8b7c6d5e4f3a2b1c0d9e8f"
	if _, err := exportJob.Enqueue(ctx, f.client, exportArgs{Tenant: longTenant, Report: "annual"}); err != nil {
		t.Fatal(err)
	}
	if _, err := syncJob.Enqueue(ctx, f.client, syncArgs{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	// Drift on the long key, for the Verify page's table.
	bumpFree(t, f.client, testdb.SQLite, "ui.export/"+longTenant)
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	b := &session{t: t, ctx: browser(t, path), root: srv.URL, shots: shots, prefix: "narrow"}
	b.run("emulate a 420 px wide screen", chromedp.EmulateViewport(narrowWidth, 900))

	for _, p := range []struct{ path, ready, check, shot string }{
		// The nav and the queue table: the page.
		{"/", "#queues", "header, header *, #queues, #queues *", "overview"},
		{"/jobs/", "#jobs", "header, header *, main table, main table *", "jobs"},
		{"/blocked", "#keys", "header, header *, main table, main table *", "blocked"},
		{"/key?key=" + url.QueryEscape("ui.export/"+longTenant), "#key-facts", "header, header *, main table, main table *", "key"},
		{"/key?key=" + url.QueryEscape("ui.export/acme"), "#line", "header, header *, main table, main table *", ""},
		{fmt.Sprintf("/jobs/%d", f.keyedFailed), "#summary", "header, header *, main table, main table *", "job"},
		{"/failed", "#failed", "header, header *, main table, main table *", "failed"},
		{"/rates", "#rates", "header, header *, main table, main table *", ""},
		{"/rate?key=" + url.QueryEscape("ui.sync/acme"), "#rate-set", "header, header *, main table, main table *", ""},
		{"/history", "#chart-throughput svg", "header, header *, main table, main table *", "history"},
		{"/processes", "#processes", "header, header *, main table, main table *", ""},
		{"/periodic", "main", "header, header *, main table, main table *", ""},
		{"/verify", "#drift", "header, header *, main table, main table *, #repair", "verify"},
		{"/search?q=acme", "table.found", "header, header *, main table, main table *", ""},
	} {
		b.open(p.path, p.ready)
		raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(overflowCheck, p.check)))
		if err != nil {
			t.Fatalf("measure %s: %v", p.path, err)
		}
		var got overflowReport
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if got.Viewport > narrowWidth || got.Checked == 0 {
			t.Fatalf("%s: viewport %d px, %d elements measured; want at most %d px and some elements", p.path, got.Viewport, got.Checked, narrowWidth)
		}
		if len(got.Beyond) > 0 {
			t.Errorf("%s at %d px: %d elements of %q reach beyond the right edge outside a scrolling box:\n\t%s",
				p.path, narrowWidth, len(got.Beyond)+got.More, p.check, strings.Join(got.Beyond, "\n\t"))
		}
		if got.ScrollWidth > got.Viewport {
			t.Errorf("%s at %d px: the page is %d px wide, wider than its %d px viewport: it scrolls sideways", p.path, narrowWidth, got.ScrollWidth, got.Viewport)
		}
		if p.shot != "" {
			b.screenshot(p.shot)
		}
	}
}
