// Package syslog receives syslog over TCP (RFC 6587: octet counting or
// newline framing, detected from a connection's first byte), UDP (one
// message per datagram) and TLS (RFC 5425), parses RFC 5424 and RFC 3164
// (Parse) and writes each message through an ingest.Hub for the hub's
// default tenant (over TLS with client tenants configured, for the
// tenant of the connection's client certificate: ingest.ClientTenantsEnv): the MSG is the record's text, the timestamp its event
// time (TSSource event; none: the stamper decides, as for a file), and
// facility, severity, host, app, procid, msgid and structured data its
// attributes (Message.Attrs).
//
// Delivery contract: see package ingest. Syslog has no acknowledgement, so
// a connection's durability signal is TCP flow control: a connection
// hands its messages over in batches with at most connInFlight batches not
// yet durable, and stops reading at that bound or the hub's in-flight
// bound. A message that does not parse (no valid <PRI>, a malformed RFC
// 5424 header), is longer than max_line_bytes or breaks the octet-counted
// framing is dead-lettered with the reason, never dropped; after broken
// framing, where the next message starts is unknown, and the rest of the
// connection is dead-lettered as it is read until the client closes it. A batch whose source stopped before it was durable (the WAL
// full or failing) is handed again to the source that replaces it, the
// connection still unread meanwhile; only shutdown gives up on it. On shutdown the server stops accepting and reading, waits
// for the batches in flight and closes the connections. A crash loses
// what was read and not yet durable: the sender had no acknowledgement to
// wait for.
package syslog
