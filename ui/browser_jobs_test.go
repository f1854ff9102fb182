package ui_test

import (
	"context"
	"fmt"

	"github.com/chromedp/chromedp"

	"github.com/bqueue/bq"
)

// browseJobs: the Jobs page lists every job newest first with a link on
// each row; its metadata filter, typed in the form, narrows the list to
// the one job carrying it, whose page shows its metadata and tags; a
// page of two links to the next; the header's search finds the job by
// its tag and by key=value.
func browseJobs(b *session, f *fixture) {
	b.t.Helper()
	res, err := mailJob.Enqueue(context.Background(), f.client, mailArgs{To: "vip@example.com"},
		bq.WithMetadata(map[string]string{"tenant": "initech", "plan": "gold"}), bq.WithTags("vip"))
	if err != nil {
		b.t.Fatal(err)
	}
	row := fmt.Sprintf(`#jobs tr[data-job="%d"]`, res.ID)
	b.open("/jobs/", "#jobs")
	if n := b.count("#jobs tbody tr"); n < 10 {
		b.t.Errorf("the Jobs page lists %d jobs, want every one of the fixture's (10 or more)", n)
	}
	b.wantContains(row+" td.labels", "tenant=initech")
	b.screenshot("jobs")

	b.run("filter by metadata", chromedp.SetValue(chromedp.CSS(`#job-filters input[name="meta"]`), "tenant=initech"),
		chromedp.Click(chromedp.CSS(`#job-filters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-filters input[name="meta"][value="tenant=initech"]`)))
	b.wantCount("#jobs tbody tr", 1)
	b.wantCount(row, 1)
	b.run("open the job listed", chromedp.Click(chromedp.CSS(row+" a")), chromedp.WaitVisible(chromedp.CSS("#job-metadata")))
	b.wantContains("#job-metadata", "plan=gold")
	b.wantContains("#job-metadata", "tenant=initech")
	b.wantText("#job-tags", "vip")

	b.open("/jobs/?queue=mail&limit=2", "#jobs-next")
	b.wantCount("#jobs tbody tr", 2)
	b.run("next page", chromedp.Click(chromedp.CSS("#jobs-next")), chromedp.WaitVisible(chromedp.CSS(`#job-filters input[name="limit"][value="2"]`)))
	if n := b.count("#jobs tbody tr"); n < 1 || b.count(row) != 0 {
		b.t.Errorf("the second page of mail jobs lists %d rows (the newest, on page one, among them: %v)", n, b.count(row) != 0)
	}

	b.open("/jobs/?state=done", "#jobs-problem")
	b.wantContains("#jobs-problem", "use one of scheduled")

	b.search("vip", "#search-tagged")
	b.wantCount(fmt.Sprintf(`#search-tagged tr[data-job="%d"]`, res.ID), 1)
	b.search("tenant=initech", "#jobs")
	b.wantCount(row, 1)
}
