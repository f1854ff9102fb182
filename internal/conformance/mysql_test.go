package conformance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	bqmysql "github.com/bqueue/bq/drivers/mysql"
)

// TestMySQLKeyLimit: MySQL stores keys of up to bqmysql.MaxKeyBytes; a
// key of 1,000 four-byte characters fits, a longer key than the limit is
// refused at enqueue with an error naming the limit, whatever path it
// takes (admitted now, scheduled, in a batch), and nothing is stored.
func TestMySQLKeyLimit(t *testing.T) {
	for _, db := range selected(t) {
		if db.name != "mysql" {
			continue
		}
		h := newHarness(t, db)
		ctx := context.Background()
		emoji := strings.Repeat("🔑", 1000)
		res := enqueue(t, h, limit1Job, Args{Key: emoji})
		if info := jobInfo(t, h, res.ID); info.Key != "c.limit1/"+emoji {
			t.Fatalf("stored key is %d bytes, want the full %d", len(info.Key), len("c.limit1/"+emoji))
		}

		tooLong := strings.Repeat("x", bqmysql.MaxKeyBytes-len("c.limit1/")+1)
		stored := h.count(`SELECT count(*) FROM bq_jobs`)
		for name, try := range map[string]func() error{
			"due": func() error {
				_, err := limit1Job.Enqueue(ctx, h.client, Args{Key: tooLong})
				return err
			},
			"scheduled": func() error {
				_, err := limit1Job.Enqueue(ctx, h.client, Args{Key: tooLong}, bq.In(time.Hour))
				return err
			},
			"batch": func() error {
				_, err := limit1Job.EnqueueMany(ctx, h.client, []Args{{Key: "fine"}, {Key: tooLong}})
				return err
			},
		} {
			err := try()
			wantErr(t, err, "concurrency key", fmt.Sprintf("at most %d bytes", bqmysql.MaxKeyBytes))
			if err != nil && strings.Contains(err.Error(), tooLong) {
				t.Errorf("%s: the error repeats the whole %d-byte key", name, len(tooLong))
			}
		}
		if n := h.count(`SELECT count(*) FROM bq_jobs`); n != stored {
			t.Errorf("%d jobs stored by refused enqueues", n-stored)
		}
		if n := h.count(`SELECT count(*) FROM bq_semaphores WHERE length(key) > 4096`); n != 0 {
			t.Errorf("%d semaphores of over-long keys", n)
		}
	}
}
