// Package redistest starts real redis-server processes for tests: a single
// server ([NewServer]) or a 3-master Redis Cluster ([NewCluster]), each on
// free loopback ports in its own temporary directory, stopped and removed
// by t.Cleanup.
//
// Servers run with --save "" and --appendonly no, so nothing is written
// while they run, but with --shutdown-on-sigterm save: [Server.Stop] writes
// a snapshot that [Server.Start] loads again on the same port, which is what
// a chaos test needs to take Redis away for a while and bring it back with
// its data. [Server.Kill] loses everything instead.
//
// [URL] and [ClusterURL] return REDIS_URL and REDIS_CLUSTER_URL when set
// (a shared server: callers must then isolate their keys, e.g. with a
// prefix, and must not flush it) and otherwise start a server of their own.
// Cluster URLs use the redis+cluster://host:port,host:port form that
// recorder/redisstore parses.
package redistest
