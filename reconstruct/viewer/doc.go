// Package viewer serves a read-only web UI over recorded episodes: the
// episode list, an episode's turns, segments and token pane, and a group's
// rollouts side by side.
//
// Every page is rendered on the server with html/template (all recorded
// text is escaped), so it works with curl and with scripts off; a little
// embedded JS adds hovers, the token pane's colourings and keyboard
// navigation. Assets are embedded and the Content-Security-Policy lets the
// page load nothing but them: no CDN, no network access from the page.
// Every page has a JSON form (format=json) of what it shows.
//
// The list never loads a whole store: it reads one bounded window of the
// store's cursor paging per request (see [Options.ScanBudget]) and links
// to the next window, and it takes status counts from the store's index
// when the store has one (an optional CountEpisodes method). Filters the
// store cannot apply (harness, reward range, drift class, rule id, text
// search) are applied to the window; those that need an episode's calls
// read at most [Options.DeepScanBudget] episodes per request.
//
// Routes: / (list), /episodes/{id} (episode; segment, turn and token
// select what the token pane shows), /groups/{id} (group; a and b diff two
// rollouts), /static/* (assets). /?episode=&turn=&token= redirects to the
// episode page. Unknown episodes get a 404 page, malformed query
// parameters a 400 page that names the parameter. A [Handler] is safe for
// concurrent use.
package viewer
