package ui

import (
	"context"
	"fmt"
	"net/http"

	"github.com/bqueue/bq"
)

// A key's pause: the key's page has a Pause button (client.PauseKey) or,
// while the key is paused, a Resume button (client.ResumeKey); the
// overview lists the paused keys, each with its Resume button.

// keyPause returns key's pause; its PausedAt is zero when the key is not
// paused.
func (s *server) keyPause(ctx context.Context, key string) (bq.PausedKey, error) {
	ps, err := s.client.PausedKeys(ctx)
	if err != nil {
		return bq.PausedKey{}, fmt.Errorf("read whether key %q is paused: %w", key, err)
	}
	for _, p := range ps {
		if p.Key == key {
			return p, nil
		}
	}
	return bq.PausedKey{Key: key}, nil
}

func (s *server) pauseKey(w http.ResponseWriter, r *http.Request) {
	s.actOnKey(w, r, "paused", s.client.PauseKey)
}

func (s *server) resumeKey(w http.ResponseWriter, r *http.Request) {
	s.actOnKey(w, r, "resumed", s.client.ResumeKey)
}

// actOnKey runs a POSTed pause or resume of the form's key, then
// redirects (303) to the key's page, which tells what was done.
func (s *server) actOnKey(w http.ResponseWriter, r *http.Request, done string, action func(context.Context, string) error) {
	if !s.formOK(w, r) {
		return
	}
	key := r.PostFormValue("key")
	s.changeKey(w, r, key, badKey, keyPauseNotice+done, func() error { return action(r.Context(), key) })
}

// badKey titles the 400 page of a pause or resume of a bad key.
const badKey = "Bad key"

// keyPauseNotice starts the notice a key's pause or resume leaves: "k:"
// done.
const keyPauseNotice = "k:"

// keyPauseSaid is the notice of a key's pause or resume, from its signed
// cookie value after keyPauseNotice.
func keyPauseSaid(v string) string {
	switch v {
	case "paused":
		return "Key paused: no process claims its jobs until it is resumed; the rest of their queues run on, and enqueues still succeed."
	case "resumed":
		return "Key resumed: the workers of its jobs' queues were woken."
	}
	return ""
}
