package bq_test

import (
	"context"
	"fmt"

	"github.com/bqueue/bq"
)

// Jobs carry metadata and tags; ListJobs finds them by key prefix and
// metadata, newest first, a page at a time.
func Example_listJobs() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	for _, tenant := range []string{"acme-eu", "acme-us", "globex"} {
		_, err := Export.Enqueue(ctx, client, ExportArgs{Tenant: tenant, Report: "q4"},
			bq.WithMetadata(map[string]string{"region": tenant[len(tenant)-2:]}), bq.WithTags("quarterly"))
		if err != nil {
			panic(err)
		}
	}
	f := bq.JobFilter{KeyPrefix: "example.export/acme-", Tag: "quarterly", Limit: 1}
	for {
		page, err := client.ListJobs(ctx, f)
		if err != nil {
			panic(err)
		}
		for _, j := range page.Jobs {
			fmt.Println(j.Key, j.State, j.Metadata["region"], j.Tags)
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	// Output:
	// example.export/acme-us ready us [quarterly]
	// example.export/acme-eu ready eu [quarterly]
}
