package viewer

import (
	"context"
	"crypto/subtle"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
)

// Source is what the viewer reads: [recorder.Store] satisfies it on
// either backend. Implementations must be safe for concurrent use.
type Source interface {
	ListEpisodes(ctx context.Context, f recorder.Filter) ([]recorder.EpisodeSummary, string, error)
	Episode(ctx context.Context, id string) (*recorder.EpisodeSummary, error)
	Calls(ctx context.Context, episodeID string) ([]*recorder.Call, error)
}

// episodeCounter is the optional ability of a store to count episodes by
// status from its index (the embedded store has it); without it the list
// counts the episodes it shows.
type episodeCounter interface {
	CountEpisodes(ctx context.Context, f recorder.Filter) (map[string]int, error)
}

// Options configures [New].
type Options struct {
	// Source is the store to read. Required.
	Source Source
	// Annotator, when set, fills rewards, advantages and rule hits of the
	// samples shown; nil shows none.
	Annotator reconstruct.Annotator
	// AdminToken, when set, is required on every request: as a bearer
	// token, or in the cookie the login form sets. "" serves everyone.
	AdminToken string
	// Logger receives request failures. Nil discards.
	Logger *slog.Logger
	// PageSize is the default number of list rows; default 50, at most
	// maxPageSize whatever the limit parameter says.
	PageSize int
	// ScanBudget bounds the episode summaries one list request reads from
	// the store; default 2000. A page that runs out of budget before it
	// fills links to the next window.
	ScanBudget int
	// DeepScanBudget bounds the episodes one list request reconstructs to
	// apply the harness, drift, rule and text filters; default 200.
	DeepScanBudget int
	// GroupMax bounds the rollouts a group page shows; default 64.
	GroupMax int
}

const maxPageSize = 500

// Handler serves the viewer. It is safe for concurrent use.
type Handler struct {
	opts  Options
	log   *slog.Logger
	mux   http.Handler
	pages map[string]*template.Template
}

//go:embed assets
var assets embed.FS

// New returns the viewer's handler. It panics when opts.Source is nil.
func New(opts Options) *Handler {
	if opts.Source == nil {
		panic("viewer: Options.Source is nil")
	}
	opts.defaults()
	h := &Handler{opts: opts, log: opts.Logger, pages: parsePages()}
	r := chi.NewRouter()
	r.Use(h.secure)
	static, _ := fs.Sub(assets, "assets/static") // the directory is embedded above
	r.Handle("/static/*", http.StripPrefix("/static/", http.FileServerFS(static)))
	r.Get("/login", h.loginForm)
	r.Post("/login", h.login)
	r.Get("/", h.page(h.listPage))
	r.Get("/episodes/{id}", h.page(h.episodePage))
	r.Get("/groups/{id}", h.page(h.groupPage))
	r.NotFound(h.page(func(*http.Request) (*page, error) { return nil, notFound("no page at this address") }))
	h.mux = r
	return h
}

// defaults fills the zero fields of o.
func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	o.PageSize = min(o.PageSize, maxPageSize)
	if o.ScanBudget <= 0 {
		o.ScanBudget = 2000
	}
	if o.DeepScanBudget <= 0 {
		o.DeepScanBudget = 200
	}
	if o.GroupMax <= 0 {
		o.GroupMax = 64
	}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// csp lets a page load only the viewer's own assets and talk to nothing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// secure sets the security headers and, with an admin token, refuses
// requests without it.
func (h *Handler) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if h.opts.AdminToken == "" || r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/") || h.authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		h.renderError(w, r, &httpError{status: http.StatusUnauthorized, msg: "this viewer needs the admin token: sign in at /login or send Authorization: Bearer TOKEN"})
	})
}

// authCookie holds the admin token a browser signed in with.
const authCookie = "orchard_view_token"

// authorized reports whether r carries the admin token.
func (h *Handler) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		if c, err := r.Cookie(authCookie); err == nil {
			tok, ok = c.Value, true
		}
	}
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(h.opts.AdminToken)) == 1
}

func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, &page{Name: "login", Title: "Sign in"})
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := r.PostFormValue("token")
	if h.opts.AdminToken == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(h.opts.AdminToken)) != 1 {
		h.render(w, r, http.StatusUnauthorized, &page{Name: "login", Title: "Sign in", Data: "wrong token"})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: authCookie, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
