package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

// chromium returns the headless browser to drive. A missing browser fails
// the test: it is never skipped silently.
func chromium(t *testing.T) string {
	path := os.Getenv("BQ_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("headless Chromium not found at %s (set BQ_CHROMIUM to another path): run `make test`, which installs it, or `apt-get install -y chromium`", path)
	}
	return path
}

// browser starts a fresh headless Chromium with its own profile.
func browser(t *testing.T, path string, extra ...chromedp.ExecAllocatorOption) context.Context {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	opts = append(opts, extra...)
	ctx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(ctx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAlloc() })
	return ctx
}

// TestBrowser drives the dashboard in headless Chromium against each
// database holding blocked, running and failed jobs and half an hour of
// history: the pages show the right counts, the overview refreshes
// itself, retrying a failed job of a saturated key from the failed page
// brings it back blocked, the header's search finds jobs and keys, the
// charts draw the history, and the Jobs page filters and pages. A screenshot of each page goes to
// .artifacts/screenshots/.
func TestBrowser(t *testing.T) {
	path := chromium(t)
	shots := filepath.Join("..", ".artifacts", "screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			f := newFixture(t, db)
			// PostgreSQL's run mounts the dashboard under /bq with a token,
			// as an application would.
			opts := ui.Options{Refresh: time.Second}
			mux := http.NewServeMux()
			base := ""
			if db.name == "postgres" {
				opts.Path, opts.Token, base = "/bq", "browser-token", "/bq"
				mux.Handle("/bq/", http.StripPrefix("/bq", ui.Handler(f.client, opts)))
			} else {
				mux.Handle("/", ui.Handler(f.client, opts))
			}
			srv := httptest.NewServer(mux)
			defer srv.Close()
			f.seedHistory(t)
			b := &session{t: t, ctx: browser(t, path), root: srv.URL + base, shots: shots, prefix: db.name}
			browse(t, b, f, opts.Token)
			browseSearch(b, f)
			browseHistory(b)
			browseJobs(b, f)
			browseCancel(t, b, f)
		})
	}
}

func browse(t *testing.T, b *session, f *fixture, token string) {
	first := "/"
	if token != "" {
		first = "/?token=" + url.QueryEscape(token)
	}
	b.open(first, "#queues")
	b.wantText(`tr[data-queue="exports"] td.running`, "2")
	b.wantText(`tr[data-queue="exports"] td.blocked`, "3")
	b.wantText(`tr[data-queue="mail"] td.ready`, "1")
	b.wantText(`tr[data-queue="mail"] td.scheduled`, "1")
	b.wantText(`#card-failed .n`, "2")
	b.wantText(`#card-saturated .n`, "1")
	// The last hour is drawn on the overview too, and no dispatcher runs.
	b.wantCount(`#chart-throughput rect.pt[data-series="completed"]`, seededMinutes)
	b.wantContains("#no-dispatcher", "bq dispatcher")
	b.screenshot("overview")

	// The overview refreshes itself: a job blocked now shows up.
	if res, err := exportJob.Enqueue(context.Background(), f.client, exportArgs{Tenant: "acme", Report: "late"}); err != nil || res.State != bq.StateBlocked {
		t.Fatalf("enqueue a fourth blocked job: %+v %v", res, err)
	}
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](
		`document.querySelector('tr[data-queue="exports"] td.blocked').textContent.trim() === "4"`,
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the overview did not refresh to 4 blocked jobs: %v", err)
	}

	// The queue row's button pauses the queue in every process, and resumes it.
	b.run("pause queue mail", chromedp.Click(chromedp.CSS(`button[data-pause="mail"]`)),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.wantContains(".notice", "Queue mail paused")
	b.wantText(`tr[data-queue="mail"] .state.paused`, "paused")
	if ps, err := f.client.PausedQueues(context.Background()); err != nil || len(ps) != 1 || ps[0].Queue != "mail" {
		t.Errorf("after the pause button, PausedQueues = %+v, %v; want mail", ps, err)
	}
	// The pause's notice is still shown: wait for the resume's page.
	b.run("resume queue mail", chromedp.Click(chromedp.CSS(`button[data-resume="mail"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-pause="mail"]`)))
	b.wantContains(".notice", "Queue mail resumed")
	b.wantCount(`tr[data-queue="mail"] .state.paused`, 0)
	if ps, err := f.client.PausedQueues(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("after the resume button, PausedQueues = %+v, %v; want none", ps, err)
	}

	b.open("/blocked", "#keys")
	b.wantText(`tr[data-key="ui.export/acme"] td.holders`, "2")
	b.wantText(`tr[data-key="ui.export/acme"] td.blocked`, "4")
	b.wantText(`tr[data-group="ui.export"] td.saturated`, "1")
	b.screenshot("blocked")

	b.run("open the key page", chromedp.Click(chromedp.CSS(`tr[data-key="ui.export/acme"] a`)),
		chromedp.WaitVisible(chromedp.CSS("#key-facts")))
	b.wantText("#key-facts .limit", "2")
	b.wantText("#key-facts .free", "0")
	b.wantCount("#holders tbody tr", 2)
	b.wantCount("#line tbody tr", 4)
	b.screenshot("key")

	b.open("/failed", "#failed")
	b.wantCount("#failed tbody tr", 2)
	b.wantCount("#failed button[data-cancel]", 2) // beside Retry and Discard
	b.screenshot("failed")
	b.run("retry the failed job of the saturated key",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-retry="%d"]`, f.keyedFailed))),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.wantText(".notice", fmt.Sprintf("Job %d retried: it is now blocked.", f.keyedFailed))
	b.wantCount("#failed tbody tr", 1)
	if st := f.state(t, f.keyedFailed); st != bq.StateBlocked {
		t.Errorf("retried job is %s in the database, want blocked", st)
	}

	b.open(fmt.Sprintf("/jobs/%d", f.keyedFailed), "#summary")
	b.wantText("#job-state", "blocked")
	b.wantCount("#holders .not-heartbeating", 0)
	// Its id is the oldest of the key: first come, first in line.
	b.wantText("#position", "1")
	b.wantContains("#summary", `Waiting for one of 2 running jobs of key "ui.export/acme" to finish (limit 2); it is next in line`)
	b.wantContains("#args", `"Tenant": "acme"`)
	b.wantContains("#last-error", "export service answered 503")
	b.screenshot("job")

	b.open(fmt.Sprintf("/jobs/%d", f.mailFailed), "#summary")
	b.run("discard the failed mail job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-discard="%d"]`, f.mailFailed))),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.wantText("#job-state", "discarded")
	if st := f.state(t, f.mailFailed); st != bq.StateDiscarded {
		t.Errorf("discarded job is %s in the database", st)
	}

	b.open("/processes", "#processes")
	b.wantContains(fmt.Sprintf(`tr[data-process="%d"]`, f.process), "worker-1")
	b.wantContains(fmt.Sprintf(`tr[data-process="%d"]`, f.process), "alive")
	b.screenshot("processes")
}

// session is one browser tab on the dashboard.
type session struct {
	t      *testing.T
	ctx    context.Context
	root   string
	shots  string
	prefix string
}

func (s *session) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	s.t.Helper()
	if err := retryStale(func() error { return chromedp.Do(s.ctx, actions...) }); err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
}

// retryStale runs fn again while it fails on a node the page replaced
// between finding it and acting on it: pages re-render every Refresh. The
// action never reached the page then, so running it again is safe.
func retryStale(fn func() error) error {
	var err error
	for range 5 {
		if err = fn(); err == nil || !strings.Contains(err.Error(), "node with given id") {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func (s *session) open(path, ready string) {
	s.t.Helper()
	s.run("open "+path, chromedp.Navigate(s.root+path), chromedp.WaitVisible(chromedp.CSS(ready)))
}

func (s *session) text(sel string) string {
	s.t.Helper()
	var got string
	err := retryStale(func() (err error) {
		got, err = chromedp.Run(s.ctx, chromedp.Text(chromedp.CSS(sel)))
		return err
	})
	if err != nil {
		s.t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(got)
}

// wantText waits up to 5 s for sel to show want: the page re-renders its
// tables every Refresh, and a read may land mid-render.
func (s *session) wantText(sel, want string) {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := s.text(sel)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			s.t.Errorf("%s shows %q, want %q", sel, got, want)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *session) wantContains(sel, want string) {
	s.t.Helper()
	if got := s.text(sel); !strings.Contains(got, want) {
		s.t.Errorf("%s shows %q, want it to contain %q", sel, got, want)
	}
}

func (s *session) wantCount(sel string, want int) {
	s.t.Helper()
	if n := s.count(sel); n != want {
		s.t.Errorf("%d elements match %s, want %d", n, sel, want)
	}
}

func (s *session) screenshot(page string) {
	s.t.Helper()
	png, err := chromedp.Run(s.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", page, err)
	}
	file := filepath.Join(s.shots, s.prefix+"-"+page+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.t.Logf("screenshot %s", file)
}

// rebindingAttack is what a DNS-rebinding page runs once its name
// resolves to the dashboard's loopback address: it reads the failed page,
// takes the form's CSRF token, reads a job's args and discards the job.
const rebindingAttack = `(async () => {
	const out = {};
	const failed = await fetch("/failed");
	out.failed = failed.status;
	const m = (await failed.text()).match(/name="csrf" value="([^"]+)"/);
	const job = await fetch("/jobs/%[1]d");
	out.job = job.status;
	out.args = (await job.text()).includes("bounce@example.com");
	const d = await fetch("/jobs/%[1]d/discard", {method: "POST",
		body: new URLSearchParams({csrf: m ? m[1] : "", next: "/failed"})});
	out.discard = d.status;
	return JSON.stringify(out);
})()`

// TestBrowserRebinding: Chromium resolves rebind.test to 127.0.0.1, as an
// attacker's name does once rebound. A page under that name is "same
// origin" with the dashboard, so only the Host check stands between it and
// the jobs: the dashboard answers it 421 and the job stays failed, while
// the same browser at 127.0.0.1 and localhost is served.
func TestBrowserRebinding(t *testing.T) {
	path := chromium(t)
	f := newFixture(t, databases[0])
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	ctx := browser(t, path, chromedp.Flag("host-resolver-rules", "MAP rebind.test 127.0.0.1"))

	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse("http://rebind.test:"+port+"/"))
	if err != nil {
		t.Fatalf("open the dashboard as rebind.test: %v", err)
	}
	if resp.Status != http.StatusMisdirectedRequest {
		t.Errorf("the dashboard answered rebind.test with %d, want 421", resp.Status)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(rebindingAttack, f.mailFailed), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run the rebinding page's script: %v", err)
	}
	var got struct {
		Failed, Job, Discard int
		Args                 bool
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	t.Logf("rebinding page: %s", raw)
	if got.Failed != http.StatusMisdirectedRequest || got.Job != http.StatusMisdirectedRequest || got.Args || got.Discard != http.StatusMisdirectedRequest {
		t.Errorf("the rebinding page got /failed %d, the job page %d (args read: %v), discard %d; want 421 for each",
			got.Failed, got.Job, got.Args, got.Discard)
	}
	if st := f.state(t, f.mailFailed); st != bq.StateFailed {
		t.Errorf("the rebinding page changed the job to %s", st)
	}

	for _, host := range []string{"127.0.0.1", "localhost"} {
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse("http://"+host+":"+port+"/failed"))
		if err != nil || resp.Status != http.StatusOK {
			t.Errorf("open the dashboard at %s: %v, status %v; want 200", host, err, resp)
		}
	}
}

// crossSitePage is a page of another site that loads the dashboard's job
// page as an image and a frame and fetches it, as any page a user visits
// could (%[1]s the dashboard's origin, %[2]d the job).
const crossSitePage = `<!doctype html><html><body>
<img src="%[1]s/jobs/%[2]d">
<iframe src="%[1]s/jobs/%[2]d?frame=1"></iframe>
<script>
fetch("%[1]s/jobs/%[2]d?fetch=1", {mode: "no-cors", credentials: "include"})
	.finally(() => { document.title = "done"; });
</script></body></html>`

// TestBrowserCrossSiteGETs: a page on another site (evil.test) that makes
// Chromium request a job's page from the dashboard by an image, a frame
// and a fetch gets 403 for each: the dashboard renders nothing for a GET
// another site's page made, so no page on the web can make it render a
// job (or its args) for it. Opening the dashboard itself is served.
func TestBrowserCrossSiteGETs(t *testing.T) {
	path := chromium(t)
	f := newFixture(t, databases[0])
	type seen struct {
		path, site string
		status     int
	}
	var mu sync.Mutex
	var got []seen
	dash := ui.Handler(f.client, ui.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		dash.ServeHTTP(rec, r)
		mu.Lock()
		got = append(got, seen{r.URL.RequestURI(), r.Header.Get("Sec-Fetch-Site"), rec.status})
		mu.Unlock()
	}))
	defer srv.Close()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, crossSitePage, srv.URL, f.mailFailed)
	}))
	defer evil.Close()
	evilPort := evil.URL[strings.LastIndex(evil.URL, ":")+1:]
	ctx := browser(t, path, chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"))
	if _, err := chromedp.Run(ctx, chromedp.NavigateResponse("http://evil.test:"+evilPort+"/")); err != nil {
		t.Fatalf("open the cross-site page: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.title === "done"`)); err != nil {
		t.Fatalf("wait for the cross-site page's fetch: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // the frame and image land too
	mu.Lock()
	requests := slices.Clone(got)
	mu.Unlock()
	jobPages := 0
	for _, s := range requests {
		if !strings.HasPrefix(s.path, fmt.Sprintf("/jobs/%d", f.mailFailed)) {
			continue
		}
		jobPages++
		t.Logf("cross-site GET %s (Sec-Fetch-Site %q): %d", s.path, s.site, s.status)
		if s.status != http.StatusForbidden {
			t.Errorf("cross-site GET %s (Sec-Fetch-Site %q) got %d, want 403", s.path, s.site, s.status)
		}
	}
	if jobPages < 3 {
		t.Errorf("the dashboard saw %d of the page's 3 requests: %+v", jobPages, requests)
	}
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(srv.URL+"/failed"))
	if err != nil || resp.Status != http.StatusOK {
		t.Errorf("open the dashboard itself: %v, status %v; want 200", err, resp)
	}
}

// statusRecorder keeps the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// search types q into the header's search box of a page of the
// dashboard and waits for ready on the page it leads to.
func (s *session) search(q, ready string) {
	s.t.Helper()
	s.open("/failed", "#search")
	s.run("search "+q, chromedp.SetValue(chromedp.CSS("#search"), q), chromedp.Submit(chromedp.CSS("#search")),
		chromedp.WaitVisible(chromedp.CSS(ready)))
}

// browseSearch: the header's search takes a job id to its page, a full
// key to its page, a key without its group (a tenant) to the keys that
// end with it, a group to its keys, and says how keys are spelled when
// nothing matches.
func browseSearch(b *session, f *fixture) {
	b.search("acme", "table.found")
	b.wantCount(`table.found tr[data-key="ui.export/acme"]`, 1)
	b.wantContains("main h2", "Keys ending with /acme")
	b.screenshot("search")
	b.run("open the key found", chromedp.Click(chromedp.CSS(`table.found tr[data-key="ui.export/acme"] a`)),
		chromedp.WaitVisible(chromedp.CSS("#key-facts")))
	b.wantText("#key-facts .blocked", "5") // 3, the late one and the retried one

	b.search("ui.export/acme", "#key-facts")
	b.wantText("#key-facts .limit", "2")
	b.search("ui.export/", "table.found")
	b.wantContains("main h2", "Keys of group ui.export")
	b.search(fmt.Sprint(f.mailFailed), "#summary")
	b.wantText("#job-state", "discarded")
	b.search("Acme", "#search-hint")
	b.wantContains("#search-hint", "Keys are group/key")
	b.wantContains("#search-hint", "reports.export/acme")
}

// browseCancel: the job page's Cancel button cancels a ready job, which
// shows cancelled, with no button left.
func browseCancel(t *testing.T, b *session, f *fixture) {
	b.open(fmt.Sprintf("/jobs/%d", f.mailReady), "#summary")
	b.wantText("#job-state", "ready")
	b.run("cancel the ready mail job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-cancel="%d"]`, f.mailReady))),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.wantText(".notice", fmt.Sprintf("Job %d cancelled: it is now cancelled.", f.mailReady))
	b.wantText("#job-state", "cancelled")
	b.wantContains("#summary", "Cancelled at")
	b.wantCount("button[data-cancel]", 0)
	b.screenshot("cancelled")
	if st := f.state(t, f.mailReady); st != bq.StateCancelled {
		t.Errorf("cancelled job is %s in the database, want cancelled", st)
	}
}

// browseHistory: the history page draws each seeded minute's runs, the
// depth with a gap where no dispatcher snapshotted it, and the most
// blocked keys; a longer span sums the same runs into fewer bars.
func browseHistory(b *session) {
	b.open("/history", "#chart-throughput svg")
	b.wantCount(`#chart-throughput rect.pt[data-series="completed"]`, seededMinutes)
	b.wantCount(`#chart-throughput rect.pt[data-series="failed"]`, seededMinutes/5)
	want := 0
	for i := range seededMinutes {
		want += seededCompleted(i)
	}
	if got := b.sum(`#chart-throughput rect.pt[data-series="completed"]`); got != want {
		b.t.Errorf("the throughput bars add up to %d completed runs, want %d", got, want)
	}
	// 30 minutes less a 3-minute gap: two runs of the line, a point each.
	b.wantCount(`#chart-depth polyline.s-blocked`, 2)
	b.wantCount(`#chart-depth circle.pt[data-series="blocked"]`, seededMinutes-3)
	b.wantContains("#chart-keys .legend", "ui.export/acme")
	b.wantContains("#chart-keys .legend", "ui.export/globex")
	b.wantCount(`#chart-keys circle.pt[data-series="ui.export/acme"]`, seededMinutes-3)
	b.screenshot("charts")

	b.run("show six hours", chromedp.Click(chromedp.CSS(`nav.choices a[href$="since=6h"]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav.choices a[aria-current][href$="since=6h"]`)))
	if got := b.sum(`#chart-throughput rect.pt[data-series="completed"]`); got != want {
		b.t.Errorf("six hours' bars add up to %d completed runs, want %d", got, want)
	}
	if n := b.count(`#chart-throughput rect.pt[data-series="completed"]`); n < 6 || n > 7 {
		b.t.Errorf("six hours draw %d bars for 30 minutes of runs, want 6 or 7 of 5 minutes", n)
	}
}

// count counts the elements sel matches.
func (s *session) count(sel string) int {
	s.t.Helper()
	n, err := chromedp.Run(s.ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
	if err != nil {
		s.t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// sum adds up the data-value of the elements sel matches.
func (s *session) sum(sel string) int {
	s.t.Helper()
	n, err := chromedp.Run(s.ctx, chromedp.Evaluate[int](fmt.Sprintf(
		"[...document.querySelectorAll(%q)].reduce((a, e) => a + Number(e.dataset.value), 0)", sel)))
	if err != nil {
		s.t.Fatalf("sum %s: %v", sel, err)
	}
	return n
}
