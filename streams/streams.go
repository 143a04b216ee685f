// Package streams is the contract between quarry's stages: the subjects, the
// JetStream streams, consumers and key-value buckets they use, the headers
// they set and the versioned message formats they exchange.
//
// Stages depend on this package and never on each other. Every format here is
// documented in docs/formats.md; a change to a wire format bumps its version
// byte and keeps the old decoder working.
package streams

import (
	"errors"
	"fmt"
	"strings"
)

// Stream names.
const (
	// WALStream holds frames published by producers. It is the write-ahead log:
	// a frame counts as received once JetStream has acked it. File storage,
	// limits retention; the committer purges below the safe point.
	WALStream = "QUARRY_WAL"
	// MinedStream is the work queue of mined batches, one per WAL frame,
	// consumed by the encoders through one durable pull consumer. Work-queue
	// retention: an ack deletes the batch.
	MinedStream = "QUARRY_MINED"
	// ReportStream holds the encoders' file reports. The committer reads it in
	// order; the order of this stream decides which report wins a batch.
	ReportStream = "QUARRY_REPORTS"
	// TemplateStream holds template events (created, changed) for subscribers.
	TemplateStream = "QUARRY_TEMPLATES"
	// DeadLetterStream holds whatever a stage could not process, with the
	// reason, so nothing is dropped silently.
	DeadLetterStream = "QUARRY_DLQ"
	// ProgressStream holds per-source progress facts (producer heartbeats).
	ProgressStream = "QUARRY_PROGRESS"
)

// Subject prefixes and fixed subjects.
const (
	// WALSubjects matches every WAL subject.
	WALSubjects = "quarry.wal.>"
	// MinedSubjects matches every mined-batch subject.
	MinedSubjects = "quarry.mined.>"
	// ReportSubjects matches every encoder report subject.
	ReportSubjects = "quarry.reports.>"
	// TemplateSubjects matches every template event subject.
	TemplateSubjects = "quarry.templates.>"
	// DeadLetterSubjects matches every dead-letter subject.
	DeadLetterSubjects = "quarry.dlq.>"
	// ProgressSubjects matches every progress subject.
	ProgressSubjects = "quarry.progress.>"
)

// Consumer names.
const (
	// EncoderConsumer is the one durable pull consumer on MinedStream that all
	// encoder workers share.
	EncoderConsumer = "quarry-encoders"
	// CommitterConsumer is the durable consumer of the active committer on
	// ReportStream. The committer also replays ReportStream from its first
	// message on takeover, so the consumer is a convenience, not state.
	CommitterConsumer = "quarry-committer"
)

// Key-value buckets and keys.
const (
	// PositionsBucket stores source positions: "producer.<source>" holds the
	// offset after the last acked frame of a line source; "cdc.<db>.<ci>" the
	// LSN position of a capture instance; "miner" the last mined WAL sequence.
	PositionsBucket = "quarry_positions"
	// StateBucket stores cluster state: the committer lease and high-water.
	StateBucket = "quarry_state"
	// VerdictsBucket stores the committer's verdict on each report, keyed by
	// the report id (see VerdictKey).
	VerdictsBucket = "quarry_verdicts"
	// ProgressBucket stores the latest Progress fact per source.
	ProgressBucket = "quarry_progress"
	// SnapshotBucket is the JetStream object store bucket for miner snapshots.
	SnapshotBucket = "quarry_snapshots"

	// KeyLease is the committer lease key in StateBucket.
	KeyLease = "committer.lease"
	// KeyHighWater is the committed high-water key in StateBucket: the decimal
	// WAL sequence at or below which every frame is committed to the lake.
	KeyHighWater = "highwater"
	// KeyMiner is the miner position key in PositionsBucket.
	KeyMiner = "miner"
)

// Header names.
const (
	// HeaderMsgID is JetStream's de-duplication header.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderFormat names the format and version of a payload, e.g. "frame/2".
	HeaderFormat = "Quarry-Format"
	// HeaderReason carries the reason on a dead-letter message.
	HeaderReason = "Quarry-Reason"
	// HeaderStage names the stage that dead-lettered a message.
	HeaderStage = "Quarry-Stage"
	// HeaderOrigSubject is the subject of the message that was dead-lettered.
	HeaderOrigSubject = "Quarry-Orig-Subject"
	// HeaderOrigSeq is the stream sequence of the dead-lettered message, if any.
	HeaderOrigSeq = "Quarry-Orig-Seq"
	// HeaderSource and HeaderOffset locate a dead-lettered record in its source.
	HeaderSource = "Quarry-Source"
	HeaderOffset = "Quarry-Offset"
)

// Format identifiers carried in HeaderFormat.
const (
	FormatFrame    = "frame/2"
	FormatMined    = "mined/3"
	FormatReport   = "report/1"
	FormatVerdict  = "verdict/1"
	FormatTemplate = "template/1"
	FormatProgress = "progress/2"
	FormatRaw      = "raw"
)

// KnownMinedFormat reports whether f is a mined-batch format this build
// decodes ("mined/1", "mined/2" or "mined/3").
func KnownMinedFormat(f string) bool { return f == "mined/1" || f == "mined/2" || f == FormatMined }

// ErrBadToken reports a name that cannot be used as a subject token.
var ErrBadToken = errors.New("invalid subject token")

// CheckToken reports whether s can be used as one subject token: non-empty,
// at most 128 bytes of ASCII letters, digits, '-' and '_'. Tenants, sources,
// databases and capture instances are subject tokens.
func CheckToken(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrBadToken)
	}
	if len(s) > 128 {
		return fmt.Errorf("%w: %q is longer than 128 bytes", ErrBadToken, s[:32]+"...")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return fmt.Errorf("%w: %q has %q at byte %d (allowed: letters, digits, - and _)", ErrBadToken, s, c, i)
		}
	}
	return nil
}

// LineSubject is the WAL subject of a line source's frames for tenant.
func LineSubject(tenant string) string { return "quarry.wal.lines." + tenant }

// CDCSubject is the WAL subject of a SQL Server capture instance's frames.
func CDCSubject(database, captureInstance string) string {
	return "quarry.wal.mssql." + database + "." + captureInstance
}

// MinedSubject is the work-queue subject of mined batches for tenant.
func MinedSubject(tenant string) string { return "quarry.mined." + tenant }

// ReportSubject is the subject an encoder publishes its reports on.
func ReportSubject(encoder string) string { return "quarry.reports." + encoder }

// TemplateSubject is the subject of tenant's template events.
func TemplateSubject(tenant string) string { return "quarry.templates." + tenant }

// OrderedResetAttempts is how often an ordered consumer of any stage
// tries to recreate itself (after a lost heartbeat or a sequence gap)
// before its Fetch or Next returns an error. nats.go's default is to try
// for ever, which turns a consumer that cannot be recreated (its stream's
// leader moving, a node gone) into a silent wait; with a bound, the stage
// sees the error, says so in /readyz and makes a new consumer itself.
const OrderedResetAttempts = 3

// DeadLetterSubject is the dead-letter subject of a stage ("producer",
// "miner", "encoder", "committer").
func DeadLetterSubject(stage string) string { return "quarry.dlq." + stage }

// ProgressSubject is the subject of a source's progress facts.
func ProgressSubject(source string) string { return "quarry.progress." + source }

// VerdictKey is the key in VerdictsBucket for a report id. Report ids are
// subject tokens joined by '.', which KV keys allow.
func VerdictKey(reportID string) string { return "r." + reportID }

// FloorKey is the key in PositionsBucket under which a producer keeps its WAL
// floor: the lowest WAL sequence its restart may need to read back (the
// frames it published after its saved position). The value is a decimal
// sequence. The committer never purges the WAL at or above any floor that
// was updated within its FloorMaxAge.
func FloorKey(source string) string { return "floor." + source }

// FloorPrefix is the prefix of every FloorKey.
const FloorPrefix = "floor."

// MinedMsgID is the Nats-Msg-Id of the mined batch of WAL sequence seq.
func MinedMsgID(seq uint64) string { return fmt.Sprintf("wal-%d", seq) }

// FrameMsgID is the Nats-Msg-Id of a frame from source starting at offset.
// It is deterministic, so a producer that republishes after a crash inside
// the duplicate window is de-duplicated by JetStream.
func FrameMsgID(source string, offset uint64) string {
	return fmt.Sprintf("%s:%d", source, offset)
}

// TemplateMsgID is the Nats-Msg-Id of a template event.
func TemplateMsgID(id uint64, version uint32) string {
	return fmt.Sprintf("tpl-%d-%d", id, version)
}

// TemplateMergeMsgID is the Nats-Msg-Id of the event that template id was
// merged into template into.
func TemplateMergeMsgID(id, into uint64) string {
	return fmt.Sprintf("tpl-merge-%d-%d", id, into)
}

// SanitizeToken maps an arbitrary name to a subject token by replacing each
// disallowed byte with '_'. Use it only where a name is not user-facing
// (for example a file name turned into a source id).
func SanitizeToken(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 128; i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}
