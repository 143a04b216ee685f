package otlp

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
)

// The request encodings of POST /v1/logs.
const (
	contentProtobuf = "application/x-protobuf"
	contentJSON     = "application/json"
)

// Handler serves POST /v1/logs.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/logs", s.logs)
	return mux
}

// logs serves POST /v1/logs: the answer is in the request's encoding, an
// ExportLogsServiceResponse or, on failure, a google.rpc.Status.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	isJSON := ct == contentJSON
	if !isJSON && ct != contentProtobuf {
		writeStatus(w, false, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			fmt.Sprintf("Content-Type %q: want %s or %s", r.Header.Get("Content-Type"), contentProtobuf, contentJSON), 0)
		return
	}
	tenant, err := s.tenant(r.Header.Get("Authorization"), r.Header.Get(TenantHeader))
	if err != nil {
		s.fail(w, r, isJSON, err)
		return
	}
	// Refuse before reading what would be refused after: bodies waiting
	// for room are not held in memory.
	if r.ContentLength > 0 && s.hub.Busy(r.ContentLength) {
		s.fail(w, r, isJSON, ingest.ErrBusy)
		return
	}
	b, code, err := s.body(w, r)
	if err != nil {
		writeStatus(w, isJSON, code, codes.InvalidArgument, err.Error(), 0)
		return
	}
	// Protobuf as SDKs send it is read straight into entries; anything
	// else, and JSON, is decoded in full first.
	var es []producer.Entry
	fast := false
	if !isJSON {
		es, fast = wireEntries(b, s.hub.Check)
	}
	if !fast {
		var req *collogspb.ExportLogsServiceRequest
		if isJSON {
			req, err = UnmarshalJSON(b)
		} else {
			req = &collogspb.ExportLogsServiceRequest{}
			if err = proto.Unmarshal(b, req); err != nil {
				err = fmt.Errorf("OTLP protobuf: %w", err)
			}
		}
		if err != nil {
			writeStatus(w, isJSON, http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
			return
		}
		es = entries(req, s.hub.Check)
	}
	resp, err := s.export(r.Context(), "otlp_http", tenant, es, len(b))
	if err != nil {
		s.fail(w, r, isJSON, err)
		return
	}
	writeMessage(w, isJSON, http.StatusOK, resp)
}

// body reads r's body, gunzipped when Content-Encoding says gzip, up to
// max_body_bytes; on error code is the HTTP status.
func (s *Server) body(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	var rd io.Reader = http.MaxBytesReader(w, r.Body, s.rc.MaxBodyBytes)
	switch enc := strings.ToLower(r.Header.Get("Content-Encoding")); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		rd = io.LimitReader(zr, s.rc.MaxBodyBytes+1)
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Encoding %q: want gzip or none", enc)
	}
	b, err := ingest.ReadBody(rd, r.ContentLength, s.rc.MaxBodyBytes)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || int64(len(b)) > s.rc.MaxBodyBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body exceeds producer.receivers.max_body_bytes %d", s.rc.MaxBodyBytes)
	}
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	return b, 0, nil
}

// fail answers an error of tenant or export.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, isJSON bool, err error) {
	switch {
	case errors.Is(err, errUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="quarry"`)
		writeStatus(w, isJSON, http.StatusUnauthorized, codes.Unauthenticated, err.Error(), 0)
	case errors.Is(err, errForbidden):
		writeStatus(w, isJSON, http.StatusForbidden, codes.PermissionDenied, err.Error(), 0)
	case errors.Is(err, ingest.ErrBusy):
		writeStatus(w, isJSON, http.StatusTooManyRequests, codes.ResourceExhausted, err.Error(), 1)
	case errors.Is(err, ingest.ErrUnavailable), errors.Is(err, ingest.ErrNotDurable), errors.Is(err, ingest.ErrTooManyTenants):
		writeStatus(w, isJSON, http.StatusServiceUnavailable, codes.Unavailable, err.Error(), 5)
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		writeStatus(w, isJSON, http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
	}
}

func writeMessage(w http.ResponseWriter, isJSON bool, code int, m proto.Message) {
	var b []byte
	if isJSON {
		w.Header().Set("Content-Type", contentJSON)
		b, _ = protojson.Marshal(m)
	} else {
		w.Header().Set("Content-Type", contentProtobuf)
		b, _ = proto.Marshal(m)
	}
	w.WriteHeader(code)
	w.Write(b)
}

// writeStatus answers a failure as a google.rpc.Status (OTLP/HTTP's
// error body), with Retry-After when retryAfter > 0 seconds.
func writeStatus(w http.ResponseWriter, isJSON bool, code int, c codes.Code, msg string, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeMessage(w, isJSON, code, &status.Status{Code: int32(c), Message: msg})
}
