package bq_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// lockedBuffer is a strings.Builder safe for a logger's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunLogs: a run's log lines carry key= only for a keyed job, and
// the line of a promotion names the jobs promoted, not the finished one.
func TestRunLogs(t *testing.T) {
	ctx := context.Background()
	var buf lockedBuffer
	c, err := bq.Open(ctx, "sqlite://"+t.TempDir()+"/logs.db", bq.Config{Queues: map[string]int{"metrics": 2},
		PollInterval: 20 * time.Millisecond, DispatchInterval: 50 * time.Millisecond, NoGauges: true,
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := mBlock.Enqueue(ctx, c, metricArgs{Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := mBlock.Enqueue(ctx, c, metricArgs{Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := mPlain.Enqueue(ctx, c, metricArgs{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := c.Job(ctx, second.ID)
		if err == nil && info.State == bq.StateCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second job did not complete")
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	logs := buf.String()
	var sawPlain, sawPromotion bool
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "job_id="+itoa(plain.ID)+" ") && strings.Contains(line, "kind=metrics.plain") {
			sawPlain = true
			if strings.Contains(line, "key=") {
				t.Errorf("an unkeyed job's line carries a key: %s", line)
			}
		}
		if strings.Contains(line, "promoted blocked jobs") {
			sawPromotion = true
			if !strings.Contains(line, "job_id="+itoa(first.ID)+" ") || !strings.Contains(line, "promoted_job_ids=["+itoa(second.ID)+"]") {
				t.Errorf("the promotion's line does not name the finished job and the promoted one: %s", line)
			}
		}
	}
	if !sawPlain || !sawPromotion {
		t.Errorf("no line of the unkeyed job (%v) or of the promotion (%v) at debug level:\n%s", sawPlain, sawPromotion, logs)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
