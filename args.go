package bq

import "fmt"

// MaxArgsBytes is the most a job's args may take once encoded as JSON:
// 1 MiB. Enqueue refuses larger args before reaching the database, with
// the same rule on every database. Keep large payloads in storage of your
// own and pass a reference (an id, a URL) in the args.
const MaxArgsBytes = 1 << 20

// checkArgsSize refuses encoded args over MaxArgsBytes; the bulk calls
// name the args' index around it.
func checkArgsSize(raw []byte) error {
	if len(raw) <= MaxArgsBytes {
		return nil
	}
	return fmt.Errorf("%w: args encode to %d bytes of JSON, over the limit of %d (bq.MaxArgsBytes): "+
		"keep large payloads in storage of your own and pass a reference (an id, a URL) in the args",
		ErrInvalidJob, len(raw), MaxArgsBytes)
}
