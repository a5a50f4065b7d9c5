// Package sse reads Server-Sent Events as the WHATWG HTML standard defines
// them ("\n", "\r\n" and "\r" line endings; "data:", "event:", "id:" fields;
// ':' comments), for the proxy's streaming tee and for reassembly.
//
// Two entry points serve two needs. [Framer] is the hot path: bytes are fed in
// as they arrive and complete raw events come out, without copying, so the
// proxy can forward and flush event by event with the bytes untouched.
// [Events] parses events (name, joined data, comments) from a complete body,
// keeping each event's raw bytes.
//
// Every event is bounded by a maximum size ([DefaultMaxEvent] unless given);
// an event that grows past it fails with [ErrTooLarge] rather than buffering
// without limit.
package sse
