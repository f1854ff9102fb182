// Package ui is bq's web dashboard: queues and their counts (refreshed
// live), each with a pause or resume button, charts of the queue's
// history, blocked work by key, every job listed by kind, queue, state,
// key or key prefix, metadata, tag and time (the Jobs page, a page at a
// time), each job with its explanation, metadata and tags and a cancel
// button while it is live, failed jobs with retry, discard and cancel,
// the rate keys, each with its line and a form to override its rate,
// each key with a form to override its limit and a pause or resume
// button (the paused keys listed on the overview), the processes, the
// Verify page (client.Verify's report, with a Repair button), and a
// search by job id, key, tenant (a key's end, or a metadata value: see
// Options.SearchMetadata), tag or metadata (key=value). Mount it in your
// server:
//
//	mux.Handle("/bq/", http.StripPrefix("/bq", ui.Handler(client, ui.Options{Path: "/bq", Token: token})))
//
// or run `bq ui --dsn ...`. Pages, charts included (inline SVG), are
// rendered on the server; the CSS and the small script that refreshes
// them are embedded, so it works offline. Retry, discard, cancel, pause,
// resume (of a queue or a key), a rate override, a key's limit override
// and Verify's repair are POST forms protected against cross-site
// requests; retry goes through admission like any enqueue: it never
// bypasses a limit.
//
// The handler has no access control of its own beyond Options.Token: put
// your application's authentication in front of it. Without a token it
// answers only loopback Host names and Options.Hosts (against DNS
// rebinding); it refuses GETs made by other sites' pages and bounds what
// each request costs. docs/observability.md lists every defence.
package ui

import (
	"cmp"
	"crypto/rand"
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Options configures the dashboard. Zero values take the defaults.
type Options struct {
	// Token, when set, is required on every request: as
	// "Authorization: Bearer <token>", or through a session cookie that
	// visiting any page once with ?token=<token> sets (it lasts
	// SessionMaxAge, and only on this process). Any string works; use at
	// least MinTokenLength random characters. Wrong tokens from one
	// address are slowed down (after 5, a wait doubling from 1 s to a
	// minute; 429 meanwhile). Default: none; then keep the dashboard on a
	// loopback address or behind your own auth (and see Hosts).
	Token string
	// Hosts lists the names (a Host header's host, any port) or
	// host:port pairs the dashboard answers besides loopback names
	// (localhost, 127.0.0.1, [::1], any loopback address, any port);
	// "*" answers every name. Default: none. Without a Token, a request
	// for any other name is refused with 421 Misdirected Request: a page
	// under a name its owner points at 127.0.0.1 (DNS rebinding) would
	// otherwise be same-origin with the dashboard. With a Token every
	// name is answered, unless Hosts is set.
	Hosts []string
	// Path is where the handler is mounted, e.g. "/bq" when serving it
	// under http.StripPrefix("/bq", ...); links and cookies use it.
	// Default "" (the root).
	Path string
	// Refresh is how often the overview updates itself. Default 3s.
	Refresh time.Duration
	// Logger for failed actions and rendering errors. Default slog.Default().
	Logger *slog.Logger
	// SecureCookies marks the dashboard's cookies Secure even on a
	// request that came without TLS: set it behind a proxy that
	// terminates TLS. Default: Secure when the request came over TLS.
	// X-Forwarded-Proto is not read: any client can send it.
	SecureCookies bool
	// MaxInFlight is how many requests (assets aside) the dashboard
	// serves at once; more get 503 with Retry-After. A form's body is
	// read before its request takes one of them. Default 4.
	MaxInFlight int
	// FormTimeout bounds reading a POSTed form's body (at most 16 KiB):
	// a client trickling it is answered 408. Default 10s.
	FormTimeout time.Duration
	// SessionMaxAge is how long the session cookie that ?token= sets
	// lasts; after it, the token is needed again. Default 12h.
	SessionMaxAge time.Duration
	// SearchMetadata lists the metadata keys under which the search box
	// also looks up a plain word: with "tenant", searching acme lists
	// the newest 50 jobs whose metadata holds tenant=acme, besides the
	// keys and tags it finds. Each key costs the search one ListJobs. At
	// most MaxSearchMetadata are searched; the rest are ignored (and
	// logged). Default {"tenant"}; an empty, non-nil list searches none.
	SearchMetadata []string
}

// MinTokenLength is the shortest Token bq ui accepts, and below which
// Handler logs a warning: 16 random characters (rand.Text gives 26).
const MinTokenLength = 16

// MaxSearchMetadata is the most metadata keys (Options.SearchMetadata) a
// search looks a word up under: each is a query of its own.
const MaxSearchMetadata = 4

// server is one mounted dashboard.
type server struct {
	client *bq.Client
	opts   Options
	pages  *pages
	// csrf is the token forms carry: random per handler (per process).
	csrf string
	// secret signs notices and sessions: random per handler, so a
	// session works only on the process that issued it.
	secret []byte
	guard  *guard
	assets fs.FS
}

// Handler returns the dashboard for client.
func Handler(client *bq.Client, opts Options) http.Handler {
	opts.Path = strings.TrimRight(opts.Path, "/")
	opts.Refresh = cmp.Or(opts.Refresh, 3*time.Second)
	opts.MaxInFlight = cmp.Or(opts.MaxInFlight, 4)
	opts.FormTimeout = cmp.Or(opts.FormTimeout, 10*time.Second)
	opts.SessionMaxAge = cmp.Or(opts.SessionMaxAge, 12*time.Hour)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Token != "" && len(opts.Token) < MinTokenLength {
		opts.Logger.Warn("bq ui: the dashboard's token is short and guessable; use at least 16 random characters",
			"length", len(opts.Token), "min", MinTokenLength)
	}
	opts.SearchMetadata = searchMetadata(opts.SearchMetadata, opts.Logger)
	assets, _ := fs.Sub(assetFS, "assets")
	s := &server{client: client, opts: opts, pages: mustParse(), csrf: rand.Text(),
		secret: []byte(rand.Text()), guard: newGuard(), assets: assets}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /assets/{file}", s.asset)
	mux.HandleFunc("GET /{$}", s.overview)
	mux.HandleFunc("GET /blocked", s.blocked)
	mux.HandleFunc("GET /key", s.key)
	mux.HandleFunc("GET /jobs/{$}", s.findJob)
	mux.HandleFunc("GET /jobs/{id}", s.job)
	mux.HandleFunc("GET /jobs/{id}/args", s.rawArgs)
	mux.HandleFunc("GET /jobs/{id}/error", s.rawError)
	mux.HandleFunc("GET /failed", s.failed)
	mux.HandleFunc("GET /processes", s.processes)
	mux.HandleFunc("GET /history", s.history)
	mux.HandleFunc("GET /search", s.search)
	mux.HandleFunc("GET /periodic", s.periodic)
	mux.HandleFunc("GET /rates", s.rates)
	mux.HandleFunc("GET /rate", s.rateKey)
	mux.HandleFunc("GET /verify", s.verify)
	mux.HandleFunc("GET /workflows/{id}", s.workflow)
	mux.HandleFunc("POST /jobs/{id}/retry", s.retry)
	mux.HandleFunc("POST /jobs/{id}/discard", s.discard)
	mux.HandleFunc("POST /jobs/{id}/cancel", s.cancel)
	mux.HandleFunc("POST /queues/{queue}/pause", s.pause)
	mux.HandleFunc("POST /queues/{queue}/resume", s.resume)
	mux.HandleFunc("POST /rate/set", s.setRate)
	mux.HandleFunc("POST /rate/clear", s.clearRate)
	mux.HandleFunc("POST /key/limit/set", s.setLimit)
	mux.HandleFunc("POST /key/limit/clear", s.clearLimit)
	mux.HandleFunc("POST /key/weight/set", s.setWeight)
	mux.HandleFunc("POST /key/weight/clear", s.clearWeight)
	mux.HandleFunc("POST /key/pause", s.pauseKey)
	mux.HandleFunc("POST /key/resume", s.resumeKey)
	mux.HandleFunc("POST /verify/repair", s.repair)
	// A link to an action, followed or prefetched, does nothing.
	mux.HandleFunc("/jobs/{id}/retry", postOnly)
	mux.HandleFunc("/jobs/{id}/discard", postOnly)
	mux.HandleFunc("/jobs/{id}/cancel", postOnly)
	mux.HandleFunc("/queues/{queue}/pause", postOnly)
	mux.HandleFunc("/queues/{queue}/resume", postOnly)
	mux.HandleFunc("/rate/set", postOnly)
	mux.HandleFunc("/rate/clear", postOnly)
	mux.HandleFunc("/key/limit/set", postOnly)
	mux.HandleFunc("/key/limit/clear", postOnly)
	mux.HandleFunc("/key/weight/set", postOnly)
	mux.HandleFunc("/key/weight/clear", postOnly)
	mux.HandleFunc("/key/pause", postOnly)
	mux.HandleFunc("/key/resume", postOnly)
	mux.HandleFunc("/verify/repair", postOnly)
	mux.HandleFunc("/", s.notFound)

	return s.secure(limitInFlight(opts.MaxInFlight, mux))
}

// searchMetadata is Options.SearchMetadata as searched: the default for
// nil, each key once, blanks dropped, at most MaxSearchMetadata.
func searchMetadata(keys []string, log *slog.Logger) []string {
	if keys == nil {
		return []string{"tenant"}
	}
	out := []string{}
	for _, k := range keys {
		if k = strings.TrimSpace(k); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) > MaxSearchMetadata {
		log.Warn("bq ui: the search looks words up under the first metadata keys of Options.SearchMetadata only",
			"searched", out[:MaxSearchMetadata], "ignored", out[MaxSearchMetadata:])
		out = out[:MaxSearchMetadata]
	}
	return out
}

// postOnly answers a request for an action that is not a POST.
func postOnly(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	http.Error(w, "this action is the POST of a form: open the job's, queue's, key's or rate key's page and use its button", http.StatusMethodNotAllowed)
}

// asset serves one embedded file; there is no listing of them.
func (s *server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if st, err := fs.Stat(s.assets, name); err != nil || st.IsDir() {
		s.notFound(w, r)
		return
	}
	http.ServeFileFS(w, r, s.assets, name)
}
