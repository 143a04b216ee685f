package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/dlq"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/streams"
)

// Status reads the pipeline's state: the lake always, NATS when JS is set.
type Status struct {
	lake *lake.Lake
	js   jetstream.JetStream // nil: lake only

	mu   sync.Mutex
	prev *sample
}

// NewStatus returns a status reader; js may be nil.
func NewStatus(lk *lake.Lake, js jetstream.JetStream) *Status { return &Status{lake: lk, js: js} }

// sample is what throughput is computed from, between two polls.
type sample struct {
	at        time.Time
	walLast   uint64
	mined     uint64
	highWater uint64
}

// Stage is one stage's backlog.
type Stage struct {
	Name string `json:"name"`
	// Lag is the stage's backlog in WAL sequences (miner, committer) or
	// messages (encoder: mined batches pending; reports pending).
	Lag uint64 `json:"lag"`
	// Rate is the stage's progress since the previous poll, per second
	// (WAL sequences mined or committed); absent on the first poll.
	Rate *float64 `json:"rate,omitempty"`
	Unit string   `json:"unit"`
}

// Source is a source's progress fact.
type Source struct {
	streams.Progress
	// Behind is how far FinalizedUntil (the time up to which the source
	// is complete in the WAL) lags the reading.
	Behind string `json:"behind,omitempty"`
}

// Report is GET /api/status.
type Report struct {
	Time          time.Time `json:"time"`
	LakeHighWater uint64    `json:"lake_high_water"`
	LakeVersion   int64     `json:"lake_version"`
	NATS          bool      `json:"nats"`
	HighWater     uint64    `json:"high_water,omitempty"`
	WALLastSeq    uint64    `json:"wal_last_seq,omitempty"`
	MinerPosition uint64    `json:"miner_position,omitempty"`
	// WALRate is WAL sequences appended per second since the previous poll.
	WALRate    *float64 `json:"wal_rate,omitempty"`
	Stages     []Stage  `json:"stages"`
	DLQMsgs    uint64   `json:"dlq_msgs"`
	DLQBytes   uint64   `json:"dlq_bytes"`
	Sources    []Source `json:"sources"`
	Errors     []string `json:"errors,omitempty"`
	IntervalMS int64    `json:"interval_ms,omitempty"`
}

// Read takes one status reading. Parts that cannot be read are reported in
// Errors; the rest is still returned.
func (s *Status) Read(ctx context.Context) Report {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rep := Report{Time: time.Now().UTC(), Stages: []Stage{}, Sources: []Source{}, NATS: s.js != nil}
	fail := func(what string, err error) { rep.Errors = append(rep.Errors, what+": "+err.Error()) }
	if snap, err := s.lake.Records().Snapshot(ctx); err != nil {
		fail("lake", err)
	} else {
		rep.LakeVersion = snap.Version
		if v, ok := snap.Txns[lake.AppID]; ok && v > 0 {
			rep.LakeHighWater = uint64(v)
		}
	}
	cur := sample{at: rep.Time, highWater: rep.LakeHighWater}
	if s.js != nil {
		s.readNATS(ctx, &rep, &cur, fail)
	} else {
		rep.Stages = append(rep.Stages, Stage{Name: "committer", Unit: "wal seqs"})
	}
	s.mu.Lock()
	prev := s.prev
	s.prev = &cur
	s.mu.Unlock()
	if prev != nil && cur.at.After(prev.at) {
		dt := cur.at.Sub(prev.at).Seconds()
		rep.IntervalMS = cur.at.Sub(prev.at).Milliseconds()
		rate := func(a, b uint64) *float64 { r := float64(a-min(a, b)) / dt; return &r }
		if s.js != nil {
			rep.WALRate = rate(cur.walLast, prev.walLast)
		}
		for i := range rep.Stages {
			switch rep.Stages[i].Name {
			case "miner":
				rep.Stages[i].Rate = rate(cur.mined, prev.mined)
			case "committer":
				rep.Stages[i].Rate = rate(cur.highWater, prev.highWater)
			}
		}
	}
	return rep
}

func (s *Status) readNATS(ctx context.Context, rep *Report, cur *sample, fail func(string, error)) {
	if st, err := s.js.Stream(ctx, streams.WALStream); err != nil {
		fail("wal", err)
	} else if info, err := st.Info(ctx); err != nil {
		fail("wal", err)
	} else {
		rep.WALLastSeq = info.State.LastSeq
	}
	cur.walLast = rep.WALLastSeq
	if kv, err := s.js.KeyValue(ctx, streams.PositionsBucket); err != nil {
		fail("positions", err)
	} else if e, err := kv.Get(ctx, streams.KeyMiner); err == nil {
		rep.MinerPosition, _ = strconv.ParseUint(string(e.Value()), 10, 64)
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		fail("miner position", err)
	}
	cur.mined = rep.MinerPosition
	if kv, err := s.js.KeyValue(ctx, streams.StateBucket); err != nil {
		fail("state", err)
	} else if e, err := kv.Get(ctx, streams.KeyHighWater); err == nil {
		rep.HighWater, _ = strconv.ParseUint(string(e.Value()), 10, 64)
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		fail("high-water", err)
	}
	if rep.HighWater == 0 {
		rep.HighWater = rep.LakeHighWater
	}
	cur.highWater = rep.HighWater
	lag := func(a, b uint64) uint64 { return a - min(a, b) }
	rep.Stages = append(rep.Stages, Stage{Name: "miner", Lag: lag(rep.WALLastSeq, rep.MinerPosition), Unit: "wal seqs"})
	var mined, reports uint64
	if st, err := s.js.Stream(ctx, streams.MinedStream); err != nil {
		fail("mined", err)
	} else if info, err := st.Info(ctx); err != nil {
		fail("mined", err)
	} else {
		mined = info.State.Msgs // a work queue: what no encoder has acked
	}
	rep.Stages = append(rep.Stages, Stage{Name: "encoder", Lag: mined, Unit: "mined batches"})
	if c, err := s.js.Consumer(ctx, streams.ReportStream, streams.CommitterConsumer); err == nil {
		if info, err := c.Info(ctx); err == nil {
			reports = info.NumPending + uint64(info.NumAckPending)
		}
	}
	rep.Stages = append(rep.Stages, Stage{Name: "reports", Lag: reports, Unit: "reports"})
	rep.Stages = append(rep.Stages, Stage{Name: "committer", Lag: lag(rep.WALLastSeq, rep.HighWater), Unit: "wal seqs"})
	var err error
	if rep.DLQMsgs, rep.DLQBytes, err = dlq.Size(ctx, s.js); err != nil {
		fail("dlq", err)
	}
	if kv, err := s.js.KeyValue(ctx, streams.ProgressBucket); err != nil {
		fail("progress", err)
	} else if keys, err := kv.ListKeys(ctx); err != nil {
		if !errors.Is(err, jetstream.ErrNoKeysFound) {
			fail("progress", err)
		}
	} else {
		for k := range keys.Keys() {
			e, err := kv.Get(ctx, k)
			if err != nil {
				continue
			}
			p, err := streams.DecodeProgress(e.Value())
			if err != nil {
				fail("progress "+k, err)
				continue
			}
			src := Source{Progress: *p}
			if !p.FinalizedUntil.IsZero() {
				src.Behind = rep.Time.Sub(p.FinalizedUntil).Round(time.Second).String()
			}
			rep.Sources = append(rep.Sources, src)
		}
	}
}

// status answers GET /api/status.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if s.d.Status == nil {
		writeError(w, http.StatusNotFound, "no status: the server has no lake", 0)
		return
	}
	writeJSON(w, http.StatusOK, s.d.Status.Read(r.Context()))
}
