package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/quarrylake/quarry/pipeline"
)

// TestDeployRoleConfig: the role config the compose and Kubernetes
// deployments mount decodes strictly into every role's config and
// validates, so a typo there fails here rather than at a pod's start.
func TestDeployRoleConfig(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "compose", "quarry.yaml")
	cfg, err := pipeline.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Streams.Replicas != 3 {
		t.Errorf("deployment streams.replicas = %d, want 3 (a 3-node cluster)", cfg.Streams.Replicas)
	}
	if err := cfg.Defaults().Validate(); err != nil {
		t.Error(err)
	}
}

// TestKubernetesManifests: every quarry container runs a real subcommand,
// has a liveness probe on /healthz and a readiness probe on /readyz, and
// takes every password and secret from a Secret, never from a literal.
func TestKubernetesManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	workloads := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			kind, _ := doc["kind"].(string)
			if kind != "Deployment" && kind != "StatefulSet" {
				continue
			}
			name := dig(doc, "metadata", "name")
			for _, c := range asList(dig(doc, "spec", "template", "spec", "containers")) {
				c := c.(map[string]any)
				for _, e := range asList(c["env"]) {
					e := e.(map[string]any)
					n, _ := e["name"].(string)
					if _, literal := e["value"]; literal && (strings.Contains(n, "PASSWORD") || strings.Contains(n, "SECRET")) {
						t.Errorf("%s: %s/%s: %s is a literal, want a secretKeyRef", f, name, c["name"], n)
					}
				}
				img, _ := c["image"].(string)
				if !strings.HasPrefix(img, "quarrylake/quarry:") {
					continue
				}
				workloads++
				args := asList(c["args"])
				if len(args) == 0 || commands[args[0].(string)] == nil {
					t.Errorf("%s: %s runs %v, not a quarry command", f, name, args)
				}
				if p := dig(c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
					t.Errorf("%s: %s liveness probe %v, want /healthz", f, name, p)
				}
				if p := dig(c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
					t.Errorf("%s: %s readiness probe %v, want /readyz", f, name, p)
				}
			}
		}
	}
	if workloads < 4 {
		t.Fatalf("found %d quarry workloads, want at least miner, encoder, committer and producer", workloads)
	}
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
