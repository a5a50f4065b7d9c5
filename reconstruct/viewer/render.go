package viewer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// page is what a route shows: a template with its data, and the JSON
// form of what it shows (format=json).
type page struct {
	Name  string // template: assets/templates/{Name}.html
	Title string
	Data  any
	JSON  any
	// JSONLink is the page's own address with format=json.
	JSONLink string
}

// httpError is a failure the person asking can act on.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &httpError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

// statusFor maps an error to the HTTP status of its page: the one place
// outcomes become statuses.
func statusFor(err error) int {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.status
	case errors.Is(err, recorder.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, context.Canceled):
		return 499
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// page adapts a page builder to a handler that renders its page as HTML
// or, with format=json, as JSON.
func (h *Handler) page(build func(*http.Request) (*page, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := build(r)
		var rd *redirect
		if errors.As(err, &rd) {
			http.Redirect(w, r, rd.to, http.StatusFound)
			return
		}
		if err != nil {
			h.renderError(w, r, err)
			return
		}
		p.JSONLink = jsonURL(r)
		if r.URL.Query().Get("format") == "json" {
			writeJSON(w, http.StatusOK, p.JSON)
			return
		}
		h.render(w, r, http.StatusOK, p)
	}
}

// checkFormat rejects a format other than html or json.
func checkFormat(q *query) {
	if f := q.str("format"); f != "" && f != "html" && f != "json" {
		q.fail("format", "%q: want html or json", f)
	}
}

func jsonURL(r *http.Request) string {
	u := *r.URL
	v := u.Query()
	v.Set("format", "json")
	u.RawQuery, u.Fragment = v.Encode(), ""
	return u.RequestURI()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, "encode json: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", "inline")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, err error) {
	status := statusFor(err)
	msg := err.Error()
	if status >= 500 {
		h.log.Warn("viewer request failed", "path", r.URL.Path, "err", err)
	}
	if r.URL.Query().Get("format") == "json" {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	h.render(w, r, status, &page{Name: "error", Title: http.StatusText(status), Data: errorView{Status: status, Message: msg}})
}

type errorView struct {
	Status  int
	Message string
}

// render executes p's template into a buffer first, so that a template
// failure still gets a clean error page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, p *page) {
	var buf bytes.Buffer
	if err := h.pages[p.Name].ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.Warn("viewer template failed", "page", p.Name, "err", err)
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

var pageNames = []string{"list", "episode", "group", "error", "login"}

func parsePages() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(assets, "assets/templates/layout.html"))
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t := template.Must(template.Must(base.Clone()).ParseFS(assets, "assets/templates/"+name+".html"))
		out[name] = t
	}
	return out
}

var funcs = template.FuncMap{
	"num":        fmtFloat,
	"stamp":      fmtTime,
	"dur":        fmtDuration,
	"first":      func(vs []string) string { return strings.Join(vs[:min(1, len(vs))], "") },
	"sortKeys":   func() []string { return sortKeys },
	"deref":      func(p *int) int { return *p },
	"hasWeights": hasWeights,
}

// hasWeights reports whether any rollout has a planner selection weight:
// the column shows only then.
func hasWeights(rs []rollout) bool {
	for _, r := range rs {
		if r.SelectionWeight != nil {
			return true
		}
	}
	return false
}

// fmtFloat prints a nullable number, "–" for none.
func fmtFloat(f *float64) string {
	if f == nil {
		return "–"
	}
	return strconv.FormatFloat(*f, 'g', 4, 64)
}

func fmtTime(t any) string {
	switch v := t.(type) {
	case time.Time:
		if !v.IsZero() {
			return v.UTC().Format("2006-01-02 15:04:05")
		}
	case *time.Time:
		if v != nil {
			return fmtTime(*v)
		}
	}
	return "–"
}

func fmtDuration(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return d.Round(time.Millisecond).String()
}
