package bq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq"
)

// A batch mixes kinds and options in one transaction; within a key the
// highest priority takes the free slots first, and an item due later
// takes none.
func ExampleClient_EnqueueBatch() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	results, err := client.EnqueueBatch(ctx, []bq.Item{
		Export.Item(ExportArgs{Tenant: "acme", Report: "daily"}),
		Export.Item(ExportArgs{Tenant: "acme", Report: "urgent"}, bq.Priority(5)),
		Export.Item(ExportArgs{Tenant: "acme", Report: "audit"}, bq.Priority(5)),
		Export.Item(ExportArgs{Tenant: "acme", Report: "later"}, bq.Priority(9), bq.In(time.Hour)),
		ChargeCard.Item(ExportArgs{Tenant: "acme"}),
	})
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		fmt.Println(r.State)
	}
	// Output:
	// blocked
	// ready
	// ready
	// scheduled
	// ready
}
