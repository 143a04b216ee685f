//go:build e2e

package quarrytest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quarrylake/quarry/e2e/quarrytest"
	"github.com/quarrylake/quarry/subscribe"
)

// A user's own suite starts quarry with NATS and MinIO, publishes lines and
// reads them back from the lake. Run with `make images` done and
// `cd e2e && go test -tags e2e ./quarrytest/` (e2e/ is its own module,
// github.com/quarrylake/quarry/e2e, so that testcontainers stays out of
// quarry's go.mod).
func TestExample(t *testing.T) {
	env := quarrytest.Start(t, quarrytest.Options{Encoders: 1, Committers: 1})
	var lines []string
	for i := range 500 {
		lines = append(lines, fmt.Sprintf("user %d logged in from 10.0.0.%d", i, i%250))
	}
	env.Publish(t, "acme", lines)
	env.WaitCommitted(t, 3*time.Minute)
	env.CheckExactlyOnce(t, lines)

	// The same lines through a subscriber, as a downstream service gets them.
	sub := env.Subscribe(t, subscribe.Config{Tenant: "acme", From: subscribe.Beginning()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, want := range lines {
		rec, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("subscriber, line %d: %v", i, err)
		}
		if rec.Line != want {
			t.Fatalf("subscriber, line %d: %q, want %q", i, rec.Line, want)
		}
	}
	t.Logf("NATS %s, S3 %s, lake %s", env.NATSURL, env.S3Endpoint, env.LakeURL)
}
