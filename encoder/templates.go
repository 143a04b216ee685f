package encoder

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// errTemplatesMissing: a flush's records use a template version whose text
// the encoder could not find within Config.TemplateWait.
var errTemplatesMissing = errors.New("template texts missing")

// texts is the template texts an encoder process knows, shared by its
// workers. A records v3 file needs the text of every template version its
// rows use, but a mined batch carries a template's definition only in the
// batch that created it, which another worker or encoder may have taken.
// So texts are filled from every received batch's definitions and, on a
// miss, from streams.TemplateStream, which the miner publishes each
// definition to (before the batch that uses it) and which keeps them all.
// A (template id, version) names one text forever (mining is deterministic
// and a changed template gets a new version), so a cached text is never
// stale.
type texts struct {
	js jetstream.JetStream
	mu sync.Mutex
	by map[string]*tenantTexts
}

type tenantTexts struct {
	load sync.Mutex // one stream read per tenant at a time
	mu   sync.Mutex
	m    recfile.Templates
	// next is the first stream sequence not read yet for this tenant.
	next uint64
}

func newTexts(js jetstream.JetStream) *texts {
	return &texts{js: js, by: map[string]*tenantTexts{}}
}

func (t *texts) tenant(name string) *tenantTexts {
	t.mu.Lock()
	defer t.mu.Unlock()
	tt := t.by[name]
	if tt == nil {
		tt = &tenantTexts{m: recfile.Templates{}, next: 1}
		t.by[name] = tt
	}
	return tt
}

// add keeps the texts of created and changed definitions. A merged
// definition carries the survivor's text under the retired id: not a text
// of (ID, Version).
func (t *texts) add(defs []streams.TemplateDef) {
	for i := range defs {
		d := &defs[i]
		if d.Kind == streams.TemplateMerged {
			continue
		}
		tt := t.tenant(d.Tenant)
		tt.mu.Lock()
		tt.m[recfile.Key{ID: d.ID, Version: d.Version}] = d.Text
		tt.mu.Unlock()
	}
}

// lookup returns the texts of keys and the keys it does not know.
func (t *texts) lookup(tenant string, keys []recfile.Key) (recfile.Templates, []recfile.Key) {
	tt := t.tenant(tenant)
	tt.mu.Lock()
	defer tt.mu.Unlock()
	out := make(recfile.Templates, len(keys))
	var missing []recfile.Key
	for _, k := range keys {
		if s, ok := tt.m[k]; ok {
			out[k] = s
		} else {
			missing = append(missing, k)
		}
	}
	return out, missing
}

// load reads the tenant's template events from the stream that arrived
// since the last load.
func (t *texts) load(ctx context.Context, tenant string) error {
	tt := t.tenant(tenant)
	tt.load.Lock()
	defer tt.load.Unlock()
	ctx, cancel := backoff.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	subj := streams.TemplateSubject(tenant)
	fail := func(err error) error {
		return fmt.Errorf("read %s for tenant %s: %w", streams.TemplateStream, tenant, err)
	}
	stream, err := t.js.Stream(ctx, streams.TemplateStream)
	if err != nil {
		return fail(err)
	}
	last, err := stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // no events for the tenant yet
	}
	if err != nil {
		return fail(err)
	}
	if last.Sequence < tt.next {
		return nil
	}
	cons, err := t.js.OrderedConsumer(ctx, streams.TemplateStream, jetstream.OrderedConsumerConfig{
		MaxResetAttempts: streams.OrderedResetAttempts,
		FilterSubjects:   []string{subj}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: tt.next})
	if err != nil {
		return fail(err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fail(err)
	}
	defer it.Stop()
	for tt.next <= last.Sequence {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fail(fmt.Errorf("events up to stream sequence %d, read up to %d: %w", last.Sequence, tt.next-1, err))
		}
		md, err := m.Metadata()
		if err != nil {
			return fail(err)
		}
		if ev, err := streams.DecodeTemplateEvent(m.Data()); err == nil && ev.Kind != streams.TemplateMerged.String() && ev.Tenant == tenant {
			// A batch's definition (binary) wins over the event (JSON,
			// which cannot carry bytes that are not UTF-8).
			k := recfile.Key{ID: ev.ID, Version: ev.Version}
			tt.mu.Lock()
			if _, ok := tt.m[k]; !ok {
				tt.m[k] = ev.Template
			}
			tt.mu.Unlock()
		}
		tt.next = max(tt.next, md.Sequence.Stream+1)
	}
	return nil
}

// templatesFor returns the texts of every template version rows use. On a
// miss it reads the tenant's template events from the stream, and keeps
// trying (the event may still be on its way) until wait has passed; then it
// returns an error wrapping errTemplatesMissing. keepAlive runs between
// attempts.
func (t *texts) templatesFor(ctx context.Context, tenant string, rows []recfile.Row, wait time.Duration, keepAlive func(missing error)) (recfile.Templates, error) {
	var keys []recfile.Key
	seen := map[recfile.Key]bool{}
	for i := range rows {
		k := recfile.Key{ID: rows[i].TemplateID, Version: rows[i].TemplateVersion}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	tpl, missing := t.lookup(tenant, keys)
	if len(missing) == 0 {
		return tpl, nil
	}
	deadline := time.Now().Add(wait)
	b := backoff.New(backoff.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second})
	for {
		var loadErr error
		if loadErr = t.load(ctx, tenant); loadErr == nil {
			if tpl, missing = t.lookup(tenant, keys); len(missing) == 0 {
				return tpl, nil
			}
		}
		slices.SortFunc(missing, func(a, b recfile.Key) int {
			if a.ID != b.ID {
				return cmpInt(int64(a.ID), int64(b.ID))
			}
			return cmpInt(int64(a.Version), int64(b.Version))
		})
		err := fmt.Errorf("%w: tenant %s template %d version %d (%d of %d versions missing)",
			errTemplatesMissing, tenant, missing[0].ID, missing[0].Version, len(missing), len(keys))
		if loadErr != nil {
			err = fmt.Errorf("%w; %w", err, loadErr)
		}
		if !time.Now().Before(deadline) {
			return nil, err
		}
		keepAlive(err)
		if !backoff.Sleep(ctx, min(b.Next(), time.Until(deadline))) {
			return nil, err
		}
	}
}
