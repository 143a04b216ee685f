// Package httpin receives lines over HTTP: POST /jsonline?tenant=T (one
// JSON object per line) and the Elasticsearch _bulk API, POST /_bulk and
// /<tenant>/_bulk, which Fluent Bit, Vector, Logstash and Filebeat speak.
// A configurable field (producer.receivers.message_fields, default
// message, log, msg) is a document's text; @timestamp or timestamp its
// event time; every other field an attribute, nested objects flattened to
// "a.b" (Entry). The tenant comes from the credential (a bearer token,
// ingest.TokensEnv), else the path, the tenant query parameter or the
// X-Quarry-Tenant header, else the default tenant; a credential's tenant
// and an explicit one must agree (403).
//
// Delivery contract: see package ingest. A request is answered only once
// every line of it is durable in the WAL or, malformed, in the dead-letter
// stream; the answer lists the malformed lines (JSON lines: 400 with
// their numbers and reasons; _bulk: 200 with errors true and a per-item
// status 400, the Elasticsearch convention, so shippers resend only items
// with a retryable status, and the well-formed items are written). A
// request that cannot be taken whole gets no partial write: 413 above
// max_body_bytes, 429 with Retry-After at the in-flight bound, 503 with
// Retry-After when the WAL does not acknowledge within ack_timeout or the
// source is down (the lines may have been written: a resend may write
// them twice), 401/403 for a missing, unknown or mismatched token.
package httpin
