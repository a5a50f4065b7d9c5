package viewer

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/reconstruct"
)

type listJSON struct {
	Episodes []struct {
		ID string `json:"id"`
	} `json:"episodes"`
	Counts []statusCount `json:"counts"`
	Of     string        `json:"counts_of"`
	Next   string        `json:"next_cursor"`
	Part   bool          `json:"partial"`
}

func decodeList(t *testing.T, body string) listJSON {
	t.Helper()
	var l listJSON
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatalf("list JSON: %v\n%s", err, body)
	}
	return l
}

func (l listJSON) ids() []string {
	out := []string{}
	for _, e := range l.Episodes {
		out = append(out, e.ID)
	}
	return out
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	srv, names := serve(t, Options{})
	tests := []struct {
		name, query string
		want        []string
	}{
		{"all", "", names},
		{"status", "status=failure", []string{"failed-episode"}},
		{"task", "task=task-2", []string{"subagent-fork", "token-drift"}},
		{"group", "group=xss-group", []string{"xss"}},
		{"reward range", "reward_min=0.35&reward_max=0.6", []string{"edited-history", "failed-episode", "messages-parallel-stream-no-tokens"}},
		{"drift class", "drift=template_rewrite", []string{"token-drift"}},
		{"any drift", "drift=any", []string{"token-drift"}},
		{"rule", "rule=tool-ok&task=task-2", []string{"subagent-fork", "token-drift"}},
		{"text search", "q=MAIN+AGENT", []string{"subagent-fork"}},
		{"markup search", "q=<script>", []string{"xss"}},
		{"harness", "harness=sim/1&status=failure", []string{"failed-episode"}},
		{"no harness", "harness=other", []string{}},
		{"since", "since=2026-11-29T23:11:00Z&until=2026-11-29T23:12:00Z", []string{"subagent-fork", "token-drift"}},
		{"sort", "sort=-reward&task=task-2", []string{"token-drift", "subagent-fork"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := get(t, srv, "/?format=json&"+tt.query)
			if code != 200 {
				t.Fatalf("GET /?%s = %d: %s", tt.query, code, body)
			}
			if got := decodeList(t, body).ids(); !slices.Equal(got, tt.want) {
				t.Fatalf("GET /?%s = %v, want %v", tt.query, got, tt.want)
			}
		})
	}
}

func TestListHTML(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, Options{})
	code, body, hdr := get(t, srv, "/?task=task-2")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", code, hdr.Get("Content-Type"))
	}
	for _, want := range []string{
		`<tr class="row" data-href="/episodes/token-drift"><td><a href="/episodes/token-drift">token-drift</a></td><td class="st-success">success</td><td>task-2</td><td><a href="/groups/group-1">group-1</a></td><td>1.2</td><td>5</td><td>2026-11-29 23:12:00</td><td>2026-01-02 03:04:10</td></tr>`,
		`<span class="st-success">success <b>2</b></span> <span class="st-failure">failure <b>0</b></span>`,
		`<small>(all matching episodes in the store)</small>`,
		`<input name="task" value="task-2">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("list page lacks %s", want)
		}
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy = %q, want one that loads only the viewer's own assets", csp)
	}
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	srv, names := serve(t, Options{})
	var got []string
	q := "/?format=json&limit=4"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		code, body, _ := get(t, srv, q)
		l := decodeList(t, body)
		if code != 200 || len(l.Episodes) > 4 || l.Part {
			t.Fatalf("GET %s = %d, %d rows, partial %v", q, code, len(l.Episodes), l.Part)
		}
		got = append(got, l.ids()...)
		if l.Next == "" {
			break
		}
		q = "/?format=json&limit=4&cursor=" + url.QueryEscape(l.Next)
	}
	if !slices.Equal(got, names) {
		t.Fatalf("pages = %v, want %v", got, names)
	}
}

// TestListScanBudget: a selective filter over more episodes than one
// request may scan returns a partial page with a link that goes on.
func TestListScanBudget(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, Options{ScanBudget: 3, DeepScanBudget: 2})
	var seen []string
	q := "/?format=json&q=main+agent"
	partial, requests := 0, 0
	for ; ; requests++ {
		if requests > 20 {
			t.Fatal("scan does not end")
		}
		_, body, _ := get(t, srv, q)
		l := decodeList(t, body)
		seen = append(seen, l.ids()...)
		if l.Part {
			partial++
		}
		if l.Next == "" {
			break
		}
		q = "/?format=json&q=main+agent&cursor=" + url.QueryEscape(l.Next)
	}
	if !slices.Equal(seen, []string{"subagent-fork"}) || requests != 6 || partial != 6 {
		t.Fatalf("scan found %v in %d+1 requests, %d partial; want [subagent-fork] in 6+1, 6 partial (14 episodes, 2 reconstructed a request)", seen, requests, partial)
	}
}

func TestEpisodeForkAndDrift(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, Options{})
	tests := []struct {
		path string
		want []string
	}{
		{"/episodes/subagent-fork", []string{
			`<li class="d0 sel"><a href="/episodes/subagent-fork?segment=0">segment 0</a> <span class="kind k-root">root</span> · 3 calls · 23/49 tokens trained</li>`,
			`<li class="d1"><a href="/episodes/subagent-fork?segment=1">segment 1</a> <span class="kind k-fork">fork</span> from 0 · 2 calls · 9/29 tokens trained</li>`,
			`<span id="trainable">23</span> of 49 tokens trainable</p>`,
		}},
		{"/episodes/token-drift?turn=4", []string{
			`<li class="row bar o-drift sel" data-href="/episodes/token-drift?turn=4"><a href="/episodes/token-drift?turn=4" id="turn-4">`,
			`<span class="drift">template_rewrite at c_12, split</span> · 2 calls · 18/78 tokens trained</li>`,
			`<span id="trainable">18</span> of 78 tokens trainable; call 4 generated <span id="turn-trainable">12</span>`,
			`<pre class="content"><mark class="rule" title="rule tool-ok (0.1)" data-rule="tool-ok">ok</mark> bash </pre>`,
			`<dt>tokens</dt><dd>50 in / 25 out</dd>`,
		}},
		{"/episodes/retries?turn=1", []string{
			`<li class="row bar o-unusable sel"`,
			`<p class="note" id="no-tokens">call 1 is in no trajectory (retried by c_4)</p>`,
		}},
		{"/episodes/token-drift?segment=0&token=45&pane=advantage", []string{
			`<div class="pane mode-advantage" id="tokens" data-mode="advantage">`,
			`<span class="t m l6 ap3 f" id="t45" title="#45 id 3504 trained logprob -0.995 (p 0.37) advantage 0.5">3504</span>`,
		}},
	}
	for _, tt := range tests {
		code, body, _ := get(t, srv, tt.path)
		if code != 200 {
			t.Fatalf("GET %s = %d", tt.path, code)
		}
		for _, w := range tt.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %s", tt.path, w)
			}
		}
	}
}

func TestEpisodeJSON(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, Options{})
	code, body, _ := get(t, srv, "/episodes/subagent-fork?format=json")
	var ev struct {
		Turns        []reconstruct.Turn       `json:"turns"`
		Trajectories []reconstruct.Trajectory `json:"trajectories"`
		Timeline     []bar                    `json:"timeline"`
	}
	if err := json.Unmarshal([]byte(body), &ev); code != 200 || err != nil {
		t.Fatalf("GET episode JSON = %d, %v", code, err)
	}
	if len(ev.Turns) != 5 || len(ev.Trajectories) != 2 || *ev.Trajectories[1].Lineage.ParentSegment != 0 || ev.Trajectories[1].Lineage.Kind != "fork" {
		t.Fatalf("episode JSON: %d turns, %d trajectories", len(ev.Turns), len(ev.Trajectories))
	}
	if a := ev.Trajectories[0].Turns[0].Advantage; a == nil || *a != 0.5 {
		t.Fatalf("advantage of turn 0 = %v, want the annotator's 0.5", a)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, Options{})
	tests := []struct {
		path   string
		status int
		reason string
	}{
		{"/episodes/nope", 404, `no episode &#34;nope&#34; in this store`},
		{"/groups/nope", 404, `no episodes in group &#34;nope&#34;`},
		{"/nowhere", 404, `no page at this address`},
		{"/?reward_min=abc", 400, `parameter reward_min: &#34;abc&#34; is not a number`},
		{"/?reward_min=2&reward_max=1", 400, `parameter reward_min: 2 is above reward_max 1`},
		{"/?limit=0", 400, `parameter limit: &#34;0&#34;: want a whole number from 1 to 500`},
		{"/?status=done", 400, `parameter status: &#34;done&#34;: want one of running, success, failure, error, timeout`},
		{"/?since=yesterday", 400, `parameter since: &#34;yesterday&#34;: want a time like 2006-01-02`},
		{"/?cursor=%21%21", 400, `parameter cursor: &#34;!!&#34; is not a cursor of this list`},
		{"/?colour=red", 400, `parameter colour: unknown parameter`},
		{"/?task=a&task=b", 400, `parameter task: given 2 times`},
		{"/?format=xml", 400, `parameter format: &#34;xml&#34;: want html or json`},
		{"/episodes/token-drift?turn=99", 400, `parameter turn: episode has no call 99 (it has 5)`},
		{"/episodes/token-drift?segment=7", 400, `parameter segment: episode has no segment 7 (it has 2)`},
		{"/episodes/token-drift?pane=heat", 400, `parameter pane: &#34;heat&#34;: want one of mask, logprob, advantage`},
		{"/groups/group-1?a=chat-tools", 400, `parameter a: a diff needs both a and b`},
	}
	for _, tt := range tests {
		code, body, _ := get(t, srv, tt.path)
		if code != tt.status || !strings.Contains(body, `<p class="reason">`+tt.reason) {
			t.Errorf("GET %s = %d, want %d with %q:\n%s", tt.path, code, tt.status, tt.reason, body)
		}
	}
	code, body, _ := get(t, srv, "/?limit=x&format=json")
	if code != 400 || body != "{\n \"error\": \"parameter limit: \\\"x\\\": want a whole number from 1 to 500\"\n}\n" {
		t.Errorf("GET /?limit=x&format=json = %d %q", code, body)
	}
}

// TestEscaping: recorded text that is markup renders as text.
func TestEscaping(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, Options{})
	for _, tt := range []struct{ path, want string }{
		{"/episodes/xss", `<pre class="content">&lt;script&gt;alert(1)&lt;/script&gt;</pre>`},
		{"/?group=xss-group", `<td>&lt;img src=x onerror=alert(2)&gt;</td>`},
	} {
		code, body, _ := get(t, srv, tt.path)
		if code != 200 || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s = %d, lacks %s", tt.path, code, tt.want)
		}
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
			t.Errorf("GET %s renders recorded markup as markup", tt.path)
		}
	}
}

func TestGroup(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, Options{})
	code, body, _ := get(t, srv, "/groups/group-1?a=chat-tools&b=token-drift")
	for _, w := range []string{
		`<th>advantage</th><th>selection weight</th>`,
		`<td><a href="/episodes/chat-tools">chat-tools</a></td><td class="st-success">success</td><td>0.1</td><td>0.5</td><td class="weight">0.25</td><td>3</td>`,
		`<td><a href="/episodes/failed-episode">failed-episode</a></td><td class="st-failure">failure</td><td>0.5</td><td>-0.5</td><td class="weight">–</td>`,
		`first divergent message: <b id="diff-message">1</b>`,
		`<pre class="content">list the files</pre></article>`,
		`first divergent token: <b id="diff-token">0</b> (id 73203 vs 113853; 37 and 46 tokens)`,
	} {
		if code != 200 || !strings.Contains(body, w) {
			t.Errorf("group page = %d, lacks %s", code, w)
		}
	}
	_, body, _ = get(t, srv, "/groups/xss-group")
	if strings.Contains(body, "selection weight") {
		t.Error("group without selection weights shows the column")
	}
}

func TestDeepLink(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, Options{})
	code, _, hdr := get(t, srv, "/?episode=token-drift&turn=4&token=54")
	if want := "/episodes/token-drift?token=54&turn=4#t54"; code != http.StatusFound || hdr.Get("Location") != want {
		t.Fatalf("deep link = %d to %q, want 302 to %q", code, hdr.Get("Location"), want)
	}
	code, body, _ := get(t, srv, "/episodes/token-drift?token=54&turn=4")
	if code != 200 || !strings.Contains(body, `<span class="t m l0 ap3 s f" id="t54" title="#54 id 1499 trained logprob -0.055 (p 0.95) advantage 0.5">1499</span>`) {
		t.Fatalf("token 54 of call 4 is not focused (%d)", code)
	}
}

func TestAdminToken(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, Options{AdminToken: "s3cret-admin"})
	if code, body, _ := get(t, srv, "/"); code != 401 || !strings.Contains(body, "needs the admin token") {
		t.Fatalf("GET / without token = %d", code)
	}
	if code, _, _ := get(t, srv, "/", "Authorization", "Bearer wrong"); code != 401 {
		t.Fatalf("GET / with a wrong token = %d, want 401", code)
	}
	if code, _, _ := get(t, srv, "/episodes/xss?format=json", "Authorization", "Bearer s3cret-admin"); code != 200 {
		t.Fatalf("GET with the token = %d, want 200", code)
	}
	if code, _, _ := get(t, srv, "/static/viewer.css"); code != 200 {
		t.Fatalf("GET /static/viewer.css = %d, want 200 (assets need no token)", code)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.PostForm(srv.URL+"/login", url.Values{"token": {"s3cret-admin"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	cookies := res.Cookies()
	if res.StatusCode != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].HttpOnly {
		t.Fatalf("POST /login = %d, cookies %v", res.StatusCode, cookies)
	}
	if code, _, _ := get(t, srv, "/", "Cookie", cookies[0].Name+"="+cookies[0].Value); code != 200 {
		t.Fatalf("GET / with the login cookie = %d, want 200", code)
	}
	res, err = c.PostForm(srv.URL+"/login", url.Values{"token": {"guess"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 || len(res.Cookies()) != 0 {
		t.Fatalf("POST /login with a wrong token = %d, cookies %v", res.StatusCode, res.Cookies())
	}
}
