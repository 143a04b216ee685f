package delta_test

import (
	"reflect"
	"testing"

	"github.com/quarrylake/quarry/internal/delta"
)

func FuzzDecodeCommit(f *testing.F) {
	f.Add([]byte(`{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}` + "\n" +
		`{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{}","partitionColumns":["tenant"],"configuration":{}}}`))
	f.Add([]byte(`{"add":{"path":"tenant=a%20b/p.parquet","partitionValues":{"tenant":"a b"},"size":1,"modificationTime":2,"dataChange":true,"stats":"{\"numRecords\":1}"}}`))
	f.Add([]byte(`{"remove":{"path":"p","deletionTimestamp":1,"dataChange":true,"extendedFileMetadata":true,"size":3}}` + "\n" + `{"txn":{"appId":"quarry","version":7}}`))
	f.Add([]byte(`{"commitInfo":{"timestamp":1,"nested":{"a":[1,2,{"b":null}]}}}`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		actions, err := delta.DecodeCommit(data)
		if err != nil {
			return
		}
		// What decodes must re-encode and decode to the same actions.
		enc, err := delta.EncodeCommit(actions)
		if err != nil {
			// Actions with invalid shape cannot come out of the decoder.
			t.Fatalf("re-encode %q: %v", data, err)
		}
		again, err := delta.DecodeCommit(enc)
		if err != nil {
			t.Fatalf("decode re-encoded %q: %v", enc, err)
		}
		enc2, err := delta.EncodeCommit(again)
		if err != nil || string(enc2) != string(enc) {
			t.Fatalf("not stable:\n%s\n%s", enc, enc2)
		}
		if len(again) != len(actions) || !reflect.DeepEqual(kinds(again), kinds(actions)) {
			t.Fatalf("kinds differ: %v vs %v", kinds(again), kinds(actions))
		}
	})
}

func kinds(actions []delta.Action) []string {
	var out []string
	for _, a := range actions {
		switch {
		case a.Protocol != nil:
			out = append(out, "protocol")
		case a.MetaData != nil:
			out = append(out, "metaData")
		case a.Add != nil:
			out = append(out, "add")
		case a.Remove != nil:
			out = append(out, "remove")
		case a.Txn != nil:
			out = append(out, "txn")
		case a.CommitInfo != nil:
			out = append(out, "commitInfo")
		}
	}
	return out
}
