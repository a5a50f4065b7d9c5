package redisstore

import (
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url     string
		cluster bool
		addrs   []string
		tls     bool
		user    string
		pass    string
		db      int
	}{
		{url: "redis://127.0.0.1:6379", addrs: []string{"127.0.0.1:6379"}},
		{url: "redis://u:p@10.0.0.1:7000/3", addrs: []string{"10.0.0.1:7000"}, user: "u", pass: "p", db: 3},
		{url: "rediss://redis.example:6380?dial_timeout=3", addrs: []string{"redis.example:6380"}, tls: true},
		{url: "redis+cluster://h1:7000,h2:7001,h3", cluster: true, addrs: []string{"h1:7000", "h2:7001", "h3:6379"}},
		{url: "rediss+cluster://:secret@h1:7000,h2:7001/?read_timeout=2s", cluster: true, addrs: []string{"h1:7000", "h2:7001"}, tls: true, pass: "secret"},
		{url: "redis+cluster://h1:7000", cluster: true, addrs: []string{"h1:7000"}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := ParseURL(tt.url, nil)
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tt.url, err)
			}
			defer c.Close()
			switch c := c.(type) {
			case *redis.Client:
				o := c.Options()
				if tt.cluster || o.Addr != tt.addrs[0] || (o.TLSConfig != nil) != tt.tls || o.Username != tt.user || o.Password != tt.pass || o.DB != tt.db {
					t.Fatalf("ParseURL(%q) = client %s tls %v user %q db %d, want %+v", tt.url, o.Addr, o.TLSConfig != nil, o.Username, o.DB, tt)
				}
			case *redis.ClusterClient:
				o := c.Options()
				if !tt.cluster || !slices.Equal(o.Addrs, tt.addrs) || (o.TLSConfig != nil) != tt.tls || o.Password != tt.pass {
					t.Fatalf("ParseURL(%q) = cluster %v tls %v, want %+v", tt.url, o.Addrs, o.TLSConfig != nil, tt)
				}
			default:
				t.Fatalf("ParseURL(%q) = %T", tt.url, c)
			}
		})
	}
	for _, bad := range []string{"127.0.0.1:6379", "http://h:1", "redis+cluster://h1:1,,h2:2", "redis+cluster://h1:1/2", "redis://h:1/x"} {
		if c, err := ParseURL(bad, nil); err == nil {
			c.Close()
			t.Errorf("ParseURL(%q) succeeded, want an error", bad)
		}
	}
	if got := redactURL("redis://u:hunter2@h:1"); got != "redis://u:xxxxx@h:1" {
		t.Errorf("redactURL = %q", got)
	}
}

func TestTimeKey(t *testing.T) {
	times := []time.Time{{}, time.Unix(0, -1<<62), time.Unix(0, -1), time.Unix(0, 0), time.Unix(0, 1), epoch, time.Unix(0, 1<<63-1)}
	for i, tm := range times {
		k := timeKey(tm)
		got, err := parseTimeKey(k)
		if err != nil || len(k) != timeKeyLen || !got.Equal(tm) {
			t.Fatalf("parseTimeKey(timeKey(%v)) = %v, %v (key %q)", tm, got, err, k)
		}
		if i > 0 && timeKey(times[i-1]) >= k {
			t.Fatalf("timeKey(%v) = %q does not sort after timeKey(%v) = %q", tm, k, times[i-1], timeKey(times[i-1]))
		}
	}
	if id, ok := memberID(member(epoch, "a:b")); !ok || id != "a:b" {
		t.Fatalf("memberID(member(a:b)) = %q, %v", id, ok)
	}
}
