// Package delta reads and writes Delta Lake transaction logs
// (delta-io/delta PROTOCOL.md) over an objstore.Store, for reader version 1
// and writer version 2: no table features, no deletion vectors, no column
// mapping.
//
// A table is a root key prefix holding data files and <root>/_delta_log/.
// Every commit is one newline-delimited JSON file <version:020d>.json written
// create-only (objstore PutIfAbsent), so of two writers racing for a version
// exactly one wins and the other gets ErrVersionExists; a log entry is never
// overwritten. Snapshots replay the log (from a classic checkpoint when one
// exists) with the protocol's action reconciliation rules.
//
// Add.Path and Remove.Path hold the file's path relative to the table root as
// stored (the object key under root); the JSON form is the URI-encoded path
// the protocol requires, encoded and decoded here.
package delta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Protocol is the protocol action.
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Format is the metaData action's file format.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData action.
type Metadata struct {
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      int64             `json:"createdTime,omitempty"`
}

// Add is the add action. Path is relative to the table root, unencoded.
type Add struct {
	Path             string
	PartitionValues  map[string]string
	Size             int64
	ModificationTime int64 // milliseconds since the epoch
	DataChange       bool
	Stats            string // JSON, see StatsJSON
	Tags             map[string]string
}

// Remove is the remove action. Path is relative to the table root,
// unencoded. With ExtendedFileMetadata the partition values, size and tags
// are written too.
type Remove struct {
	Path                 string
	DeletionTimestamp    int64 // milliseconds since the epoch
	DataChange           bool
	ExtendedFileMetadata bool
	PartitionValues      map[string]string
	Size                 int64
	Tags                 map[string]string
}

// Txn is the txn (transaction identifier) action: the application appId has
// made progress up to Version, atomically with the commit's other actions.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated int64  `json:"lastUpdated,omitempty"`
}

// CommitInfo is the commitInfo action: free-form provenance.
type CommitInfo map[string]any

// Action is one line of a commit file; exactly one field is set.
type Action struct {
	Protocol   *Protocol
	MetaData   *Metadata
	Add        *Add
	Remove     *Remove
	Txn        *Txn
	CommitInfo CommitInfo
}

// Sentinel errors.
var (
	// ErrVersionExists: the commit's version was already written by another
	// writer (the race was lost, or this writer is fenced).
	ErrVersionExists = errors.New("delta: version already exists")
	// ErrCorrupt: the log breaks the protocol (a gap, an unparseable entry, a
	// first version without protocol and metaData, ...).
	ErrCorrupt = errors.New("delta: corrupt log")
	// ErrUnsupported: the table needs a protocol version or feature this
	// package does not implement.
	ErrUnsupported = errors.New("delta: unsupported protocol")
)

// Supported protocol versions.
const (
	ReaderVersion = 1
	WriterVersion = 2
)

// EncodePath turns a path relative to the table root into the URI path the
// log stores: every segment percent-encoded, '/' kept.
func EncodePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// DecodePath is the inverse of EncodePath.
func DecodePath(p string) (string, error) {
	d, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("path %q: %w", p, err)
	}
	return d, nil
}

type addJSON struct {
	Path             string            `json:"path"`
	PartitionValues  map[string]string `json:"partitionValues"`
	Size             int64             `json:"size"`
	ModificationTime int64             `json:"modificationTime"`
	DataChange       bool              `json:"dataChange"`
	Stats            string            `json:"stats,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
	DeletionVector   json.RawMessage   `json:"deletionVector,omitempty"`
}

// MarshalJSON writes the protocol's add object.
func (a Add) MarshalJSON() ([]byte, error) {
	pv := a.PartitionValues
	if pv == nil {
		pv = map[string]string{}
	}
	return json.Marshal(addJSON{
		Path: EncodePath(a.Path), PartitionValues: pv, Size: a.Size,
		ModificationTime: a.ModificationTime, DataChange: a.DataChange, Stats: a.Stats, Tags: a.Tags,
	})
}

// UnmarshalJSON reads the protocol's add object.
func (a *Add) UnmarshalJSON(b []byte) error {
	var j addJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.DeletionVector) > 0 && string(j.DeletionVector) != "null" {
		return fmt.Errorf("add %s: deletion vectors: %w", j.Path, ErrUnsupported)
	}
	p, err := DecodePath(j.Path)
	if err != nil {
		return err
	}
	*a = Add{Path: p, PartitionValues: j.PartitionValues, Size: j.Size, ModificationTime: j.ModificationTime,
		DataChange: j.DataChange, Stats: j.Stats, Tags: j.Tags}
	return nil
}

type removeJSON struct {
	Path                 string            `json:"path"`
	DeletionTimestamp    *int64            `json:"deletionTimestamp,omitempty"`
	DataChange           bool              `json:"dataChange"`
	ExtendedFileMetadata bool              `json:"extendedFileMetadata,omitempty"`
	PartitionValues      map[string]string `json:"partitionValues,omitempty"`
	Size                 *int64            `json:"size,omitempty"`
	Tags                 map[string]string `json:"tags,omitempty"`
	DeletionVector       json.RawMessage   `json:"deletionVector,omitempty"`
}

// MarshalJSON writes the protocol's remove object.
func (r Remove) MarshalJSON() ([]byte, error) {
	j := removeJSON{Path: EncodePath(r.Path), DataChange: r.DataChange}
	if r.DeletionTimestamp != 0 {
		ts := r.DeletionTimestamp
		j.DeletionTimestamp = &ts
	}
	if r.ExtendedFileMetadata {
		j.ExtendedFileMetadata = true
		j.PartitionValues = r.PartitionValues
		if j.PartitionValues == nil {
			j.PartitionValues = map[string]string{}
		}
		size := r.Size
		j.Size = &size
		j.Tags = r.Tags
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the protocol's remove object.
func (r *Remove) UnmarshalJSON(b []byte) error {
	var j removeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.DeletionVector) > 0 && string(j.DeletionVector) != "null" {
		return fmt.Errorf("remove %s: deletion vectors: %w", j.Path, ErrUnsupported)
	}
	p, err := DecodePath(j.Path)
	if err != nil {
		return err
	}
	*r = Remove{Path: p, DataChange: j.DataChange, ExtendedFileMetadata: j.ExtendedFileMetadata,
		PartitionValues: j.PartitionValues, Tags: j.Tags}
	if j.DeletionTimestamp != nil {
		r.DeletionTimestamp = *j.DeletionTimestamp
	}
	if j.Size != nil {
		r.Size = *j.Size
	}
	return nil
}

// kind names the action's single field, or "" when none or several are set.
func (a Action) kind() string {
	k, n := "", 0
	if a.Protocol != nil {
		k, n = "protocol", n+1
	}
	if a.MetaData != nil {
		k, n = "metaData", n+1
	}
	if a.Add != nil {
		k, n = "add", n+1
	}
	if a.Remove != nil {
		k, n = "remove", n+1
	}
	if a.Txn != nil {
		k, n = "txn", n+1
	}
	if a.CommitInfo != nil {
		k, n = "commitInfo", n+1
	}
	if n != 1 {
		return ""
	}
	return k
}

// MarshalJSON writes {"<action>":{...}}.
func (a Action) MarshalJSON() ([]byte, error) {
	var v any
	switch a.kind() {
	case "protocol":
		v = a.Protocol
	case "metaData":
		md := *a.MetaData
		if md.PartitionColumns == nil {
			md.PartitionColumns = []string{}
		}
		if md.Configuration == nil {
			md.Configuration = map[string]string{}
		}
		if md.Format.Options == nil {
			md.Format.Options = map[string]string{}
		}
		v = md
	case "add":
		v = a.Add
	case "remove":
		v = a.Remove
	case "txn":
		v = a.Txn
	case "commitInfo":
		v = map[string]any(a.CommitInfo)
	default:
		return nil, errors.New("delta: an action must set exactly one field")
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString(`{"` + a.kind() + `":`)
	buf.Write(body)
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// knownIgnored are actions this package reads past: they carry nothing a
// reader 1 / writer 2 table needs (cdc files, and checkpoint-only actions).
var knownIgnored = map[string]bool{"cdc": true, "checkpointMetadata": true, "sidecar": true}

// decodeAction decodes one log line. ok is false for an action this package
// ignores.
func decodeAction(line []byte) (a Action, ok bool, err error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return Action{}, false, err
	}
	if dec.More() {
		return Action{}, false, errors.New("trailing data after the action")
	}
	if len(obj) != 1 {
		return Action{}, false, fmt.Errorf("an action line must hold exactly one action, got %d keys", len(obj))
	}
	for k, raw := range obj {
		if string(raw) == "null" {
			return Action{}, false, fmt.Errorf("%s: null", k)
		}
		switch k {
		case "protocol":
			a.Protocol = new(Protocol)
			err = json.Unmarshal(raw, a.Protocol)
		case "metaData":
			a.MetaData = new(Metadata)
			err = json.Unmarshal(raw, a.MetaData)
		case "add":
			a.Add = new(Add)
			err = json.Unmarshal(raw, a.Add)
		case "remove":
			a.Remove = new(Remove)
			err = json.Unmarshal(raw, a.Remove)
		case "txn":
			a.Txn = new(Txn)
			err = json.Unmarshal(raw, a.Txn)
		case "commitInfo":
			d := json.NewDecoder(bytes.NewReader(raw))
			d.UseNumber()
			var ci map[string]any
			err = d.Decode(&ci)
			if err == nil && ci == nil {
				ci = map[string]any{}
			}
			a.CommitInfo = ci
		case "domainMetadata":
			return Action{}, false, fmt.Errorf("domainMetadata: %w", ErrUnsupported)
		default:
			if knownIgnored[k] {
				return Action{}, false, nil
			}
			// The protocol says readers ignore unrecognized actions.
			return Action{}, false, nil
		}
		if err != nil {
			return Action{}, false, fmt.Errorf("%s: %w", k, err)
		}
	}
	return a, true, nil
}

// maxLine bounds one log line (a metaData with a large schema, an add with
// large stats).
const maxLine = 64 << 20

// ErrLineTooLong is a commit line longer than 64 MiB.
var ErrLineTooLong = errors.New("delta log line too long")

// DecodeCommit parses a commit file: one JSON action per line; blank lines
// are skipped, unknown actions ignored.
func DecodeCommit(data []byte) ([]Action, error) {
	// The commit is in memory already: lines are cut in place (a scanner
	// wanted a 64 KiB buffer per commit, most of a short query's reading of
	// a log of small commits).
	var out []Action
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) > maxLine {
			return nil, fmt.Errorf("line %d: %w", n, ErrLineTooLong)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		a, ok, err := decodeAction(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if ok {
			out = append(out, a)
		}
	}
	return out, nil
}

// EncodeCommit serializes actions as a commit file (one line each, newline
// terminated).
func EncodeCommit(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	for i, a := range actions {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("action %d: %w", i, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}
