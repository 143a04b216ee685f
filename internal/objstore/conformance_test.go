package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/objstore/miniotest"
)

// conformance runs the Store contract against the stores newStore makes
// (each call a fresh, empty store).
func conformance(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	ctx := context.Background()

	t.Run("PutGetStat", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Get(ctx, "a/b.txt"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("get missing: got %v, want ErrNotFound", err)
		}
		if _, err := s.Stat(ctx, "a/b.txt"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("stat missing: got %v, want ErrNotFound", err)
		}
		if _, _, err := s.Open(ctx, "a/b.txt"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("open missing: got %v, want ErrNotFound", err)
		}
		if err := s.Put(ctx, "a/b.txt", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "a/b.txt", []byte("hello world")); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "a/b.txt")
		if err != nil || string(got) != "hello world" {
			t.Fatalf("get = %q, %v", got, err)
		}
		info, err := s.Stat(ctx, "a/b.txt")
		if err != nil || info.Key != "a/b.txt" || info.Size != 11 || time.Since(info.ModTime) > time.Hour {
			t.Fatalf("stat = %+v, %v", info, err)
		}
		if err := s.Put(ctx, "empty", nil); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, "empty"); err != nil || len(got) != 0 {
			t.Fatalf("get empty = %q, %v", got, err)
		}
	})

	t.Run("PutIfAbsent", func(t *testing.T) {
		s := newStore(t)
		if err := s.PutIfAbsent(ctx, "log/0.json", []byte("first")); err != nil {
			t.Fatal(err)
		}
		if err := s.PutIfAbsent(ctx, "log/0.json", []byte("second")); !errors.Is(err, objstore.ErrExists) {
			t.Fatalf("second put-if-absent: got %v, want ErrExists", err)
		}
		if got, _ := s.Get(ctx, "log/0.json"); string(got) != "first" {
			t.Fatalf("content = %q, want first", got)
		}
	})

	t.Run("PutIfAbsentRace", func(t *testing.T) {
		s := newStore(t)
		for round := range 10 {
			key := fmt.Sprintf("_delta_log/%020d.json", round)
			const n = 2
			var wg sync.WaitGroup
			errs := make([]error, n)
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					errs[i] = s.PutIfAbsent(ctx, key, bytes.Repeat([]byte{byte('a' + i)}, 64<<10))
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil:
					if winner >= 0 {
						t.Fatalf("round %d: both creators won", round)
					}
					winner = i
				case !errors.Is(err, objstore.ErrExists):
					t.Fatalf("round %d: creator %d: %v", round, i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: no creator won: %v", round, errs)
			}
			got, err := s.Get(ctx, key)
			if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte('a' + winner)}, 64<<10)) {
				t.Fatalf("round %d: content is not the winner's (%d bytes, %v)", round, len(got), err)
			}
		}
	})

	t.Run("OpenReadAt", func(t *testing.T) {
		s := newStore(t)
		data := make([]byte, 100_000)
		for i := range data {
			data[i] = byte(i * 7)
		}
		if err := s.Put(ctx, "f.parquet", data); err != nil {
			t.Fatal(err)
		}
		r, size, err := s.Open(ctx, "f.parquet")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if size != int64(len(data)) {
			t.Fatalf("size = %d, want %d", size, len(data))
		}
		for _, c := range []struct{ off, n int }{{0, 10}, {99_990, 10}, {50_000, 4096}, {12345, 1}} {
			p := make([]byte, c.n)
			if n, err := r.ReadAt(p, int64(c.off)); err != nil || n != c.n || !bytes.Equal(p, data[c.off:c.off+c.n]) {
				t.Fatalf("ReadAt(%d, %d) = %d, %v", c.off, c.n, n, err)
			}
		}
		p := make([]byte, 20)
		n, err := r.ReadAt(p, 99_990)
		if n != 10 || !errors.Is(err, io.EOF) || !bytes.Equal(p[:10], data[99_990:]) {
			t.Fatalf("ReadAt past end = %d, %v; want 10, EOF", n, err)
		}
	})

	t.Run("ListDelete", func(t *testing.T) {
		s := newStore(t)
		keys := []string{"t/a.txt", "t/a/b/c", "t/a/b/d", "t/b", "u/x", "t.txt"}
		for _, k := range keys {
			if err := s.Put(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			prefix string
			want   []string
		}{
			{"", []string{"t.txt", "t/a.txt", "t/a/b/c", "t/a/b/d", "t/b", "u/x"}},
			{"t/", []string{"t/a.txt", "t/a/b/c", "t/a/b/d", "t/b"}},
			{"t/a", []string{"t/a.txt", "t/a/b/c", "t/a/b/d"}},
			{"t/a/", []string{"t/a/b/c", "t/a/b/d"}},
			{"nope/", nil},
		} {
			got, err := s.List(ctx, c.prefix)
			if err != nil {
				t.Fatal(err)
			}
			var gotKeys []string
			for _, i := range got {
				gotKeys = append(gotKeys, i.Key)
				if i.Size != int64(len(i.Key)) {
					t.Errorf("list %q: %s size %d", c.prefix, i.Key, i.Size)
				}
			}
			if fmt.Sprint(gotKeys) != fmt.Sprint(c.want) {
				t.Errorf("list %q = %v, want %v", c.prefix, gotKeys, c.want)
			}
		}
		for _, c := range []struct {
			prefix, after string
			limit         int
			want          []string
		}{
			{"t/", "", 0, []string{"t/a.txt", "t/a/b/c", "t/a/b/d", "t/b"}},
			{"t/", "t/a.txt", 0, []string{"t/a/b/c", "t/a/b/d", "t/b"}},
			{"t/", "t/a.txt", 2, []string{"t/a/b/c", "t/a/b/d"}},
			{"t/", "t/a/b/c", 1, []string{"t/a/b/d"}},
			{"t/", "t/a/", 0, []string{"t/a/b/c", "t/a/b/d", "t/b"}},
			{"t/", "t/a~", 0, []string{"t/b"}},
			{"t/", "t/b", 0, nil},
			{"", "t/b", 5, []string{"u/x"}},
			{"t/a", "t/", 1, []string{"t/a.txt"}},
		} {
			got, err := objstore.ListAfter(ctx, s, c.prefix, c.after, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			var gotKeys []string
			for _, i := range got {
				gotKeys = append(gotKeys, i.Key)
			}
			if fmt.Sprint(gotKeys) != fmt.Sprint(c.want) {
				t.Errorf("list %q after %q limit %d = %v, want %v", c.prefix, c.after, c.limit, gotKeys, c.want)
			}
		}
		if _, ok := s.(objstore.RangeLister); !ok {
			t.Errorf("%T lists every key for a ListAfter", s)
		}
		if err := s.Delete(ctx, "t/b"); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "t/b"); err != nil {
			t.Fatalf("delete missing: %v", err)
		}
		if _, err := s.Get(ctx, "t/b"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("get deleted: %v", err)
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		s := newStore(t)
		for _, k := range []string{"", "/abs", "a/../b", "..", "a//b", "a/", "./a", ".tmp-x"} {
			if err := s.Put(ctx, k, []byte("x")); err == nil {
				t.Errorf("put %q: no error", k)
			}
			if err := s.PutIfAbsent(ctx, k, []byte("x")); err == nil {
				t.Errorf("put-if-absent %q: no error", k)
			}
			if _, err := s.Get(ctx, k); err == nil || errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("get %q: %v, want invalid key", k, err)
			}
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		s := newStore(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Put(cctx, "x", []byte("x")); !errors.Is(err, context.Canceled) {
			t.Fatalf("put with cancelled ctx: %v", err)
		}
	})
}

func TestLocalConformance(t *testing.T) {
	conformance(t, func(t *testing.T) objstore.Store {
		s, err := objstore.Open(context.Background(), "file://"+t.TempDir(), objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// The fault wrapper with no rules is a transparent Store.
func TestFaultyConformance(t *testing.T) {
	conformance(t, func(t *testing.T) objstore.Store {
		s, err := objstore.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return objstore.NewFaulty(s, objstore.NewFaults(1))
	})
}

func TestMinIOConformance(t *testing.T) {
	endpoint, ak, sk := miniotest.Start(t)
	var mu sync.Mutex
	n := 0
	conformance(t, func(t *testing.T) objstore.Store {
		mu.Lock()
		n++
		bucket := fmt.Sprintf("conf-%d", n)
		mu.Unlock()
		miniotest.MakeBucket(t, endpoint, ak, sk, bucket)
		s, err := objstore.Open(context.Background(), "s3://"+bucket+"/lake/root", objstore.S3Options{
			Endpoint: endpoint, AccessKey: ak, SecretKey: sk, UseTLS: false,
		})
		if err != nil {
			t.Fatal(err)
		}
		if s.String() != "s3://"+bucket+"/lake/root" {
			t.Fatalf("String() = %q", s.String())
		}
		return s
	})
}

func TestS3OpenErrorsHideSecrets(t *testing.T) {
	endpoint, ak, _ := miniotest.Start(t)
	const secret = "very-secret-value-123"
	_, err := objstore.Open(context.Background(), "s3://nobucket", objstore.S3Options{
		Endpoint: endpoint, AccessKey: ak, SecretKey: secret,
	})
	if err == nil {
		t.Fatal("open with a wrong secret: no error")
	}
	if bytes.Contains([]byte(err.Error()), []byte(secret)) {
		t.Fatalf("error leaks the secret: %v", err)
	}
}
