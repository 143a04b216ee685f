// Package ingest is what the network receivers (producer/syslog,
// producer/httpin) share: a Hub that writes each tenant's lines through
// one push source (producer.NewPush, source id "recv-<tenant>"), the
// in-flight bound, the line and attribute limits, the bearer tokens
// (TokensEnv) and the client certificates' tenants (ClientTenantsEnv).
//
// Delivery contract: a receiver acknowledges its client only in the done
// callback of Hub.Submit (Hub.Ingest waits for it), which runs once every
// line of the batch is durable: in an acked WAL frame, or, when malformed
// or above a limit, in the dead-letter stream with the reason. That is
// the ingest request path's contract (producer.NewSubject): a client that
// resends until acknowledged gets at least once; a resend after a lost
// acknowledgement writes its lines again. Nothing is acknowledged that is
// not durable, and nothing received is dropped: a malformed line is
// dead-lettered, never skipped.
//
// Backpressure: the bytes received and not yet durable are bounded by
// producer.receivers.max_in_flight_bytes over every receiver and tenant.
// Submit with wait blocks at the bound (a syslog connection stops reading,
// so TCP pushes back on the sender); without wait it returns ErrBusy (HTTP
// answers 429 with Retry-After). The bytes are released when the lines are
// durable or their source stops; nothing is buffered without bound.
//
// Crash: lines received and not yet acknowledged are lost to quarry but
// were never acknowledged, so a client that resends (HTTP shippers,
// RELP) delivers them again; plain syslog over TCP and UDP has no
// acknowledgement, so a crash loses what the kernel and the receiver held.
// Each tenant's source resumes its offsets after the WAL's frames (as
// NewSubject), so frame ids never repeat.
//
// Adding a receiver (syslog, httpin and otlp are the examples): a package per protocol that turns a
// request into []producer.Entry (text, attributes, event time; Bad with a
// reason for what does not decode), applies Hub.Check, and calls
// Hub.Ingest (request/response protocols: map ErrBusy to 429 or gRPC
// RESOURCE_EXHAUSTED, ErrUnavailable and ErrNotDurable to 503 or
// UNAVAILABLE) or Hub.Submit with wait (streams without acknowledgement).
// Its listen address belongs in producer.ReceiversConfig and
// cmd/quarry/receivers.go.
package ingest
