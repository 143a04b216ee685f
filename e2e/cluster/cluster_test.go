//go:build e2e

// Package cluster runs quarry's images the way deploy/ does (a 3-node NATS
// JetStream cluster with R3 streams, fsync always, TLS and per-role users,
// MinIO, the miner, two encoders, an active and a standby committer) and
// injects faults into one shared deployment, one case after the other. Each
// case publishes a multi-tenant input through producer containers in two
// waves and injects its fault while the second, paced wave publishes, then
// checks that the lake, read through MinIO, holds every line published so
// far exactly once and that both Delta logs are valid.
//
//	make images && TESTCONTAINERS_RYUK_DISABLED=true go test -tags e2e -count=1 -v ./e2e/cluster/
package cluster

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/e2e/quarrytest"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/streams"
)

var tenants = []string{"acme", "globex"}

// linesPerCase is the lines per tenant per case (E2E_LINES overrides).
func linesPerCase() int {
	if n, err := strconv.Atoi(os.Getenv("E2E_LINES")); err == nil && n > 0 {
		return n
	}
	return 5000
}

// secondWave is how long a case's second half takes to publish: it is
// paced (quarry producer --rate) so that the fault, injected right after it
// starts, finds its producers still publishing.
const secondWave = 5 * time.Second

func TestCluster(t *testing.T) {
	start := time.Now()
	env := quarrytest.Start(t, quarrytest.Options{})
	t.Logf("deployment up in %s", time.Since(start).Round(time.Second))
	_, js := env.Connect(t)
	store := env.Store(t)
	gen := producer.NewGenerator(11, tenants)
	var want []string

	// run publishes a case's input in two waves. With a fault, the first
	// wave's frames are committed first; then the second wave starts,
	// paced, and the fault is injected while it publishes (mid-stream by
	// construction: what it publishes after the fault must get through the
	// fault). Then it checks the lake.
	run := func(t *testing.T, fault func(t *testing.T)) {
		caseStart := time.Now()
		before := env.HighWater(t, store)
		half := linesPerCase() / 2
		second := map[string][]string{}
		var prods []*quarrytest.Producer
		for _, tn := range tenants {
			lines := gen.Lines(tn, linesPerCase())
			want = append(want, lines...)
			second[tn] = lines[half:]
			prods = append(prods, env.StartProducer(t, tn, lines[:half]))
		}
		if fault == nil {
			for _, tn := range tenants {
				prods = append(prods, env.StartProducer(t, tn, second[tn]))
			}
		} else {
			deadline := time.Now().Add(3 * time.Minute)
			for env.HighWater(t, store) <= before {
				if time.Now().After(deadline) {
					t.Fatalf("nothing of this case committed within 3m (high-water %d)", before)
				}
				time.Sleep(100 * time.Millisecond)
			}
			rate := float64(len(second[tenants[0]])) / secondWave.Seconds()
			var wave []*quarrytest.Producer
			for _, tn := range tenants {
				wave = append(wave, env.StartPacedProducer(t, tn, second[tn], rate))
			}
			for _, p := range wave {
				if !p.Running(t) {
					t.Fatalf("%s finished before the fault: the fault would not be mid-stream:\n%s", p.Node.Name, p.Node.Logs(30))
				}
			}
			prods = append(prods, wave...)
			t.Logf("fault at high-water %d (case started at %d), second wave publishing", env.HighWater(t, store), before)
			fault(t)
		}
		var wg sync.WaitGroup
		for _, p := range prods {
			wg.Add(1)
			go func() { defer wg.Done(); p.Wait(t, 5*time.Minute) }()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		hw := env.WaitCommitted(t, 4*time.Minute)
		env.CheckExactlyOnce(t, want)
		t.Logf("%d lines exactly once at high-water %d; case took %s", len(want), hw, time.Since(caseStart).Round(time.Second))
	}
	// healthy waits until every replica of every stream is current again.
	healthy := func(t *testing.T) {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			bad := unhealthy(js)
			if bad == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not healthy after 3m: %s", bad)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	steps := []struct {
		name  string
		fault func(t *testing.T)
	}{
		{"baseline", nil},
		{"nats-node-killed-and-restarted", func(t *testing.T) {
			n := env.NATS[1]
			env.Kill(t, n)
			time.Sleep(3 * time.Second)
			env.Restart(t, n)
			healthy(t)
		}},
		{"wal-leader-partitioned", func(t *testing.T) {
			leader := streamLeader(t, js, streams.WALStream)
			n := env.NATSNode(leader)
			if n == nil {
				t.Fatalf("WAL leader %q is not a node", leader)
			}
			env.Disconnect(t, n)
			// Wait for the majority side to elect a new WAL leader.
			deadline := time.Now().Add(time.Minute)
			for {
				if l := streamLeaderNoFail(js, streams.WALStream); l != "" && l != leader {
					t.Logf("WAL leader moved from %s to %s", leader, l)
					break
				}
				if time.Now().After(deadline) {
					t.Logf("WAL leader did not move from %s within 1m", leader)
					break
				}
				time.Sleep(250 * time.Millisecond)
			}
			time.Sleep(3 * time.Second)
			env.Reconnect(t, n)
			healthy(t)
		}},
		{"minio-restarted", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stop := 5 * time.Second
			if err := env.MinIO.Container.Stop(ctx, &stop); err != nil {
				t.Fatalf("stop minio: %v", err)
			}
			time.Sleep(3 * time.Second)
			env.Restart(t, env.MinIO)
		}},
		{"encoder-killed", func(t *testing.T) {
			env.Kill(t, env.Encoders[0])
			time.Sleep(2 * time.Second)
			env.Restart(t, env.Encoders[0])
		}},
		{"active-committer-killed", func(t *testing.T) {
			holder := leaseHolder(t, js)
			var active *quarrytest.Node
			for _, c := range env.Committers {
				if c.Name == holder {
					active = c
				}
			}
			if active == nil {
				t.Fatalf("lease holder %q is not a committer container", holder)
			}
			hw := env.HighWater(t, store)
			env.Kill(t, active)
			// The standby takes over: the lease moves and the high-water
			// advances while the killed committer is down.
			deadline := time.Now().Add(2 * time.Minute)
			for {
				if h := leaseHolderNoFail(js); h != "" && h != holder && env.HighWater(t, store) > hw {
					t.Logf("lease moved from %s to %s", holder, h)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("standby did not take over from %s within 2m", holder)
				}
				time.Sleep(200 * time.Millisecond)
			}
			env.Restart(t, active)
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { run(t, s.fault) }) {
			t.FailNow()
		}
	}
	t.Logf("all cases in %s", time.Since(start).Round(time.Second))
}

func streamLeaderNoFail(js jetstream.JetStream, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil || s.CachedInfo().Cluster == nil {
		return ""
	}
	return s.CachedInfo().Cluster.Leader
}

func streamLeader(t *testing.T, js jetstream.JetStream, name string) string {
	deadline := time.Now().Add(time.Minute)
	for {
		if l := streamLeaderNoFail(js, name); l != "" {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader for %s", name)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// unhealthy describes the first stream with a missing leader or a replica
// that is offline or behind ("" when all are current).
func unhealthy(js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cfg := range (streams.Config{Replicas: 3}).Defaults().StreamConfigs() {
		s, err := js.Stream(ctx, cfg.Name)
		if err != nil {
			return cfg.Name + ": " + err.Error()
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			return cfg.Name + ": no leader"
		}
		if len(ci.Replicas) != 2 {
			return cfg.Name + ": " + strconv.Itoa(len(ci.Replicas)) + " followers"
		}
		for _, r := range ci.Replicas {
			if !r.Current || r.Offline {
				return cfg.Name + ": replica " + r.Name + " not current"
			}
		}
	}
	return ""
}

func leaseHolderNoFail(js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, streams.StateBucket)
	if err != nil {
		return ""
	}
	ent, err := kv.Get(ctx, streams.KeyLease)
	if err != nil {
		return ""
	}
	var l struct {
		Holder string `json:"holder"`
	}
	if json.Unmarshal(ent.Value(), &l) != nil {
		return ""
	}
	return l.Holder
}

func leaseHolder(t *testing.T, js jetstream.JetStream) string {
	deadline := time.Now().Add(time.Minute)
	for {
		if h := leaseHolderNoFail(js); h != "" {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatal("no committer lease")
		}
		time.Sleep(250 * time.Millisecond)
	}
}
