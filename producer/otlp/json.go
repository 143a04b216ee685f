package otlp

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// UnmarshalJSON decodes an ExportLogsServiceRequest in OTLP JSON: the
// protobuf JSON mapping, except that trace and span ids are hex (OTLP
// JSON's rule; base64 of the right length is accepted too), and unknown
// fields are ignored (OTLP's forward compatibility).
func UnmarshalJSON(b []byte) (*collogspb.ExportLogsServiceRequest, error) {
	if hasIDs(b) {
		var err error
		if b, err = hexIDs(b); err != nil {
			return nil, err
		}
	}
	req := &collogspb.ExportLogsServiceRequest{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, req); err != nil {
		return nil, fmt.Errorf("OTLP JSON: %w", err)
	}
	return req, nil
}

var idKeys = [][]byte{[]byte("traceId"), []byte("spanId"), []byte("trace_id"), []byte("span_id")}

func hasIDs(b []byte) bool {
	for _, k := range idKeys {
		if bytes.Contains(b, k) {
			return true
		}
	}
	return false
}

// hexIDs rewrites the hex trace and span ids of b's log records as
// base64, what protojson reads for bytes fields.
func hexIDs(b []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var root map[string]any
	if err := d.Decode(&root); err != nil {
		return nil, fmt.Errorf("OTLP JSON: %w", err)
	}
	if d.More() {
		return nil, errors.New("OTLP JSON: more than one JSON value")
	}
	for _, rl := range list(root, "resourceLogs", "resource_logs") {
		for _, sl := range list(rl, "scopeLogs", "scope_logs") {
			for i, lr := range list(sl, "logRecords", "log_records") {
				for _, f := range []struct {
					keys []string
					n    int
				}{{[]string{"traceId", "trace_id"}, 16}, {[]string{"spanId", "span_id"}, 8}} {
					for _, k := range f.keys {
						s, ok := lr[k].(string)
						if !ok || len(s) != 2*f.n {
							continue // empty, base64 or malformed: protojson decides
						}
						id, err := hex.DecodeString(s)
						if err != nil {
							return nil, fmt.Errorf("OTLP JSON: log record %d: %s %q: want %d hex digits", i, k, s, 2*f.n)
						}
						lr[k] = base64.StdEncoding.EncodeToString(id)
					}
				}
			}
		}
	}
	return json.Marshal(root)
}

// list is the objects in the array under the first of keys in m.
func list(m map[string]any, keys ...string) []map[string]any {
	for _, k := range keys {
		a, ok := m[k].([]any)
		if !ok {
			continue
		}
		out := make([]map[string]any, 0, len(a))
		for _, v := range a {
			if o, ok := v.(map[string]any); ok {
				out = append(out, o)
			}
		}
		return out
	}
	return nil
}
