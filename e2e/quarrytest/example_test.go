//go:build e2e

package quarrytest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/quarrylake/quarry/e2e/quarrytest"
)

// A user's own suite starts quarry with NATS and MinIO, publishes lines and
// reads them back from the lake. Run with `make images` done and
// `go test -tags e2e ./e2e/quarrytest/`.
func TestExample(t *testing.T) {
	env := quarrytest.Start(t, quarrytest.Options{Encoders: 1, Committers: 1})
	var lines []string
	for i := range 500 {
		lines = append(lines, fmt.Sprintf("user %d logged in from 10.0.0.%d", i, i%250))
	}
	env.Publish(t, "acme", lines)
	env.WaitCommitted(t, 3*time.Minute)
	env.CheckExactlyOnce(t, lines)
	t.Logf("NATS %s, S3 %s, lake %s", env.NATSURL, env.S3Endpoint, env.LakeURL)
}
