package viewer

import (
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// query reads URL parameters, keeping the first malformed one as the
// request's error.
type query struct {
	v   url.Values
	err error
}

func newQuery(v url.Values, allowed ...string) *query {
	q := &query{v: v}
	for k, vs := range v {
		if !slices.Contains(allowed, k) && k != "format" {
			q.fail(k, "unknown parameter (this page takes %s)", strings.Join(allowed, ", "))
		} else if len(vs) > 1 {
			q.fail(k, "given %d times", len(vs))
		}
	}
	checkFormat(q)
	return q
}

func (q *query) fail(name, format string, args ...any) {
	if q.err == nil {
		q.err = badRequest("parameter %s: "+format, append([]any{name}, args...)...)
	}
}

func (q *query) str(name string) string { return strings.TrimSpace(q.v.Get(name)) }

// int reads an integer in [lo, hi]; def when absent.
func (q *query) int(name string, def, lo, hi int) int {
	s := q.str(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		q.fail(name, "%q: want a whole number from %d to %d", s, lo, hi)
		return def
	}
	return n
}

// float reads a finite number; nil when absent.
func (q *query) float(name string) *float64 {
	s := q.str(name)
	if s == "" {
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		q.fail(name, "%q is not a number", s)
		return nil
	}
	return &f
}

// time reads an RFC 3339 time or a date (midnight UTC); zero when absent.
func (q *query) time(name string) time.Time {
	s := q.str(name)
	if s == "" {
		return time.Time{}
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	q.fail(name, "%q: want a time like 2006-01-02 or 2006-01-02T15:04:05Z", s)
	return time.Time{}
}

// oneOf reads a value from a fixed set; def when absent.
func (q *query) oneOf(name, def string, set ...string) string {
	s := q.str(name)
	if s == "" {
		return def
	}
	if !slices.Contains(set, s) {
		q.fail(name, "%q: want one of %s", s, strings.Join(set, ", "))
		return def
	}
	return s
}
