// Package syncbuf is a goroutine-safe output buffer: the sink for a child
// process's output or a logger that a test reads while it is written.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent Write and String.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Tail is the last n bytes written so far, marked with a leading "..."
// when cut.
func (s *Buffer) Tail(n int) string {
	out := s.String()
	if len(out) > n {
		return "..." + out[len(out)-n:]
	}
	return out
}
