package lifecycle

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

// holderReader reads a key's holders (driver.Inspector's HolderList); a
// store without it names no holder in a discard.
type holderReader interface {
	HolderList(ctx context.Context, key string, max int) ([]driver.Holder, error)
}

// keyHolder is the job a discard names as holding its key: read once per
// key and admission, at its first discard, as one indexed row (the
// oldest ready or running job of the key). 0 when none is known: the
// store cannot say, or the slots' holders are gone, awaiting the
// failsafe.
type keyHolder struct {
	key   string
	id    int64
	found bool
}

func (h *keyHolder) read(ctx context.Context, ex Store) (int64, error) {
	if h.found {
		return h.id, nil
	}
	hr, ok := ex.(holderReader)
	if !ok {
		h.found = true
		return 0, nil
	}
	hs, err := hr.HolderList(ctx, h.key, 1)
	if err != nil {
		return 0, fmt.Errorf("read a holder of %q: %w", h.key, err)
	}
	if len(hs) > 0 {
		h.id = hs[0].JobID
	}
	h.found = true
	return h.id, nil
}

// String is the holder for a reason: " (held by job 7)", or nothing.
func (h keyHolder) String() string {
	if h.id == 0 {
		return ""
	}
	return fmt.Sprintf(" (held by job %d)", h.id)
}
