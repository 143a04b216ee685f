package syslog

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/streams"
)

// Config says where the server listens.
type Config struct {
	// Addr is served over TCP and UDP (the same port); empty: off.
	Addr string
	// TLSAddr is served over TLS with TLS; empty: off.
	TLSAddr string
	TLS     *tls.Config
	// Location is the zone of RFC 3164 timestamps (default UTC).
	Location *time.Location
}

// Server receives syslog and writes it through an ingest.Hub for the
// hub's default tenant.
type Server struct {
	cfg Config
	hub *ingest.Hub
	log *slog.Logger
	rc  producer.ReceiversConfig

	tcp, tlsL net.Listener
	udp       net.PacketConn
	conns     chan struct{} // MaxConns tokens
}

// Per connection: at most this many batches handed to the hub and not
// yet durable, and a batch is cut at this many messages or bytes.
const (
	handshakeTimeout = 10 * time.Second
	connInFlight     = 4
	batchMessages    = 1024
	batchBytes       = 256 << 10
	// slabAttrs is how many attributes a connection allocates at once.
	slabAttrs = 1024
)

// Listen opens the listeners of cfg (port 0 picks one; UDP takes the TCP
// port) and returns the server; Run serves them.
func Listen(cfg Config, hub *ingest.Hub) (*Server, error) {
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	s := &Server{cfg: cfg, hub: hub, log: hub.Log().With("receiver", "syslog"), rc: hub.Config()}
	s.conns = make(chan struct{}, s.rc.MaxConns)
	if cfg.Addr != "" {
		l, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("syslog listen tcp %s: %w", cfg.Addr, err)
		}
		host, _, _ := net.SplitHostPort(cfg.Addr)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("syslog listen udp %s: %w", cfg.Addr, err)
		}
		s.tcp, s.udp = l, u
	}
	if cfg.TLSAddr != "" {
		if cfg.TLS == nil {
			s.Close()
			return nil, errors.New("syslog: TLSAddr needs a TLS config")
		}
		l, err := tls.Listen("tcp", cfg.TLSAddr, cfg.TLS)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("syslog listen tls %s: %w", cfg.TLSAddr, err)
		}
		s.tlsL = l
	}
	return s, nil
}

// Addrs are the bound addresses (nil: off).
func (s *Server) Addrs() (tcp, udp, tlsAddr net.Addr) {
	if s.tcp != nil {
		tcp, udp = s.tcp.Addr(), s.udp.LocalAddr()
	}
	if s.tlsL != nil {
		tlsAddr = s.tlsL.Addr()
	}
	return
}

// Close closes the listeners; safe to call twice.
func (s *Server) Close() {
	for _, c := range []io.Closer{s.tcp, s.tlsL, s.udp} {
		if c != nil {
			c.Close()
		}
	}
}

// Run serves until ctx ends; then it stops accepting and reading, waits
// for the batches in flight to be durable and closes the connections.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	var conns sync.WaitGroup
	stop := context.AfterFunc(ctx, s.Close)
	defer stop()
	for _, l := range []net.Listener{s.tcp, s.tlsL} {
		if l == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.accept(ctx, l, &conns) }()
	}
	if s.udp != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.serveUDP(ctx) }()
	}
	wg.Wait()
	conns.Wait()
	return nil
}

func (s *Server) accept(ctx context.Context, l net.Listener, conns *sync.WaitGroup) {
	for {
		select {
		case s.conns <- struct{}{}:
		case <-ctx.Done():
			return
		}
		c, err := l.Accept()
		if err != nil {
			<-s.conns
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("syslog accept", "err", err)
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer func() { <-s.conns }()
			s.serveConn(ctx, c)
		}()
	}
}

// serveConn reads messages from one stream connection, framed by octet
// counting when its first byte is a digit, else by newlines (RFC 6587),
// and hands them to the hub in batches, with at most connInFlight batches
// not yet durable: beyond that, and at the hub's in-flight bound, it
// stops reading.
func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	if tc, ok := c.(*tls.Conn); ok {
		// A client that never completes the handshake must not hold a
		// connection slot.
		hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			s.log.Warn("syslog tls handshake", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
	}
	tenant, ok := s.connTenant(c)
	if !ok {
		return
	}
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer stop()
	log := s.log.With("remote", c.RemoteAddr().String())
	r := bufio.NewReaderSize(c, 64<<10)
	slots := make(chan struct{}, connInFlight)
	var lost int
	var lastErr error
	var mu sync.Mutex
	defer func() {
		// Wait for the batches in flight before closing: the sender's
		// lines are durable or, at shutdown, their loss is logged.
		for range connInFlight {
			slots <- struct{}{}
		}
		mu.Lock()
		if lost > 0 {
			log.Warn("syslog lines not written at shutdown", "lines", lost, "err", lastErr)
		}
		mu.Unlock()
	}()
	// hand gives batch b to the hub until it is durable. A batch refused
	// or not made durable (its source stopped: the WAL full or failing)
	// is handed over again after a backoff, to the source that replaces
	// it, while it keeps its slot, so the connection stops reading
	// meanwhile: TCP pushes back instead of lines being dropped. Only
	// shutdown (ctx) gives up on it, as a crash would. A resend after a
	// failure the WAL did not report exactly may write lines twice.
	var hand func(b []producer.Entry, n int64, bo *backoff.Backoff)
	retry := func(b []producer.Entry, n int64, bo *backoff.Backoff, err error) {
		log.Warn("syslog batch not durable; handing it over again", "lines", len(b), "attempt", bo.Attempts()+1, "err", err)
		if bo.Wait(ctx) != nil {
			mu.Lock()
			lost, lastErr = lost+len(b), err
			mu.Unlock()
			<-slots
			return
		}
		hand(b, n, bo)
	}
	hand = func(b []producer.Entry, n int64, bo *backoff.Backoff) {
		// Not bounded by ctx: what was read is handed over even while
		// shutting down; every batch's done comes (the hub answers it
		// when its source stops).
		err := s.hub.Submit(context.WithoutCancel(ctx), "syslog", tenant, b, n, true, func(_ producer.Ingested, err error) {
			if err != nil {
				go retry(b, n, bo, err)
				return
			}
			<-slots
		})
		if err != nil {
			go retry(b, n, bo, err)
		}
	}
	fr := &framer{r: r, max: s.rc.MaxLineBytes}
	var batch []producer.Entry
	var size int64
	// now places RFC 3164 timestamps (which have no year): read once a
	// batch, not once a message.
	var now time.Time
	var attrs []streams.Attr // the messages' attributes, cut from one slab
	submit := func() {
		if len(batch) == 0 {
			return
		}
		slots <- struct{}{}
		b, n := batch, size
		// The next batch is likely as long as this one: no growing.
		batch, size = make([]producer.Entry, 0, len(b)), 0
		hand(b, n, backoff.New(backoff.Default))
	}
	for {
		msg, bad, err := fr.next()
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				log.Warn("syslog read", "err", err)
			}
			submit()
			return
		}
		if len(batch) == 0 {
			now = time.Now()
		}
		batch = append(batch, s.entry(msg, bad, now, &attrs))
		size += int64(len(msg))
		if len(batch) >= batchMessages || size >= batchBytes || r.Buffered() == 0 || fr.broken {
			submit()
		}
	}
}

// connTenant is the tenant of connection c: over TLS, its verified client
// certificate's (ingest.ClientTenantsEnv); else, and when no client
// tenants are configured, the default tenant. !ok: the certificate's
// common name is not listed and the connection is refused (logged).
func (s *Server) connTenant(c net.Conn) (string, bool) {
	tc, isTLS := c.(*tls.Conn)
	if !isTLS {
		return s.hub.DefaultTenant(), true
	}
	cn := ""
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		cn = certs[0].Subject.CommonName
	}
	tenant, ok := s.hub.ClientTenant(cn)
	if !ok {
		s.log.Warn("syslog tls client refused: its certificate names no tenant ("+ingest.ClientTenantsEnv+")", "remote", c.RemoteAddr().String(), "common_name", cn)
	}
	return tenant, ok
}

// entry parses one message (received about now); a malformed one becomes
// a Bad entry holding the raw bytes. The entry does not keep msg: its
// strings are copies. Its attributes are cut from *slab when slab is not
// nil (one allocation for many messages, not one each), their capacity
// capped so that no entry's attributes run into another's.
func (s *Server) entry(msg []byte, bad string, now time.Time, slab *[]streams.Attr) producer.Entry {
	if bad != "" {
		return producer.Entry{Text: string(msg), Bad: bad}
	}
	m, err := Parse(msg, now, s.cfg.Location)
	if err != nil {
		return producer.Entry{Text: string(msg), Bad: err.Error()}
	}
	var attrs []streams.Attr
	if slab == nil {
		attrs = m.Attrs()
	} else {
		if n := m.maxAttrs(); cap(*slab)-len(*slab) < n {
			*slab = make([]streams.Attr, 0, max(n, slabAttrs))
		}
		first := len(*slab)
		*slab = m.appendAttrs(*slab)
		attrs = (*slab)[first:len(*slab):len(*slab)]
	}
	e := producer.Entry{Text: m.Msg, Attrs: attrs, TS: m.TS}
	s.hub.Check(&e)
	if e.Bad != "" {
		e.Text = string(msg)
	}
	return e
}

func (s *Server) serveUDP(ctx context.Context) {
	buf := make([]byte, 64<<10)
	for {
		n, _, err := s.udp.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("syslog udp read", "err", err)
			continue
		}
		msg := append([]byte(nil), buf[:n]...)
		bad := ""
		if n > s.rc.MaxLineBytes {
			bad = fmt.Sprintf("datagram of %d bytes exceeds producer.receivers.max_line_bytes %d", n, s.rc.MaxLineBytes)
		}
		e := []producer.Entry{s.entry(msg, bad, time.Now(), nil)}
		// UDP cannot push back: block the reader (the kernel drops what
		// its buffer cannot hold) rather than buffer here.
		err = s.hub.Submit(context.WithoutCancel(ctx), "syslog", s.hub.DefaultTenant(), e, int64(n), true, func(_ producer.Ingested, err error) {
			if err != nil {
				s.log.Warn("syslog udp message not written", "err", err)
			}
		})
		if err != nil {
			s.log.Warn("syslog udp message refused", "err", err)
		}
	}
}

// framer cuts a stream into messages (RFC 6587).
type framer struct {
	r    *bufio.Reader
	max  int
	mode byte // 0 undecided, 'o' octet counting, 'n' newline
	// broken: the octet-counted framing is lost; the rest of the
	// connection is dead-lettered as it comes (rest), never dropped.
	broken  bool
	discard [4096]byte
}

// deadPrefix is how much of an over-long message is kept for the
// dead-letter stream.
const deadPrefix = 64 << 10

// next returns the next message; bad is set when it is to be
// dead-lettered (too long, broken framing), msg then holds its start. msg
// may be the reader's buffer: it is valid until the next call (a message
// that fits the buffer is not copied).
func (f *framer) next() (msg []byte, bad string, err error) {
	if f.broken {
		return f.rest()
	}
	if f.mode == 0 {
		b, err := f.r.Peek(1)
		if err != nil {
			return nil, "", err
		}
		f.mode = 'n'
		if b[0] >= '1' && b[0] <= '9' {
			f.mode = 'o'
		}
	}
	if f.mode == 'o' {
		return f.octet()
	}
	return f.newline()
}

func (f *framer) octet() ([]byte, string, error) {
	n := 0
	var digits []byte
	for {
		c, err := f.r.ReadByte()
		if err != nil {
			if len(digits) == 0 && errors.Is(err, io.EOF) {
				return nil, "", io.EOF
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, "", err
		}
		if c == ' ' && len(digits) > 0 {
			break
		}
		if c < '0' || c > '9' || len(digits) >= 9 {
			// The framing is lost: this message is the bytes read and
			// what is buffered; the rest of the connection follows as
			// it comes (rest).
			f.broken = true
			rest, _ := f.r.Peek(min(f.r.Buffered(), deadPrefix))
			msg := append(append(digits, c), rest...)
			_, _ = f.r.Discard(len(rest)) // Peek returned them: they are buffered
			return msg, fmt.Sprintf("octet-counted framing broken: byte %q where the length or its space belongs", c), nil
		}
		n = n*10 + int(c-'0')
		digits = append(digits, c)
	}
	if n > f.max {
		msg := make([]byte, min(n, deadPrefix))
		if _, err := io.ReadFull(f.r, msg); err != nil {
			return nil, "", err
		}
		if _, err := f.r.Discard(n - len(msg)); err != nil {
			return nil, "", err
		}
		return msg, fmt.Sprintf("message of %d bytes exceeds producer.receivers.max_line_bytes %d", n, f.max), nil
	}
	if n <= f.r.Size() {
		// In the buffer: no copy.
		msg, err := f.r.Peek(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, "", err
		}
		_, _ = f.r.Discard(n) // Peek(n) succeeded: n bytes are buffered
		return msg, "", nil
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(f.r, msg); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, "", err
	}
	return msg, "", nil
}

// brokenRest is the reason of the dead letters that follow broken
// framing.
const brokenRest = "octet-counted framing broken earlier on this connection: the bytes that followed"

// rest returns the bytes after broken framing as they come: what is
// buffered, at most deadPrefix, waiting only when nothing is. msg is the
// reader's buffer, valid until the next call.
func (f *framer) rest() ([]byte, string, error) {
	if _, err := f.r.Peek(1); err != nil {
		return nil, "", err
	}
	msg, _ := f.r.Peek(min(f.r.Buffered(), deadPrefix))
	_, _ = f.r.Discard(len(msg)) // Peek returned them: they are buffered
	return msg, brokenRest, nil
}

func (f *framer) newline() ([]byte, string, error) {
	for {
		msg, bad, err := f.line()
		// An empty line between messages is no message.
		if err != nil || bad != "" || len(msg) > 0 {
			return msg, bad, err
		}
	}
}

func (f *framer) line() ([]byte, string, error) {
	var msg []byte
	long := 0
	for first := true; ; first = false {
		frag, err := f.r.ReadSlice('\n')
		if first && err == nil && len(frag) <= f.max+1 {
			// The whole line is in the buffer: no copy.
			msg = trimEOL(frag)
			if len(msg) > f.max {
				return msg, fmt.Sprintf("message of %d bytes exceeds producer.receivers.max_line_bytes %d", len(msg), f.max), nil
			}
			return msg, "", nil
		}
		if long == 0 && len(msg)+len(frag) <= f.max+1 {
			msg = append(msg, frag...)
		} else {
			if long == 0 {
				long = len(msg)
				msg = msg[:min(len(msg), deadPrefix)]
			}
			long += len(frag)
			if room := deadPrefix - len(msg); room > 0 {
				msg = append(msg, frag[:min(room, len(frag))]...)
			}
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && (len(msg) > 0 || long > 0) {
			break // a last message without its '\n'
		}
		return nil, "", err
	}
	if long > 0 {
		return trimEOL(msg), fmt.Sprintf("message of %d bytes exceeds producer.receivers.max_line_bytes %d", long, f.max), nil
	}
	msg = trimEOL(msg)
	if len(msg) > f.max {
		return msg, fmt.Sprintf("message of %d bytes exceeds producer.receivers.max_line_bytes %d", len(msg), f.max), nil
	}
	return msg, "", nil
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}
