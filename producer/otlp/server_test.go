package otlp_test

import (
	"context"
	"testing"

	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/producer/otlp"
)

// start serves cfg over hub until the test ends.
func start(t testing.TB, hub *ingest.Hub, cfg otlp.Config) *otlp.Server {
	t.Helper()
	s, err := otlp.Listen(cfg, hub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("otlp run: %v", err)
		}
	})
	return s
}
