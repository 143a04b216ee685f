package objstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/quarrylake/quarry/internal/backoff"
)

// S3 is a Store over an S3 bucket and key prefix, through minio-go.
//
// PutIfAbsent sends If-None-Match: * (a single-part PUT) and maps 412
// Precondition Failed to ErrExists. Open returns a ReaderAt whose every ReadAt
// is one ranged GET, so Parquet readers fetch only the bytes they need.
type S3 struct {
	client *minio.Client
	bucket string
	prefix string // "" or ends with "/"
	desc   string
}

// NewS3 returns a store over bucket/prefix using opts. It checks that the
// bucket exists.
func NewS3(ctx context.Context, bucket, prefix string, opts S3Options) (*S3, error) {
	return openS3(ctx, bucket, prefix, opts)
}

func openS3(ctx context.Context, bucket, prefix string, opts S3Options) (*S3, error) {
	if opts.envErr != nil {
		return nil, fmt.Errorf("s3 options: %w", opts.envErr)
	}
	if bucket == "" {
		return nil, errors.New("s3 store: empty bucket name")
	}
	prefix = strings.Trim(prefix, "/")
	desc := "s3://" + bucket
	if prefix != "" {
		desc += "/" + prefix
		prefix += "/"
	}
	endpoint := opts.Endpoint
	if endpoint == "" {
		endpoint = "s3.amazonaws.com"
	}
	var creds *credentials.Credentials
	if opts.AccessKey != "" || opts.SecretKey != "" {
		creds = credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, opts.SessionToken)
	} else {
		creds = credentials.NewIAM("")
	}
	transport, err := minio.DefaultTransport(opts.UseTLS)
	if err != nil {
		return nil, fmt.Errorf("s3 store %s: transport: %w", desc, err)
	}
	transport.ResponseHeaderTimeout = DefaultMetaTimeout
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("s3 store %s: ca file: %w", desc, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("s3 store %s: ca file %s: no PEM certificates", desc, opts.CAFile)
		}
		if transport.TLSClientConfig == nil {
			transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	client, err := minio.New(endpoint, &minio.Options{
		Creds:     creds,
		Secure:    opts.UseTLS,
		Region:    opts.Region,
		Transport: transport,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 store %s at %s: %w", desc, endpoint, err)
	}
	s := &S3{client: client, bucket: bucket, prefix: prefix, desc: desc}
	cctx, cancel := backoff.WithTimeout(ctx, DefaultMetaTimeout)
	defer cancel()
	ok, err := client.BucketExists(cctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("s3 store %s at %s: %w", desc, endpoint, s.cleanErr(err))
	}
	if !ok {
		return nil, fmt.Errorf("s3 store %s at %s: bucket does not exist", desc, endpoint)
	}
	return s, nil
}

func (s *S3) String() string { return s.desc }

func (s *S3) object(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

// cleanErr keeps the S3 error code and message and drops everything else
// (minio-go errors never carry the secret key, but request ids are noise).
func (s *S3) cleanErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	resp := minio.ToErrorResponse(err)
	if resp.Code != "" {
		return fmt.Errorf("%s (http %d): %s", resp.Code, resp.StatusCode, resp.Message)
	}
	return err
}

func isNotFound(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.StatusCode == http.StatusNotFound || resp.Code == "NoSuchKey"
}

func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	obj, err := s.object(key)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	ctx, cancel := backoff.WithTimeout(ctx, DefaultDataTimeout)
	defer cancel()
	_, err = s.client.PutObject(ctx, s.bucket, obj, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, s.cleanErr(err))
	}
	return nil
}

// conditionalConflictRetries bounds retries of 409 ConditionalRequestConflict
// (AWS: a concurrent conditional write was in progress; the outcome is
// unknown until retried).
const conditionalConflictRetries = 5

func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	obj, err := s.object(key)
	if err != nil {
		return fmt.Errorf("put-if-absent: %w", err)
	}
	ctx, cancel := backoff.WithTimeout(ctx, DefaultDataTimeout)
	defer cancel()
	wait := backoff.New(backoff.Policy{Min: 50 * time.Millisecond, Max: 50 << (conditionalConflictRetries - 1) * time.Millisecond})
	for attempt := 0; ; attempt++ {
		opts := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
		opts.SetMatchETagExcept("*")
		_, err = s.client.PutObject(ctx, s.bucket, obj, bytes.NewReader(data), int64(len(data)), opts)
		if err == nil {
			return nil
		}
		resp := minio.ToErrorResponse(err)
		switch {
		case resp.StatusCode == http.StatusPreconditionFailed || resp.Code == "PreconditionFailed":
			return fmt.Errorf("put-if-absent %s: %w", key, ErrExists)
		case (resp.StatusCode == http.StatusConflict || resp.Code == "ConditionalRequestConflict") && attempt < conditionalConflictRetries:
			if wait.Wait(ctx) != nil {
				return fmt.Errorf("put-if-absent %s: %w", key, ctx.Err())
			}
		default:
			return fmt.Errorf("put-if-absent %s: %w", key, s.cleanErr(err))
		}
	}
}

func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	ctx, cancel := backoff.WithTimeout(ctx, DefaultDataTimeout)
	defer cancel()
	o, err := s.client.GetObject(ctx, s.bucket, obj, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.readErr("get", key, err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		return nil, s.readErr("get", key, err)
	}
	return b, nil
}

func (s *S3) readErr(op, key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", op, key, s.cleanErr(err))
}

func (s *S3) Open(ctx context.Context, key string) (ReaderAtCloser, int64, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, 0, fmt.Errorf("open: %w", err)
	}
	sctx, cancel := backoff.WithTimeout(ctx, DefaultMetaTimeout)
	defer cancel()
	st, err := s.client.StatObject(sctx, s.bucket, obj, minio.StatObjectOptions{})
	if err != nil {
		return nil, 0, s.readErr("open", key, err)
	}
	return &s3Reader{s: s, ctx: ctx, key: key, obj: obj, etag: st.ETag, size: st.Size}, st.Size, nil
}

// s3Reader serves ReadAt with ranged GETs pinned to the ETag seen at Open, so
// a replaced object fails loudly instead of mixing two versions. It keeps the
// Open context (io.ReaderAt has none) so cancelling it stops reads.
type s3Reader struct {
	s    *S3
	ctx  context.Context
	key  string
	obj  string
	etag string
	size int64
}

func (r *s3Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s: negative offset", r.key)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	want := int64(len(p))
	if off+want > r.size {
		want = r.size - off
	}
	ctx, cancel := backoff.WithTimeout(r.ctx, DefaultDataTimeout)
	defer cancel()
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+want-1); err != nil {
		return 0, fmt.Errorf("read %s: %w", r.key, err)
	}
	if r.etag != "" {
		if err := opts.SetMatchETag(r.etag); err != nil {
			return 0, fmt.Errorf("read %s: %w", r.key, err)
		}
	}
	o, err := r.s.client.GetObject(ctx, r.s.bucket, r.obj, opts)
	if err != nil {
		return 0, r.s.readErr("read", r.key, err)
	}
	defer o.Close()
	n, err := io.ReadFull(o, p[:want])
	if err != nil {
		return n, r.s.readErr("read", r.key, err)
	}
	if want < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

func (r *s3Reader) Close() error { return nil }

func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	obj, err := s.object(key)
	if err != nil {
		return Info{}, fmt.Errorf("stat: %w", err)
	}
	ctx, cancel := backoff.WithTimeout(ctx, DefaultMetaTimeout)
	defer cancel()
	st, err := s.client.StatObject(ctx, s.bucket, obj, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.readErr("stat", key, err)
	}
	return Info{Key: key, Size: st.Size, ModTime: st.LastModified}, nil
}

func (s *S3) List(ctx context.Context, prefix string) ([]Info, error) {
	return s.list(ctx, prefix, "", 0)
}

// ListAfter is List of the keys after startAfter, at most limit of them
// (RangeLister): ListObjectsV2 with StartAfter, pages of at most limit
// keys, stopping at the limit.
func (s *S3) ListAfter(ctx context.Context, prefix, startAfter string, limit int) ([]Info, error) {
	return s.list(ctx, prefix, startAfter, limit)
}

func (s *S3) list(ctx context.Context, prefix, startAfter string, limit int) ([]Info, error) {
	ctx, cancel := backoff.WithTimeout(ctx, DefaultMetaTimeout)
	defer cancel() // also stops the listing when the limit ends it early
	opts := minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}
	if startAfter != "" {
		opts.StartAfter = s.prefix + startAfter
	}
	if limit > 0 {
		opts.MaxKeys = min(limit, 1000)
	}
	var out []Info
	for o := range s.client.ListObjects(ctx, s.bucket, opts) {
		if o.Err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, s.cleanErr(o.Err))
		}
		if strings.HasSuffix(o.Key, "/") {
			continue // folder marker
		}
		out = append(out, Info{Key: strings.TrimPrefix(o.Key, s.prefix), Size: o.Size, ModTime: o.LastModified})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return cutAfter(out, startAfter, limit), nil
}

func (s *S3) Delete(ctx context.Context, key string) error {
	obj, err := s.object(key)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	ctx, cancel := backoff.WithTimeout(ctx, DefaultMetaTimeout)
	defer cancel()
	if err := s.client.RemoveObject(ctx, s.bucket, obj, minio.RemoveObjectOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s: %w", key, s.cleanErr(err))
	}
	return nil
}
