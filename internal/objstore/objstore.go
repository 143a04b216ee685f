// Package objstore is quarry's object storage: a small interface with a local
// folder implementation, an S3 implementation through minio-go and a
// fault-injecting wrapper for tests.
//
// Keys are '/'-separated paths relative to the store's root (the lake root).
package objstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrExists: a create-only write found the key already present.
	ErrExists = errors.New("object already exists")
)

// Info describes a stored object.
type Info struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Store is object storage. Every method honours ctx and has a default
// timeout when ctx has no deadline.
type Store interface {
	// Put writes data under key, replacing any object there. After Put
	// returns nil the object is durable (fsynced on a local folder).
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent writes data under key only if no object is there; it
	// returns ErrExists otherwise. Of two concurrent calls at most one
	// succeeds (If-None-Match: * on S3, exclusive create on a folder).
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Get reads the whole object, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Open returns a reader of the object that supports ReadAt, for Parquet
	// readers, and its size.
	Open(ctx context.Context, key string) (ReaderAtCloser, int64, error)
	// Stat returns the object's info, or ErrNotFound.
	Stat(ctx context.Context, key string) (Info, error)
	// List returns every object whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// String describes the store without credentials, e.g. "file:///data/lake".
	String() string
}

// ReaderAtCloser reads at offsets and is closed after use.
type ReaderAtCloser interface {
	io.ReaderAt
	io.Closer
}
