package ui

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/bqueue/bq"
)

// A key's fair-share weight: the key's page shows it and has a form that
// sets it (client.SetKeyWeight) and one that clears it
// (client.ClearKeyWeight), as it does for the key's limit override.

// keyData is a key's page: its semaphore, holders and line, its stored
// fair-share weight (nil: none, it weighs its queue policy's) and its
// pause (PausedAt zero: not paused).
type keyData struct {
	*bq.KeyState
	Weight *bq.KeyWeight
	Pause  bq.PausedKey
}

// MaxWeight is the largest weight the page's form takes.
func (keyData) MaxWeight() int { return bq.MaxKeyWeight }

// keyWeight returns key's stored weight, nil if it has none.
func (s *server) keyWeight(ctx context.Context, key string) (*bq.KeyWeight, error) {
	ws, err := s.client.KeyWeights(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the weight of key %q: %w", key, err)
	}
	for i := range ws {
		if ws[i].Key == key {
			return &ws[i], nil
		}
	}
	return nil, nil
}

// setWeight sets a key's fair-share weight (the form of its page).
func (s *server) setWeight(w http.ResponseWriter, r *http.Request) {
	if !s.formOK(w, r) {
		return
	}
	key := r.PostFormValue("key")
	text := strings.TrimSpace(r.PostFormValue("weight"))
	weight, err := strconv.Atoi(text)
	if err != nil {
		s.badKeyForm(w, r, badWeight, fmt.Sprintf("Weight %q: write a whole number, 1 to %d.", text, bq.MaxKeyWeight))
		return
	}
	s.changeKey(w, r, key, badWeight, weightNotice+fmt.Sprintf("set:%d", weight), func() error {
		return s.client.SetKeyWeight(r.Context(), key, weight)
	})
}

// clearWeight removes a key's weight; a key without one is left as it is.
func (s *server) clearWeight(w http.ResponseWriter, r *http.Request) {
	if !s.formOK(w, r) {
		return
	}
	key := r.PostFormValue("key")
	s.changeKey(w, r, key, badWeight, weightNotice+"cleared", func() error { return s.client.ClearKeyWeight(r.Context(), key) })
}

// badWeight titles the 400 page of a weight form's bad input.
const badWeight = "Bad weight"

// weightNotice starts the notice a weight action leaves: "w:" done.
const weightNotice = "w:"

// weightSaid is the notice of a weight action, from its signed cookie
// value after weightNotice.
func weightSaid(v string) string {
	if v == "cleared" {
		return "Weight cleared: from the next claim on, the key weighs its queue policy's KeyWeight again, else 1."
	}
	if weight, ok := strings.CutPrefix(v, "set:"); ok {
		return fmt.Sprintf("Weight set to %s: from the next claim on, in every fair-share queue, until it is cleared.", weight)
	}
	return ""
}
