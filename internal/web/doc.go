// Package web is `quarry serve`: a read-only JSON API over the lake (and,
// with a NATS connection, the pipeline's state) and the web page that uses
// it, served from the binary (go:embed, no build step).
//
// Contract: the server never writes to the lake or to NATS. A search is
// streamed as NDJSON (or, with format=raw, as the matches' lines) and
// flushed as it is produced; it is never held whole in memory, and a client
// that goes away cancels the scan through the request's context. Queries
// are the language of internal/query, evaluated by a Searcher (quarry
// serve's is LakeSearcher: the lake's template-aware search, whose
// SearchRaw renders raw lines from the columns without a record per match).
//
// Access: Access holds bearer tokens (each limited to a set of tenants, or
// to all) and an optional basic-auth user; a request for a tenant outside
// its grant gets 403 and a search is restricted to the granted tenants.
// Without credentials the command listens on a loopback address only.
package web
