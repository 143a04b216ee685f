package encoder

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// publishEvent publishes a template event as the miner does.
func (e *env) publishEvent(ev streams.TemplateEvent) {
	e.t.Helper()
	data, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	m := nats.NewMsg(streams.TemplateSubject(ev.Tenant))
	m.Header.Set(streams.HeaderFormat, streams.FormatTemplate)
	m.Data = data
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		e.t.Fatal(err)
	}
}

// recordsFiles returns the records files of the accepted reports.
func recordsFiles(t *testing.T, e *env, c *committer) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, r := range c.accepted() {
		for _, fi := range r.Files {
			if fi.Table != streams.TableRecords {
				continue
			}
			data, err := e.store.Get(context.Background(), fi.Table+"/"+fi.Path)
			if err != nil {
				t.Fatal(err)
			}
			out[fi.Table+"/"+fi.Path] = data
		}
	}
	return out
}

// TestTemplateTextFromStream: a batch uses a template version no batch this
// encoder saw defines (another encoder took the defining batch, or this one
// restarted). The flush waits until the miner's template event is on
// QUARRY_TEMPLATES (published only after the encoder reported the miss),
// then writes a records v3 file with the right text; a merged event and
// another tenant's event with the same id do not count as its text.
func TestTemplateTextFromStream(t *testing.T) {
	e := newEnv(t)
	c := e.committer(nil)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	b := batch(7, 0, "acme", at, 3)
	b.Records[2].TemplateID, b.Records[2].TemplateVersion = 500, 2
	b.Records[2].Params = []string{"42"}
	e.publishEvent(streams.TemplateEvent{Kind: "created", ID: 500, Tenant: "other", Version: 2, Template: "wrong tenant <*>", WALSeq: 1})
	e.publishEvent(streams.TemplateEvent{Kind: "merged", ID: 500, Tenant: "acme", Version: 2, Template: "survivor <*>", Previous: "x", Into: 3, WALSeq: 2})
	e.publish(b)
	cfg := fastConfig()
	cfg.TemplateWait = time.Minute
	enc, _ := e.start(cfg, nil, nil)
	waitFor(t, 20*time.Second, "the flush to report the missing template", func() bool {
		err := enc.Ready()
		return err != nil && strings.Contains(err.Error(), "template 500 version 2")
	})
	if len(c.accepted()) != 0 {
		t.Fatal("a report was published before the template text was known")
	}
	e.publishEvent(streams.TemplateEvent{Kind: "changed", ID: 500, Tenant: "acme", Version: 2, Template: "answer is <*>", Previous: "answer", WALSeq: 3})
	waitFor(t, 30*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
	c.checkExactlyOnce(t, []uint64{7})
	tpl := textsOf([]*streams.MinedBatch{b})
	tpl[recfile.Key{ID: 500, Version: 2}] = "answer is <*>"
	var lines []string
	for key, data := range recordsFiles(t, e, c) {
		checkParquetMeta(t, data, key)
		for _, r := range readRecords(t, e.store, key, tpl) {
			lines = append(lines, r.Line)
		}
	}
	if got, want := strings.Join(lines, "|"), "user p7-0 logged in x|p7-1 failed: x|answer is 42"; got != want {
		t.Errorf("lines %q, want %q", got, want)
	}
	if err := enc.Ready(); err != nil {
		t.Errorf("ready after the text came: %v", err)
	}
}

// TestTemplateMissingWritesV2: a template version whose text never shows
// up within template_wait does not hold the records up or lose them: the
// partition is written as a records v2 file (parameters as text), counted.
func TestTemplateMissingWritesV2(t *testing.T) {
	e := newEnv(t)
	e.reg = prometheus.NewRegistry()
	c := e.committer(nil)
	b := batch(4, 0, "acme", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano(), 2)
	b.Records[1].TemplateID = 777 // never defined
	e.publish(b)
	cfg := fastConfig()
	cfg.TemplateWait = 300 * time.Millisecond
	e.start(cfg, nil, nil)
	waitFor(t, 30*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
	c.checkExactlyOnce(t, []uint64{4})
	files := recordsFiles(t, e, c)
	if len(files) != 1 {
		t.Fatalf("%d records files, want 1", len(files))
	}
	for key, data := range files {
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if v, err := lake.RecordsFileVersion(f); err != nil || v != 2 {
			t.Fatalf("%s: version %d (%v), want 2", key, v, err)
		}
		rows, err := parquet.Read[lake.RecordRow](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[1].TemplateID != 777 || strings.Join(rows[1].Params, "|") != "p4-1|x" {
			t.Errorf("%s: rows %+v", key, rows)
		}
		// The table (created by the committer) is partitioned by tenant:
		// the v2 file has the date column too (lake.DatedRecordRow).
		checkDateColumn(t, data, true)
	}
	if n := metricSum(t, e.reg, "quarry_encoder_v2_files_total"); n != 1 {
		t.Errorf("v2 files %v, want 1", n)
	}
}
