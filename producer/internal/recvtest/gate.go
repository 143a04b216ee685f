package recvtest

import (
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// GateJS holds every WAL frame publish until Open: a WAL that does not
// acknowledge, by construction, for backpressure tests. Everything else
// passes through.
type GateJS struct {
	jetstream.JetStream
	gate chan struct{}
	once sync.Once
}

// NewGate wraps js, closed.
func NewGate(js jetstream.JetStream) *GateJS {
	return &GateJS{JetStream: js, gate: make(chan struct{})}
}

// Open lets the held publishes and every later one through.
func (g *GateJS) Open() { g.once.Do(func() { close(g.gate) }) }

// PublishMsgAsync waits for Open.
func (g *GateJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	<-g.gate
	return g.JetStream.PublishMsgAsync(m, opts...)
}
