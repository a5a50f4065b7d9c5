// Package proxy is orchard's recording reverse proxy: it forwards OpenAI- and
// Anthropic-compatible model calls to an inference server untouched and tees
// a copy of each exchange to the recorder, attributed to its episode.
package proxy
