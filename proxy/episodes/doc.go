// Package episodes serves the episode API and issues and checks the
// episode tokens that sandboxes use as API keys. cmd/orchard mounts a
// [Handler] on the proxy's listener for the paths under [Prefix] and
// gives the same Handler to the proxy as its verifier of presented keys;
// the proxy package never imports this one.
//
// Routes (each needs Options.AdminToken as a bearer token when it is set):
//
//	POST /orchard/v1/episodes              create; the reply ([Created]) holds the token and an env block
//	GET  /orchard/v1/episodes              list (task_id, group_id, status, limit, cursor)
//	GET  /orchard/v1/episodes/{id}         summary; ?calls=true adds the records
//	POST /orchard/v1/episodes/{id}/finish  status, reward and info; revokes the token
//	POST /orchard/v1/episodes/{id}/events  append an event
//	GET  /orchard/v1/episodes/{id}/events  the events in order
//
// A token is signed, not stored ([Signer]): any replica that shares the
// secret verifies it without a lookup. [Handler.Verify] also refuses the
// token of an episode that finished or no longer exists. Finishes seen here
// or heard on the [FinishFeed] are cached; otherwise the store is asked,
// and when it cannot answer in time the check fails closed, except for an
// episode this replica saw running a moment ago.
//
// [New] starts nothing: [Handler.Start] subscribes to the [FinishFeed], and
// until then (and after [Handler.Close]) the Handler answers 503 and Verify
// refuses every credential.
package episodes
