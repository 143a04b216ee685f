package objstore

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Default timeouts applied when the caller's context has no deadline.
const (
	// DefaultMetaTimeout bounds Stat, List, Delete and opening a reader.
	DefaultMetaTimeout = 30 * time.Second
	// DefaultDataTimeout bounds Put, PutIfAbsent, Get and each ReadAt.
	DefaultDataTimeout = 5 * time.Minute
)

// S3Options configures the S3 store. Credentials never appear in String,
// in slog output or in errors.
type S3Options struct {
	// Endpoint is host[:port] of the S3 service; empty means AWS
	// (s3.amazonaws.com).
	Endpoint string
	// AccessKey and SecretKey are static credentials; when both are empty
	// the store asks the instance metadata service (IAM role).
	AccessKey    string
	SecretKey    string
	SessionToken string
	// Region of the bucket; empty lets the client discover it.
	Region string
	// UseTLS selects https.
	UseTLS bool
	// CAFile is an optional PEM file of extra root certificates.
	CAFile string

	// envErr records a malformed environment value for Open to report.
	envErr error
}

// String describes the options without credentials.
func (o S3Options) String() string {
	scheme := "http"
	if o.UseTLS {
		scheme = "https"
	}
	ep := o.Endpoint
	if ep == "" {
		ep = "s3.amazonaws.com"
	}
	creds := "iam"
	if o.AccessKey != "" || o.SecretKey != "" {
		creds = "static"
	}
	s := fmt.Sprintf("%s://%s region=%q credentials=%s", scheme, ep, o.Region, creds)
	if o.CAFile != "" {
		s += " ca=" + o.CAFile
	}
	return s
}

// GoString keeps %#v from printing credentials.
func (o S3Options) GoString() string { return "objstore.S3Options{" + o.String() + "}" }

// LogValue keeps slog from printing credentials.
func (o S3Options) LogValue() slog.Value { return slog.StringValue(o.String()) }

// S3OptionsFromEnv reads the S3 options from the environment through getenv
// (normally os.Getenv):
//
//	QUARRY_S3_ENDPOINT       host[:port], empty = AWS
//	QUARRY_S3_ACCESS_KEY     falls back to AWS_ACCESS_KEY_ID
//	QUARRY_S3_SECRET_KEY     falls back to AWS_SECRET_ACCESS_KEY
//	QUARRY_S3_SESSION_TOKEN  falls back to AWS_SESSION_TOKEN
//	QUARRY_S3_REGION         falls back to AWS_REGION
//	QUARRY_S3_TLS            true/false, default true
//	QUARRY_S3_CA_FILE        extra root CAs (PEM)
//
// A malformed QUARRY_S3_TLS is reported by Open.
func S3OptionsFromEnv(getenv func(string) string) S3Options {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := strings.TrimSpace(getenv(k)); v != "" {
				return v
			}
		}
		return ""
	}
	o := S3Options{
		Endpoint:     first("QUARRY_S3_ENDPOINT"),
		AccessKey:    first("QUARRY_S3_ACCESS_KEY", "AWS_ACCESS_KEY_ID"),
		SecretKey:    first("QUARRY_S3_SECRET_KEY", "AWS_SECRET_ACCESS_KEY"),
		SessionToken: first("QUARRY_S3_SESSION_TOKEN", "AWS_SESSION_TOKEN"),
		Region:       first("QUARRY_S3_REGION", "AWS_REGION"),
		CAFile:       first("QUARRY_S3_CA_FILE"),
		UseTLS:       true,
	}
	if v := first("QUARRY_S3_TLS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			o.envErr = fmt.Errorf("QUARRY_S3_TLS=%q: want true or false", v)
		} else {
			o.UseTLS = b
		}
	}
	// Endpoints given as URLs decide TLS themselves.
	if u, err := url.Parse(o.Endpoint); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		o.Endpoint = u.Host
		o.UseTLS = u.Scheme == "https"
	}
	return o
}

// Open opens the store a lake URL names:
//
//	file:///abs/path or a plain path   a local folder (created if missing)
//	s3://bucket[/prefix]               an S3 bucket through minio-go
//
// opts is used only for s3 URLs.
func Open(ctx context.Context, lakeURL string, opts S3Options) (Store, error) {
	switch {
	case strings.HasPrefix(lakeURL, "s3://"):
		u, err := url.Parse(lakeURL)
		if err != nil {
			return nil, fmt.Errorf("lake url %q: %w", lakeURL, err)
		}
		if u.User != nil {
			return nil, fmt.Errorf("lake url s3://%s: credentials in the url are not supported, use QUARRY_S3_ACCESS_KEY/QUARRY_S3_SECRET_KEY", u.Host)
		}
		return openS3(ctx, u.Host, strings.Trim(u.Path, "/"), opts)
	case strings.HasPrefix(lakeURL, "file://"):
		u, err := url.Parse(lakeURL)
		if err != nil {
			return nil, fmt.Errorf("lake url %q: %w", lakeURL, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("lake url %q: file urls need an absolute path (file:///abs/path)", lakeURL)
		}
		return NewLocal(u.Path)
	case strings.Contains(lakeURL, "://"):
		return nil, fmt.Errorf("lake url %q: unsupported scheme (want file:// or s3://)", lakeURL)
	case lakeURL == "":
		return nil, fmt.Errorf("lake url is empty")
	default:
		abs, err := filepath.Abs(lakeURL)
		if err != nil {
			return nil, fmt.Errorf("lake path %q: %w", lakeURL, err)
		}
		return NewLocal(abs)
	}
}
