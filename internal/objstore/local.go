package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// tempPrefix starts the names of a local store's temporary files; List skips
// them and keys may not use it.
const tempPrefix = ".tmp-"

// Local is a Store over a local folder.
//
// Put writes a temporary file in the key's directory, fsyncs it, renames it
// over the key and fsyncs the directory, so readers see the old or the new
// object, never a partial one, and a returned nil means durable.
// PutIfAbsent hard-links the fsynced temporary file to the key: link fails
// when the key exists, so of two creators exactly one wins and the object
// appears complete.
type Local struct {
	root   string
	noSync bool
}

// NewLocal returns a store rooted at dir, creating it if missing.
func NewLocal(dir string) (*Local, error) {
	if dir == "" {
		return nil, errors.New("local store: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local store %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("local store %s: %w", abs, err)
	}
	return &Local{root: abs}, nil
}

// NewLocalNoSync is NewLocal without any fsync: a returned nil does not
// mean durable. It is for tests and benchmarks that measure sizes and
// counts over very many writes, never for a lake.
func NewLocalNoSync(dir string) (*Local, error) {
	l, err := NewLocal(dir)
	if err != nil {
		return nil, err
	}
	l.noSync = true
	return l, nil
}

// Root is the folder the store lives in.
func (l *Local) Root() string { return l.root }

func (l *Local) String() string { return "file://" + filepath.ToSlash(l.root) }

// ValidateKey reports whether key is a valid object key: a relative
// '/'-separated path without empty, "." or ".." elements.
func ValidateKey(key string) error {
	if !fs.ValidPath(key) || key == "." {
		return fmt.Errorf("invalid key %q: want a relative path without empty, . or .. elements", key)
	}
	if strings.Contains(key, "\\") {
		return fmt.Errorf("invalid key %q: backslash", key)
	}
	if strings.HasPrefix(path.Base(key), tempPrefix) {
		return fmt.Errorf("invalid key %q: names starting with %s are reserved", key, tempPrefix)
	}
	return nil
}

func (l *Local) file(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(l.root, filepath.FromSlash(key)), nil
}

// mkdirs creates dir and fsyncs the parents of every directory it created.
func (l *Local) mkdirs(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	var created []string
	for d := dir; d != l.root && len(d) > len(l.root); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		if err := l.syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

func (l *Local) syncDir(dir string) error {
	if l.noSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeTemp writes data to a new fsynced temporary file in dir.
func (l *Local) writeTemp(dir string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, err = f.Write(data)
	if err == nil && !l.noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func (l *Local) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	name, err := l.file(key)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	dir := filepath.Dir(name)
	if err := l.mkdirs(dir); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	tmp, err := l.writeTemp(dir, data)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := l.syncDir(dir); err != nil {
		return fmt.Errorf("put %s: sync dir: %w", key, err)
	}
	return nil
}

func (l *Local) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	name, err := l.file(key)
	if err != nil {
		return fmt.Errorf("put-if-absent: %w", err)
	}
	dir := filepath.Dir(name)
	if err := l.mkdirs(dir); err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	if _, err := os.Lstat(name); err == nil {
		return fmt.Errorf("put-if-absent %s: %w", key, ErrExists)
	}
	tmp, err := l.writeTemp(dir, data)
	if err != nil {
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("put-if-absent %s: %w", key, ErrExists)
		}
		return fmt.Errorf("put-if-absent %s: %w", key, err)
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("put-if-absent %s: remove temp: %w", key, err)
	}
	if err := l.syncDir(dir); err != nil {
		return fmt.Errorf("put-if-absent %s: sync dir: %w", key, err)
	}
	return nil
}

func notFound(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || isDirErr(err) {
		return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

func isDirErr(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "is a directory")
}

func (l *Local) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	name, err := l.file(key)
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, notFound("get", key, err)
	}
	return b, nil
}

func (l *Local) Open(ctx context.Context, key string) (ReaderAtCloser, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", key, err)
	}
	name, err := l.file(key)
	if err != nil {
		return nil, 0, fmt.Errorf("open: %w", err)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, notFound("open", key, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("open %s: %w", key, err)
	}
	if st.IsDir() {
		f.Close()
		return nil, 0, fmt.Errorf("open %s: %w", key, ErrNotFound)
	}
	return f, st.Size(), nil
}

func (l *Local) Stat(ctx context.Context, key string) (Info, error) {
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, err)
	}
	name, err := l.file(key)
	if err != nil {
		return Info{}, fmt.Errorf("stat: %w", err)
	}
	st, err := os.Stat(name)
	if err != nil {
		return Info{}, notFound("stat", key, err)
	}
	if st.IsDir() {
		return Info{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	return Info{Key: key, Size: st.Size(), ModTime: st.ModTime()}, nil
}

func (l *Local) List(ctx context.Context, prefix string) ([]Info, error) {
	return l.list(ctx, prefix, "", 0)
}

// ListAfter is List of the keys after startAfter, at most limit of them
// (RangeLister). It reads every name in the folders it walks but the
// metadata of the listed files only.
func (l *Local) ListAfter(ctx context.Context, prefix, startAfter string, limit int) ([]Info, error) {
	return l.list(ctx, prefix, startAfter, limit)
}

func (l *Local) list(ctx context.Context, prefix, startAfter string, limit int) ([]Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	if strings.Contains(prefix, "..") || strings.HasPrefix(prefix, "/") || strings.Contains(prefix, "\\") {
		return nil, fmt.Errorf("list %q: invalid prefix", prefix)
	}
	// Walk the deepest directory the prefix names in full.
	start := l.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(l.root, filepath.FromSlash(prefix[:i]))
	}
	var out []Info
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // vanished (or never existed): nothing to list
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if startAfter != "" && p != start && skipDir(key, startAfter) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(key, prefix) || key <= startAfter {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		out = append(out, Info{Key: key, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return cutAfter(out, startAfter, limit), nil
}

func (l *Local) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	name, err := l.file(key)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}
