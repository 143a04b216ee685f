// Package otlp receives OpenTelemetry logs (OTLP): over HTTP, POST
// /v1/logs with a protobuf (application/x-protobuf) or JSON
// (application/json) ExportLogsServiceRequest, gzip accepted; over gRPC,
// opentelemetry.proto.collector.logs.v1.LogsService/Export. Each
// LogRecord is one line (Entries): its body is the text (a string as is,
// any other value as its JSON), time_unix_nano (else
// observed_time_unix_nano) its event time (TSSource event; neither: the
// stamper decides, as for a file), and severity, trace and span ids,
// event name, resource attributes (resource.<key>), scope name and
// version (scope.name, scope.version) and the record's attributes
// (nested maps flattened to "a.b") its attributes. The tenant is the
// bearer token's (ingest.TokensEnv), else the X-Quarry-Tenant header (gRPC
// metadata x-quarry-tenant), else the default tenant; a token's tenant and
// a header's must agree.
//
// Delivery contract: see package ingest. A request is answered only once
// every record of it is durable in the WAL or, above a limit, in the
// dead-letter stream: HTTP 200 or gRPC OK, with partial_success counting
// the dead-lettered records and naming the first reasons (a dead letter
// is the record as a one-record OTLP JSON request, which /v1/logs takes
// back). A request that cannot be taken whole writes nothing: one that
// does not decode is HTTP 400 or INVALID_ARGUMENT with the reason (OTLP
// clients do not resend it); at the in-flight bound HTTP 429 with
// Retry-After or RESOURCE_EXHAUSTED with RetryInfo; when the WAL does not
// acknowledge within ack_timeout or the source is down HTTP 503 with
// Retry-After or UNAVAILABLE (the records may have been written: a resend
// may write them twice); a body above max_body_bytes HTTP 413 or
// RESOURCE_EXHAUSTED without RetryInfo (not resent); a missing or unknown
// token 401 or UNAUTHENTICATED, a mismatched tenant 403 or
// PERMISSION_DENIED. On shutdown the servers stop taking requests and
// answer those in flight (each waits at most ack_timeout). A crash loses
// only what was never acknowledged: OTLP exporters resend it.
package otlp
