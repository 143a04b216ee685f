package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/producer"
)

type minedLine struct {
	tenant, line string
	id           uint64
	version      uint32
}

// runPipeline publishes each tenant's lines in turn (so the WAL order is a
// function of the input) and returns the committed records in WAL order.
// With restartMiner, the miner is stopped after the first tenant's lines are
// partly committed and started again after the rest are in the WAL, so it
// resumes from its snapshot with a backlog.
func runPipeline(t *testing.T, input map[string][]string, order []string, restartMiner bool) []minedLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := Start(ctx, Config{Server: ServerConfig{DataDir: filepath.Join(t.TempDir(), "data"), Encoders: 2}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, tn := range order {
		l, err := producer.NewReader(producer.Config{Tenant: tn}, producer.Deps{JS: p.JS}, strings.NewReader(strings.Join(input[tn], "\n")+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Run(ctx); err != nil {
			t.Fatalf("producer %s: %v", tn, err)
		}
		if restartMiner && i == 0 {
			for p.HighWater() == 0 {
				if ctx.Err() != nil {
					t.Fatal("nothing committed before the miner restart")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := p.StopMiner(); err != nil {
				t.Fatalf("stop miner: %v", err)
			}
		}
	}
	if restartMiner {
		if err := p.StartMiner(); err != nil {
			t.Fatal(err)
		}
	}
	last, err := p.WALLastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitCommitted(ctx, last, 0, nil); err != nil {
		t.Fatal(err)
	}
	var out []minedLine
	err = lake.Open(p.Store).Query(ctx, lake.Filter{}, func(r lake.Record) error {
		out = append(out, minedLine{r.Tenant, r.Line, r.TemplateID, r.TemplateVersion})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTemplateIDsDependOnlyOnWALOrder runs the same input three times: twice
// plainly and once with the miner restarted mid-stream. Every line must get
// the same template id and version in all three lakes.
func TestTemplateIDsDependOnlyOnWALOrder(t *testing.T) {
	n := 4000
	if testing.Short() {
		n = 1000
	}
	tenants := []string{"acme", "globex", "initech"}
	gen := producer.NewGenerator(11, tenants)
	input := map[string][]string{}
	total := 0
	for _, tn := range tenants {
		input[tn] = gen.Lines(tn, n)
		total += n
	}
	a := runPipeline(t, input, tenants, false)
	b := runPipeline(t, input, tenants, false)
	c := runPipeline(t, input, tenants, true)
	for name, got := range map[string][]minedLine{"second run": b, "miner restarted": c} {
		if len(a) != total || len(got) != total {
			t.Fatalf("%s: %d and %d records, want %d", name, len(a), len(got), total)
		}
		for i := range a {
			if a[i] != got[i] {
				t.Fatalf("%s: record %d differs: %+v vs %+v", name, i, a[i], got[i])
			}
		}
	}
	// The same text in two tenants gets two ids: no id is shared by tenants.
	owner := map[uint64]string{}
	for _, r := range a {
		if o, ok := owner[r.id]; ok && o != r.tenant {
			t.Fatalf("template %d used by %s and %s", r.id, o, r.tenant)
		}
		owner[r.id] = r.tenant
	}
	if len(owner) < 3 {
		t.Fatalf("only %d templates: the test input is not exercising mining", len(owner))
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{Server: ServerConfig{DataDir: "x", Encoders: 99}}.Defaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "server.encoders 99") {
		t.Fatalf("want encoders error, got %v", err)
	}
	if err := (Config{}).Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}
