package streams

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
)

// Config sets the shape of quarry's streams and buckets.
type Config struct {
	// Replicas of every stream and bucket: 1 on one server, 3 on a cluster.
	Replicas int `yaml:"replicas"`
	// DuplicateWindow is the WAL's and the work queue's de-duplication window.
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	// MaxMsgSize bounds one message in any stream; it must not exceed the
	// server's max_payload.
	MaxMsgSize int32 `yaml:"max_msg_size"`
	// DeadLetterMaxAge is how long dead letters are kept.
	DeadLetterMaxAge time.Duration `yaml:"dead_letter_max_age"`
	// DeadLetterMaxBytes caps the dead-letter stream's size, -1 (the
	// default) for no cap but DeadLetterMaxAge. At the cap the stream
	// refuses new dead letters, never drops old ones: the stage that could
	// not quarantine a record keeps it and stalls, visibly in its
	// readiness, until an operator drops or replays dead letters (quarry
	// dlq). JetStream reserves the cap from its max_file_store when the
	// stream is created.
	DeadLetterMaxBytes int64 `yaml:"dead_letter_max_bytes"`
	// VerdictTTL is how long verdicts are kept.
	VerdictTTL time.Duration `yaml:"verdict_ttl"`
	// NoticeMaxAge is how long commit notices are kept. A subscriber that
	// falls further behind reads the Delta log instead.
	NoticeMaxAge time.Duration `yaml:"notice_max_age"`
	// NoticeMaxMsgs caps the commit-notice stream's message count (one
	// notice per commit of the records and of the templates table, so two
	// per advance): with commit_interval 0 or very short,
	// NoticeMaxAge alone would let it grow with the commit rate. Past it the
	// oldest notices are dropped and a subscriber that far behind reads the
	// Delta log instead, as past NoticeMaxAge. Default 2,000,000 (the 7
	// days of NoticeMaxAge at one advance a second are 1,209,600 notices).
	NoticeMaxMsgs int64 `yaml:"notice_max_msgs"`
}

// Defaults returns c with unset fields set to their defaults.
func (c Config) Defaults() Config {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 10 * time.Minute
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = 8 << 20
	}
	if c.DeadLetterMaxAge == 0 {
		c.DeadLetterMaxAge = 30 * 24 * time.Hour
	}
	if c.VerdictTTL == 0 {
		c.VerdictTTL = 24 * time.Hour
	}
	if c.NoticeMaxAge == 0 {
		c.NoticeMaxAge = 7 * 24 * time.Hour
	}
	if c.NoticeMaxMsgs == 0 {
		c.NoticeMaxMsgs = 2_000_000
	}
	if c.DeadLetterMaxBytes == 0 {
		c.DeadLetterMaxBytes = -1
	}
	return c
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("streams.replicas %d: must be 1 to 5", c.Replicas))
	}
	if c.DuplicateWindow < time.Second {
		errs = append(errs, fmt.Errorf("streams.duplicate_window %s: must be at least 1s", c.DuplicateWindow))
	}
	if c.MaxMsgSize < 64<<10 {
		errs = append(errs, fmt.Errorf("streams.max_msg_size %d: must be at least 64KiB", c.MaxMsgSize))
	}
	if c.DeadLetterMaxAge < time.Minute {
		errs = append(errs, fmt.Errorf("streams.dead_letter_max_age %s: must be at least 1m", c.DeadLetterMaxAge))
	}
	if c.VerdictTTL < time.Minute {
		errs = append(errs, fmt.Errorf("streams.verdict_ttl %s: must be at least 1m", c.VerdictTTL))
	}
	if c.NoticeMaxAge < time.Minute {
		errs = append(errs, fmt.Errorf("streams.notice_max_age %s: must be at least 1m", c.NoticeMaxAge))
	}
	if c.NoticeMaxMsgs < 1000 {
		errs = append(errs, fmt.Errorf("streams.notice_max_msgs %d: must be at least 1000", c.NoticeMaxMsgs))
	}
	if c.DeadLetterMaxBytes != -1 && c.DeadLetterMaxBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("streams.dead_letter_max_bytes %d: must be -1 (no cap) or at least 1MiB", c.DeadLetterMaxBytes))
	}
	return errors.Join(errs...)
}

// StreamConfigs returns the configs of every stream quarry uses.
func (c Config) StreamConfigs() []jetstream.StreamConfig {
	base := func(name, subj, desc string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    []string{subj},
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
			MaxMsgSize:  c.MaxMsgSize,
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			Duplicates:  c.DuplicateWindow,
		}
	}
	wal := base(WALStream, WALSubjects, "quarry write-ahead log: producer frames")
	wal.Discard = jetstream.DiscardNew // never lose WAL data to a limit
	mined := base(MinedStream, MinedSubjects, "quarry work queue: mined batches for the encoders")
	mined.Retention = jetstream.WorkQueuePolicy
	mined.Discard = jetstream.DiscardNew
	reports := base(ReportStream, ReportSubjects, "quarry encoder file reports, in arbitration order")
	reports.Discard = jetstream.DiscardNew
	tpl := base(TemplateStream, TemplateSubjects, "quarry template events")
	dlq := base(DeadLetterStream, DeadLetterSubjects, "quarry dead letters: what a stage could not process, with the reason")
	dlq.MaxAge = c.DeadLetterMaxAge
	dlq.MaxBytes = c.DeadLetterMaxBytes
	dlq.Discard = jetstream.DiscardNew // a dead letter is never dropped to make room
	prog := base(ProgressStream, ProgressSubjects, "quarry source progress facts")
	prog.MaxMsgsPerSubject = 16
	notices := base(NoticeStream, NoticeSubjects, "quarry commit notices: one per Delta commit, after it is durable")
	notices.MaxAge = c.NoticeMaxAge
	notices.MaxMsgs = c.NoticeMaxMsgs
	return []jetstream.StreamConfig{wal, mined, reports, tpl, dlq, prog, notices}
}

// KeyValueConfigs returns the configs of every KV bucket quarry uses.
func (c Config) KeyValueConfigs() []jetstream.KeyValueConfig {
	kv := func(name, desc string) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{Bucket: name, Description: desc, History: 1, Storage: jetstream.FileStorage, Replicas: c.Replicas}
	}
	ver := kv(VerdictsBucket, "quarry committer verdicts on encoder reports")
	ver.TTL = c.VerdictTTL
	return []jetstream.KeyValueConfig{
		kv(PositionsBucket, "quarry source and miner positions"),
		kv(StateBucket, "quarry committer lease and high-water"),
		ver,
		kv(ProgressBucket, "quarry latest progress per source"),
	}
}

// ErrMismatch reports an existing stream whose config differs from what
// quarry needs in a way quarry will not silently accept.
var ErrMismatch = errors.New("stream config mismatch")

// Ensure creates every stream, bucket and the snapshot object store, or
// checks the existing ones: where a setting quarry depends on (retention,
// storage, replicas, subjects, discard policy, sealed, deny purge/delete,
// mirror or sources) differs, it reports every difference and changes
// nothing; other settings are updated. Whether the servers fsync every write
// (sync_interval: always) is server configuration JetStream does not expose
// to clients, so it cannot be checked here.
//
// A young cluster may not answer JetStream requests until it has elected a
// meta leader, so every attempt is bounded (10s) and a failed attempt is
// retried every second until ctx ends (default: two minutes); a config
// mismatch is final and returned at once.
func Ensure(ctx context.Context, js jetstream.JetStream, c Config) error {
	ctx, cancel := backoff.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	err := backoff.Retry(ctx, backoff.Policy{Min: time.Second, Max: time.Second}, func(ctx context.Context) error {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		defer acancel()
		last = ensureOnce(actx, js, c)
		if errors.Is(last, ErrMismatch) {
			return backoff.Permanent(last)
		}
		return last
	}, nil)
	if err != nil && ctx.Err() != nil {
		return last // the last attempt's error says what the cluster lacked
	}
	return err
}

func ensureOnce(ctx context.Context, js jetstream.JetStream, c Config) error {
	var errs []error
	for _, want := range c.StreamConfigs() {
		s, err := js.Stream(ctx, want.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			if _, err := js.CreateStream(ctx, want); err != nil {
				errs = append(errs, fmt.Errorf("create stream %s: %w", want.Name, err))
			}
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("look up stream %s: %w", want.Name, err))
			continue
		}
		have := s.CachedInfo().Config
		if diff := diffStream(have, want); len(diff) > 0 {
			errs = append(errs, fmt.Errorf("%w: %s: %s", ErrMismatch, want.Name, strings.Join(diff, "; ")))
			continue
		}
		if _, err := js.UpdateStream(ctx, want); err != nil {
			errs = append(errs, fmt.Errorf("update stream %s: %w", want.Name, err))
		}
	}
	for _, kv := range c.KeyValueConfigs() {
		if _, err := js.CreateOrUpdateKeyValue(ctx, kv); err != nil {
			errs = append(errs, fmt.Errorf("key-value bucket %s: %w", kv.Bucket, err))
		}
	}
	if _, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: SnapshotBucket, Description: "quarry miner snapshots", Storage: jetstream.FileStorage, Replicas: c.Replicas,
	}); err != nil {
		errs = append(errs, fmt.Errorf("object store %s: %w", SnapshotBucket, err))
	}
	return errors.Join(errs...)
}

func diffStream(have, want jetstream.StreamConfig) []string {
	var d []string
	if have.Retention != want.Retention {
		d = append(d, fmt.Sprintf("retention is %s, want %s", have.Retention, want.Retention))
	}
	if have.Storage != want.Storage {
		d = append(d, fmt.Sprintf("storage is %s, want %s", have.Storage, want.Storage))
	}
	if have.Replicas != want.Replicas {
		d = append(d, fmt.Sprintf("replicas is %d, want %d", have.Replicas, want.Replicas))
	}
	if strings.Join(have.Subjects, ",") != strings.Join(want.Subjects, ",") {
		d = append(d, fmt.Sprintf("subjects are %v, want %v", have.Subjects, want.Subjects))
	}
	// A stream that drops old messages at a limit where quarry wants new
	// publishes refused would lose acked data.
	if have.Discard != want.Discard {
		d = append(d, fmt.Sprintf("discard policy is %s, want %s", have.Discard, want.Discard))
	}
	// The committer purges the WAL and the streams are written to.
	if have.Sealed {
		d = append(d, "stream is sealed, want writable")
	}
	if have.DenyPurge {
		d = append(d, "deny_purge is set, want purges allowed")
	}
	if have.DenyDelete {
		d = append(d, "deny_delete is set, want deletes allowed")
	}
	if have.Mirror != nil {
		d = append(d, fmt.Sprintf("stream mirrors %s, want a plain stream", have.Mirror.Name))
	}
	if len(have.Sources) > 0 {
		d = append(d, fmt.Sprintf("stream sources %d other streams, want a plain stream", len(have.Sources)))
	}
	return d
}

// DeadLetter publishes payload to the dead-letter stream for stage with the
// reason, the original subject and, when known, its stream sequence. It
// returns only after JetStream acked, so a caller may then ack the original.
func DeadLetter(ctx context.Context, js jetstream.JetStream, stage, origSubject string, origSeq uint64, payload []byte, reason string, extra nats.Header) error {
	ctx, cancel := backoff.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg := nats.NewMsg(DeadLetterSubject(stage))
	for k, v := range extra {
		msg.Header[k] = v
	}
	msg.Header.Set(HeaderStage, stage)
	msg.Header.Set(HeaderReason, reason)
	msg.Header.Set(HeaderOrigSubject, origSubject)
	if origSeq > 0 {
		msg.Header.Set(HeaderOrigSeq, strconv.FormatUint(origSeq, 10))
		msg.Header.Set(HeaderMsgID, fmt.Sprintf("dlq-%s-%d", stage, origSeq))
	}
	msg.Data = payload
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("dead-letter to %s: %w", msg.Subject, err)
	}
	return nil
}
