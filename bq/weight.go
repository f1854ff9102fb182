package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/bqueue/bq"
)

// runWeight lists, sets and clears keys' fair-share weights.
func runWeight(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "weight", "weight list|set|clear --dsn DSN [--prefix bq_] [--json] ...\n\n"+
		"\tbq weight list [--json]\n"+
		"\tbq weight set KEY WEIGHT\n"+
		"\tbq weight clear KEY",
		fmt.Sprintf(`A key's weight is its share of the slots of the queues whose policy has
FairShare: a key of weight 3 gets three slots for each slot of a key of
weight 1, within its own limit. KEY is a full key, Group + "/" + Key
(bq.Key), as bq status prints it.
"list" prints each key's stored weight and when it changed; a key with
none weighs its queue policy's KeyWeight, else 1 (bq policy list).
"set" sets the key's weight, 1 to %d, for every fair queue, from the
next claim on, until "clear", which goes back to the policy's.`, bq.MaxKeyWeight))
	var db dbFlags
	db.register(f)
	asJSON := f.Bool("json", false, "print as JSON (list)")
	action, pos, err := f.action(args, "list, set KEY WEIGHT or clear KEY, e.g. bq weight list --dsn DSN")
	if err != nil {
		return err
	}
	var weight int
	switch action {
	case "list":
		if err := f.noArgs(pos); err != nil {
			return err
		}
	case "clear":
		if len(pos) != 1 {
			return f.fail("give one key, e.g. bq weight clear --dsn DSN api/tenant-1")
		}
	case "set":
		if len(pos) != 2 {
			return f.fail("give a key and a weight, e.g. bq weight set --dsn DSN api/tenant-1 3")
		}
		if weight, err = strconv.Atoi(pos[1]); err != nil {
			return f.fail("weight %q: use a whole number, 1 to %d (bq weight clear goes back to the policy's)", pos[1], bq.MaxKeyWeight)
		}
	default:
		return f.fail("unknown action %q: use list, set or clear", action)
	}

	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	w := e.stdout
	switch action {
	case "list":
		ws, err := client.KeyWeights(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(w, weightsJSON(ws))
		}
		return printWeights(w, ws, time.Now())
	case "set":
		if err := client.SetKeyWeight(ctx, pos[0], weight); err != nil {
			return err
		}
		fmt.Fprintf(w, "key %s weight set to %d: it beats its queue policy's KeyWeight until 'bq weight clear'\n", term(pos[0]), weight)
	case "clear":
		if err := client.ClearKeyWeight(ctx, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(w, "key %s weight cleared: the key weighs its queue policy's KeyWeight again, else 1\n", term(pos[0]))
	}
	return nil
}

// weightJSON is one stored weight as bq weight list --json prints it.
type weightJSON struct {
	Key       string    `json:"key"`
	Weight    int       `json:"weight"`
	UpdatedAt time.Time `json:"updated_at"`
}

func weightsJSON(ws []bq.KeyWeight) []weightJSON {
	out := make([]weightJSON, len(ws))
	for i, kw := range ws {
		out[i] = weightJSON{Key: kw.Key, Weight: kw.Weight, UpdatedAt: kw.UpdatedAt}
	}
	return out
}

// printWeights writes bq weight list's table.
func printWeights(w io.Writer, ws []bq.KeyWeight, now time.Time) error {
	none := "no key weights: none is set (each key weighs its queue policy's KeyWeight, else 1; bq weight set KEY WEIGHT sets one)"
	return printTable(w, len(ws), none, "key weights", func(tw io.Writer) {
		fmt.Fprintln(tw, "KEY\tWEIGHT\tCHANGED")
		for _, kw := range ws {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", term(kw.Key), kw.Weight, ago(kw.UpdatedAt, now))
		}
	})
}
