package redisstore

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ParseURL returns a client for url:
//
//   - redis://[user:password@]host:port[/db][?options] and rediss:// (TLS)
//     connect to one server, as [redis.ParseURL] reads them.
//   - redis+cluster://[user:password@]host1:port1,host2:port2,...[?options]
//     and rediss+cluster:// connect to a Redis Cluster; the hosts are seed
//     nodes (any subset of the cluster will do). Options are those of
//     [redis.ParseClusterURL]; the port defaults to 6379.
//
// A non-nil tlsConf replaces the TLS configuration of the rediss forms.
func ParseURL(rawURL string, tlsConf *tls.Config) (redis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("redis url %s: no scheme (want redis://, rediss:// or redis+cluster://)", redactURL(rawURL))
	}
	switch scheme {
	case "redis", "rediss":
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redis url %s: %w", redactURL(rawURL), err)
		}
		if scheme == "rediss" && tlsConf != nil {
			o.TLSConfig = tlsConf
		}
		return redis.NewClient(o), nil
	case "redis+cluster", "rediss+cluster":
		o, err := parseClusterURL(strings.TrimSuffix(scheme, "+cluster"), rest)
		if err != nil {
			return nil, fmt.Errorf("redis url %s: %w", redactURL(rawURL), err)
		}
		if scheme == "rediss+cluster" && tlsConf != nil {
			o.TLSConfig = tlsConf
		}
		return redis.NewClusterClient(o), nil
	}
	return nil, fmt.Errorf("redis url %s: unknown scheme %q (want redis, rediss, redis+cluster or rediss+cluster)", redactURL(rawURL), scheme)
}

// parseClusterURL turns "user:pw@h1:p1,h2:p2/?opts" into the one-host form
// with addr= parameters that redis.ParseClusterURL reads: net/url rejects a
// host list.
func parseClusterURL(scheme, rest string) (*redis.ClusterOptions, error) {
	hostPart, query, _ := strings.Cut(rest, "?")
	hostPart = strings.TrimSuffix(hostPart, "/")
	if strings.Contains(hostPart, "/") {
		return nil, fmt.Errorf("cluster URLs take no path (Redis Cluster has only db 0)")
	}
	userinfo := ""
	if i := strings.LastIndex(hostPart, "@"); i >= 0 {
		userinfo, hostPart = hostPart[:i+1], hostPart[i+1:]
	}
	hosts := strings.Split(hostPart, ",")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, err
	}
	for _, h := range hosts[1:] {
		if h == "" {
			return nil, fmt.Errorf("empty host in host list")
		}
		if !strings.Contains(h, ":") {
			h += ":6379"
		}
		q.Add("addr", h)
	}
	u := scheme + "://" + userinfo + hosts[0]
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return redis.ParseClusterURL(u)
}

// redactURL hides the password of a URL for error messages.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	i := strings.LastIndex(rest, "@")
	if i < 0 {
		return raw
	}
	user, _, hasPw := strings.Cut(rest[:i], ":")
	if !hasPw {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[i:]
}
