// Command e2eworker is the Go side of the TypeScript client's end-to-end
// test (clients/typescript/test/e2e.test.mjs): a bq process that defines
// one job kind, so it drains the inbox rows of that kind, and whose jobs
// hold their key's slot until the process is stopped, so that a test sees
// a key's second job blocked and a discarding one discarded.
//
//	e2eworker DSN
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/bqueue/bq"
	_ "github.com/bqueue/bq/drivers/mysql"
	_ "github.com/bqueue/bq/drivers/postgres"
)

// HoldArgs are the args the TypeScript test enqueues: {"tenant": "acme"}.
type HoldArgs struct {
	Tenant string `json:"tenant"`
}

// Hold runs one job per tenant at once; the rest wait blocked.
var Hold = bq.Define("ts.e2e.hold", hold, bq.JobOptions[HoldArgs]{
	Queue: "ts-e2e",
	Concurrency: &bq.Concurrency[HoldArgs]{
		Key: func(a HoldArgs) string { return a.Tenant },
		To:  1,
	},
})

// hold keeps its slot until the process stops.
func hold(ctx context.Context, _ HoldArgs) error {
	<-ctx.Done()
	return nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: e2eworker DSN")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client, err := bq.Open(ctx, os.Args[1], bq.Config{
		Queues:       map[string]int{"ts-e2e": 10},
		PollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2eworker:", err)
		os.Exit(1)
	}
	defer client.Close()
	if err := client.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "e2eworker:", err)
		os.Exit(1)
	}
}
