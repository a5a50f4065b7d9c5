// Package serve answers GET /orchard/v1/episodes/{id}/samples with the
// training samples of one finished episode, rebuilt by
// [reconstruct.Export] in any of [reconstruct.Formats]. It sits in front
// of the proxy's episode API (cmd mounts it there, so the proxy package
// never imports reconstruct) and passes every other request to Next.
//
// The answer is one JSON object: the episode's id, status, reward, the
// number of calls recorded so far and "samples", the JSONL lines of the
// export as a list. A running episode is a 409: samples are only final
// once the episode is. A [Handler] is safe for concurrent use.
package serve
