package ui

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// hostAllowed reports whether r's Host names this dashboard. A loopback
// name always does. Without a token, other names are refused unless
// listed in Options.Hosts: a page whose name its owner has pointed at
// 127.0.0.1 (DNS rebinding) is same-origin with the dashboard, so the
// browser's own defences and the CSRF check would let it read and act.
func (s *server) hostAllowed(r *http.Request) bool {
	if s.opts.Token != "" && len(s.opts.Hosts) == 0 {
		return true
	}
	host, port := splitHost(r.Host)
	if isLoopback(host) {
		return true
	}
	for _, h := range s.opts.Hosts {
		if h == "*" {
			return true
		}
		if hh, hp := splitHost(h); hh == host && (hp == "" || hp == port) {
			return true
		}
	}
	return false
}

// refuseHost answers a request for a name the dashboard does not answer.
func (s *server) refuseHost(w http.ResponseWriter, r *http.Request) {
	http.Error(w, fmt.Sprintf("misdirected request: this dashboard answers only loopback names (localhost, 127.0.0.1, [::1]) "+
		"and the names in its Hosts option, not %q: a page under another name that resolves to this machine may be a "+
		"DNS-rebinding attack. Open it as http://127.0.0.1:<port>/, or give it a token (bq ui --token) or Options.Hosts.", r.Host),
		http.StatusMisdirectedRequest)
}

// splitHost splits "name:port", "[::1]:port", "name" or "[::1]" into a
// lower-case host without brackets and a port ("" when none).
func splitHost(hostport string) (host, port string) {
	host = hostport
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")), port
}

// isLoopback reports whether host is localhost or a loopback address.
// Only the literal name: "localhost." or "x.localhost" go through DNS.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
