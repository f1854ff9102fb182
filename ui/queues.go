package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/bqueue/bq"
)

// Queue actions: pause and resume, POST forms on the overview's queue rows.

func (s *server) pause(w http.ResponseWriter, r *http.Request) {
	s.actOnQueue(w, r, "paused", s.client.PauseQueue)
}

func (s *server) resume(w http.ResponseWriter, r *http.Request) {
	s.actOnQueue(w, r, "resumed", s.client.ResumeQueue)
}

// actOnQueue runs a POSTed action on a queue, then redirects (303) to the
// overview, which tells what was done.
func (s *server) actOnQueue(w http.ResponseWriter, r *http.Request, done string, action func(context.Context, string) error) {
	if !s.formOK(w, r) {
		return
	}
	queue := r.PathValue("queue")
	if err := action(r.Context(), queue); err != nil {
		if errors.Is(err, bq.ErrInvalidArgument) {
			s.render(w, r, http.StatusBadRequest, "error", view{Title: "Bad queue name", Data: err.Error()})
			return
		}
		s.fail(w, r, err)
		return
	}
	// The name passed the queue rule: letters, digits and _-.: only, safe in a cookie.
	v := queueNotice + done + ":" + queue
	s.setCookie(w, r, noticeCookie, v+"."+s.sign(v), 60)
	http.Redirect(w, r, s.opts.Path+"/", http.StatusSeeOther)
}

// queueNotice starts the notice a queue action leaves: "q:" done ":" queue.
const queueNotice = "q:"

// queueSaid is the notice of a queue action, from its signed cookie value
// after queueNotice.
func queueSaid(v string) string {
	switch done, queue, _ := strings.Cut(v, ":"); done {
	case "paused":
		return fmt.Sprintf("Queue %s paused: no process claims its jobs until it is resumed; enqueues still succeed.", queue)
	case "resumed":
		return fmt.Sprintf("Queue %s resumed: its workers were woken.", queue)
	}
	return ""
}
