package otlp

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // gzip-compressed requests
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quarrylake/quarry/producer/ingest"
)

// grpcLogs serves LogsService/Export.
type grpcLogs struct {
	collogspb.UnimplementedLogsServiceServer
	s *Server
}

func (s *Server) newGRPC(tc *tls.Config) *grpc.Server {
	opts := []grpc.ServerOption{
		// A larger message is refused (RESOURCE_EXHAUSTED) before it is
		// decoded.
		grpc.MaxRecvMsgSize(int(min(s.rc.MaxBodyBytes, 1<<31-1))),
		grpc.ConnectionTimeout(10 * time.Second),
	}
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	g := grpc.NewServer(opts...)
	collogspb.RegisterLogsServiceServer(g, &grpcLogs{s: s})
	return g
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Export writes the request's records and answers once they are durable.
func (g *grpcLogs) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	tenant, err := g.s.tenant(first(md, "authorization"), first(md, "x-quarry-tenant"))
	if err == nil {
		var resp *collogspb.ExportLogsServiceResponse
		if resp, err = g.s.export(ctx, "otlp_grpc", tenant, entries(req, g.s.hub.Check), proto.Size(req)); err == nil {
			return resp, nil
		}
	}
	return nil, grpcError(ctx, err)
}

// grpcError maps an error of tenant or export to its status; the
// retryable ones carry RetryInfo, without which OTLP exporters do not
// resend RESOURCE_EXHAUSTED.
func grpcError(ctx context.Context, err error) error {
	retry := func(c codes.Code, d time.Duration) error {
		st, derr := status.New(c, err.Error()).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
		if derr != nil {
			return status.Error(c, err.Error())
		}
		return st.Err()
	}
	switch {
	case errors.Is(err, errUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, errForbidden):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ingest.ErrBusy):
		return retry(codes.ResourceExhausted, time.Second)
	case errors.Is(err, ingest.ErrUnavailable), errors.Is(err, ingest.ErrNotDurable), errors.Is(err, ingest.ErrTooManyTenants):
		return retry(codes.Unavailable, 5*time.Second)
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	return status.Error(codes.InvalidArgument, err.Error())
}
