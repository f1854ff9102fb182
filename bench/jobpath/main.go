// Command jobpath measures which files one keyed job's path runs, from
// Enqueue to its release: it is built with coverage (bench/jobpath/run.sh
// does it), warms a worker up with two keyed jobs, then writes the
// coverage counters before and after one more; the blocks whose counts
// grew are the path. The poll interval and heartbeat are long, so no
// other work lands in the window.
//
//	bench/jobpath/run.sh postgres://postgres@127.0.0.1:5432/test?sslmode=disable
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/coverage"
	"time"

	"github.com/bqueue/bq"
	_ "github.com/bqueue/bq/drivers/mysql"
	_ "github.com/bqueue/bq/drivers/postgres"
	_ "github.com/bqueue/bq/drivers/sqlite"
)

type pathArgs struct{ K string }

var pathDone = make(chan struct{}, 1)

var pathJob = bq.Define("jobpath.keyed", func(ctx context.Context, a pathArgs) error {
	pathDone <- struct{}{}
	return nil
}, bq.JobOptions[pathArgs]{Queue: "jobpath", Concurrency: &bq.Concurrency[pathArgs]{Key: func(a pathArgs) string { return a.K }, To: 1}})

func main() {
	ctx := context.Background()
	c, err := bq.Open(ctx, os.Args[1], bq.Config{Queues: map[string]int{"jobpath": 1}, PollInterval: time.Minute,
		HeartbeatInterval: 20 * time.Second, ProcessDeadAfter: time.Minute, NoGauges: true, Prefix: "jobpath_"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if err := c.Migrate(ctx); err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.RunWorkers(runCtx) }()
	time.Sleep(500 * time.Millisecond)
	for _, k := range []string{"w1", "w2"} {
		if _, err := pathJob.Enqueue(ctx, c, pathArgs{K: k}); err != nil {
			panic(err)
		}
		<-pathDone
		time.Sleep(300 * time.Millisecond)
	}
	dump(os.Args[2] + "/before")
	if _, err := pathJob.Enqueue(ctx, c, pathArgs{K: "a"}); err != nil {
		panic(err)
	}
	<-pathDone
	time.Sleep(300 * time.Millisecond)
	dump(os.Args[2] + "/after")
	stop()
	<-done
	fmt.Println("ok")
}

func dump(dir string) {
	os.MkdirAll(dir, 0o755)
	if err := coverage.WriteMetaDir(dir); err != nil {
		panic(err)
	}
	if err := coverage.WriteCountersDir(dir); err != nil {
		panic(err)
	}
}
