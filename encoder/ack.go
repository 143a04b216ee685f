package encoder

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream acknowledgement bodies (the same bytes jetstream.Msg sends).
var (
	ackAck      = []byte("+ACK")
	ackNak      = []byte("-NAK")
	ackProgress = []byte("+WPI")
)

// ackRef settles one delivered message through its reply subject, as
// jetstream.Msg does, without keeping the message and its payload alive: a
// worker holds thousands of batches after encoding them, until the verdict.
type ackRef struct {
	nc    *nats.Conn
	reply string
}

func newAckRef(nc *nats.Conn, m jetstream.Msg) ackRef { return ackRef{nc: nc, reply: m.Reply()} }

func (a ackRef) inProgress() error { return a.nc.Publish(a.reply, ackProgress) }

func (a ackRef) nak() error { return a.nc.Publish(a.reply, ackNak) }

// ackSync acks and waits for the server's confirmation (a double ack).
func (a ackRef) ackSync(ctx context.Context) error {
	_, err := a.nc.RequestWithContext(ctx, a.reply, ackAck)
	return err
}
