package ui

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/bqueue/bq"
)

// The Verify page: client.Verify's report of the stored rows against the
// engine's invariants, and a Repair button (a POST form) that runs it
// with Repair.

// verify shows Verify's report; it never repairs. The page does not
// refresh itself: each view checks every key, one transaction each.
func (s *server) verify(w http.ResponseWriter, r *http.Request) {
	rep, err := s.client.Verify(r.Context(), bq.VerifyOptions{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "verify", view{Title: "Verify", Nav: "verify", Notice: s.notice(w, r), Data: rep})
}

// repair runs Verify with Repair, then redirects (303) to the Verify
// page, which tells what was mended and checks again.
func (s *server) repair(w http.ResponseWriter, r *http.Request) {
	if !s.formOK(w, r) {
		return
	}
	rep, err := s.client.Verify(r.Context(), bq.VerifyOptions{Repair: true})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	left := rep.Unrepaired()
	v := fmt.Sprintf("%s%d:%d", verifyNotice, len(rep.Drift)-left, left)
	s.setCookie(w, r, noticeCookie, v+"."+s.sign(v), 60)
	http.Redirect(w, r, s.opts.Path+"/verify", http.StatusSeeOther)
}

// verifyNotice starts the notice a repair leaves: "v:" repaired ":" left.
const verifyNotice = "v:"

// verifySaid is the notice of a repair, from its signed cookie value
// after verifyNotice.
func verifySaid(v string) string {
	a, b, _ := strings.Cut(v, ":")
	repaired, err1 := strconv.Atoi(a)
	left, err2 := strconv.Atoi(b)
	switch {
	case err1 != nil || err2 != nil:
		return ""
	case repaired == 0 && left == 0:
		return "Repair found no drift: nothing was changed."
	case left == 0:
		return fmt.Sprintf("Repaired %s: drifted semaphores were recounted from their keys' rows "+
			"(their free slots went to their lines) and claims of dead processes reaped. The check below ran afresh.", driftCount(repaired))
	}
	return fmt.Sprintf("Repaired %s; %s left unrepaired. The check below ran afresh.", driftCount(repaired), driftCount(left))
}

// driftCount counts drift: "1 drift", "3 drifts".
func driftCount(n int) string {
	if n == 1 {
		return "1 drift"
	}
	return strconv.Itoa(n) + " drifts"
}
