package encoder

import (
	"strings"
	"testing"
	"time"
)

// TestReadyExplainsVerdictWaitBetweenPolls: with the verdict watch running,
// a waiting report is polled only every 5*VerdictPoll; Ready must say the
// worker waits for a verdict as soon as VerdictTimeout passes and keep
// saying it on every tick in between, not only on the ticks that poll.
// (Found by the chaos harness: with the default VerdictPoll of 2s a stalled
// committer never showed in /readyz within a 10s stall.)
func TestReadyExplainsVerdictWaitBetweenPolls(t *testing.T) {
	e := newEnv(t) // no committer: verdicts never come
	cfg := fastConfig()
	cfg.VerdictPoll = 2 * time.Second // polled every 10s under the watch
	cfg.VerdictTimeout = time.Second
	cfg.AckWait = time.Minute
	enc, _ := e.start(cfg, nil, nil)
	e.publish(chain(1, 3, 2)...)
	waitFor(t, 30*time.Second, "verdict wait in Ready", func() bool {
		err := enc.Ready()
		return err != nil && strings.Contains(err.Error(), "verdict")
	})
	// A negative check over a window, kept as a sampling loop: the
	// explanation must not drop between verdict polls. No verdict can come
	// (no committer) and AckWait is a minute, so an honest encoder keeps
	// explaining however slow the machine; a slow machine can only make the
	// window hold fewer worker ticks (a false pass), never a false failure.
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := enc.Ready(); err == nil || !strings.Contains(err.Error(), "verdict") {
			t.Fatalf("Ready stopped explaining the verdict wait: %v", err)
		}
	}
}
