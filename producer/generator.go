package producer

import (
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"strings"
	"time"
)

// Generator produces realistic, deterministic log lines for several
// tenants: web access logs, auth and sshd events with users and IPs, slow
// queries, pod events, stack traces, payments, GC traces, JSON logs and more
// (about 30 families) with variable numbers, IPs, UUIDs, durations, paths
// and hex ids. Each tenant's stream depends only on (seed, tenant): its
// first n lines are the same for every n, so a generated source resumes
// like a file.
type Generator struct {
	seed    int64
	tenants []string
}

// NewGenerator returns a generator of the tenants' streams.
func NewGenerator(seed int64, tenants []string) *Generator {
	return &Generator{seed: seed, tenants: append([]string(nil), tenants...)}
}

// Tenants are the generator's tenants.
func (g *Generator) Tenants() []string { return append([]string(nil), g.tenants...) }

// Reader returns the first n lines of tenant's stream, each ending in '\n'.
func (g *Generator) Reader(tenant string, n int) io.Reader {
	return &genReader{s: g.stream(tenant), left: n}
}

// Lines returns the first n lines of tenant's stream, without '\n'.
func (g *Generator) Lines(tenant string, n int) []string {
	s := g.stream(tenant)
	out := make([]string, n)
	for i := range out {
		out[i] = s.next()
	}
	return out
}

func (g *Generator) stream(tenant string) *genStream {
	h := fnv.New64a()
	h.Write([]byte(tenant))
	r := rand.New(rand.NewPCG(uint64(g.seed), h.Sum64()))
	s := &genStream{r: r, t: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}
	// Tenant-specific vocabulary and family mix.
	for i := 0; i < 40; i++ {
		s.users = append(s.users, userNames[r.IntN(len(userNames))]+fmt.Sprint(r.IntN(100)))
	}
	for i := 0; i < 12; i++ {
		s.hosts = append(s.hosts, fmt.Sprintf("%s-%d", hostKinds[r.IntN(len(hostKinds))], r.IntN(40)))
	}
	s.weights = make([]int, len(families))
	total := 0
	for i := range s.weights {
		w := 1 + r.IntN(10)
		if r.IntN(4) == 0 {
			w = 0 // this tenant does not log this family
		}
		s.weights[i] = w
		total += w
	}
	if total == 0 {
		s.weights[0], total = 1, 1
	}
	s.total = total
	return s
}

type genReader struct {
	s    *genStream
	left int
	line []byte // the current line and its '\n'
	buf  []byte // the part of line not read yet
}

// Read fills p with as many lines as fit: a reader that returned one line
// per call would make its consumer flush a batch per line (the line
// sources hand their lines over before every read, see flushReader).
func (g *genReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(g.buf) == 0 {
			if g.left == 0 {
				break
			}
			g.left--
			g.line = append(append(g.line[:0], g.s.next()...), '\n')
			g.buf = g.line
		}
		c := copy(p[n:], g.buf)
		g.buf = g.buf[c:]
		n += c
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

type genStream struct {
	r       *rand.Rand
	t       time.Time
	users   []string
	hosts   []string
	weights []int
	total   int
	queue   []string // lines of a multi-line event still to come
}

func (s *genStream) next() string {
	if len(s.queue) > 0 {
		l := s.queue[0]
		s.queue = s.queue[1:]
		return l
	}
	s.t = s.t.Add(time.Duration(s.r.IntN(20_000)) * time.Microsecond)
	x := s.r.IntN(s.total)
	for i, w := range s.weights {
		if x < w {
			lines := families[i](s)
			s.queue = append(s.queue, lines[1:]...)
			return lines[0]
		}
		x -= w
	}
	return families[0](s)[0]
}

// Variable fields.
func (s *genStream) n(lo, hi int) int { return lo + s.r.IntN(hi-lo+1) }
func (s *genStream) pick(xs []string) string {
	return xs[s.r.IntN(len(xs))]
}
func (s *genStream) user() string { return s.pick(s.users) }
func (s *genStream) host() string { return s.pick(s.hosts) }
func (s *genStream) ip() string {
	switch s.r.IntN(3) {
	case 0:
		return fmt.Sprintf("10.%d.%d.%d", s.r.IntN(256), s.r.IntN(256), 1+s.r.IntN(254))
	case 1:
		return fmt.Sprintf("192.168.%d.%d", s.r.IntN(256), 1+s.r.IntN(254))
	}
	return fmt.Sprintf("%d.%d.%d.%d", 1+s.r.IntN(223), s.r.IntN(256), s.r.IntN(256), 1+s.r.IntN(254))
}
func (s *genStream) hex(n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[s.r.IntN(16)]
	}
	return string(b)
}
func (s *genStream) uuid() string {
	return s.hex(8) + "-" + s.hex(4) + "-4" + s.hex(3) + "-" + s.pick([]string{"8", "9", "a", "b"}) + s.hex(3) + "-" + s.hex(12)
}
func (s *genStream) ms() int { return int(s.r.ExpFloat64()*40) + 1 }
func (s *genStream) dur() string {
	d := time.Duration(s.r.ExpFloat64()*50*float64(time.Millisecond)) + time.Microsecond*time.Duration(s.r.IntN(1000))
	return d.String()
}

// The timestamps are written by hand: time.Format was a tenth of the
// generator's CPU. s.t is always UTC; TestGeneratorTimestamps holds them
// equal to time.Format's.
func (s *genStream) iso() string { // 2006-01-02T15:04:05.000Z
	y, mo, d := s.t.Date()
	h, mi, sec := s.t.Clock()
	b := make([]byte, 0, 24)
	b = appendDigits(b, y, 4)
	b = append(b, '-')
	b = appendDigits(b, int(mo), 2)
	b = append(b, '-')
	b = appendDigits(b, d, 2)
	b = append(b, 'T')
	b = appendClock(b, h, mi, sec)
	b = append(b, '.')
	b = appendDigits(b, s.t.Nanosecond()/1e6, 3)
	return string(append(b, 'Z'))
}
func (s *genStream) syslog() string { // Jan _2 15:04:05
	_, mo, d := s.t.Date()
	h, mi, sec := s.t.Clock()
	b := make([]byte, 0, 15)
	b = append(b, mo.String()[:3]...)
	b = append(b, ' ')
	if d < 10 {
		b = append(b, ' ')
		b = appendDigits(b, d, 1)
	} else {
		b = appendDigits(b, d, 2)
	}
	b = append(b, ' ')
	return string(appendClock(b, h, mi, sec))
}
func (s *genStream) clf() string { // 02/Jan/2006:15:04:05 -0700
	y, mo, d := s.t.Date()
	h, mi, sec := s.t.Clock()
	b := make([]byte, 0, 26)
	b = appendDigits(b, d, 2)
	b = append(b, '/')
	b = append(b, mo.String()[:3]...)
	b = append(b, '/')
	b = appendDigits(b, y, 4)
	b = append(b, ':')
	b = appendClock(b, h, mi, sec)
	return string(append(b, " +0000"...))
}

func appendClock(b []byte, h, m, s int) []byte {
	b = appendDigits(b, h, 2)
	b = append(b, ':')
	b = appendDigits(b, m, 2)
	b = append(b, ':')
	return appendDigits(b, s, 2)
}

// appendDigits appends v (>= 0) in exactly w decimal digits.
func appendDigits(b []byte, v, w int) []byte {
	for i := w - 1; i >= 0; i-- {
		d := v
		for range i {
			d /= 10
		}
		b = append(b, byte('0'+d%10))
	}
	return b
}
func (s *genStream) path() string {
	switch s.r.IntN(6) {
	case 0:
		return fmt.Sprintf("/api/v1/users/%d", s.n(1, 99999))
	case 1:
		return fmt.Sprintf("/api/v1/orders/%s", s.uuid())
	case 2:
		return fmt.Sprintf("/api/v2/search?q=%s&page=%d", s.pick(words), s.n(1, 20))
	case 3:
		return "/static/" + s.pick([]string{"js", "css", "img"}) + "/" + s.hex(8) + s.pick([]string{".js", ".css", ".png"})
	case 4:
		return fmt.Sprintf("/projects/%d/settings", s.n(1, 500))
	}
	return s.pick([]string{"/", "/login", "/logout", "/healthz", "/metrics", "/favicon.ico"})
}
func (s *genStream) level() string {
	return s.pick([]string{"INFO", "INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"})
}

var (
	userNames  = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar", "peggy", "trent", "victor", "walter", "svc-backup", "deploy", "root", "admin"}
	hostKinds  = []string{"web", "api", "db", "cache", "worker", "node", "edge", "batch"}
	words      = []string{"shoes", "laptop", "coffee", "gift", "book", "phone", "chair", "lamp", "bike", "tent"}
	methods    = []string{"GET", "GET", "GET", "POST", "PUT", "DELETE", "PATCH"}
	statuses   = []int{200, 200, 200, 200, 201, 204, 301, 304, 400, 401, 403, 404, 500, 502, 503}
	agents     = []string{"Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0", "curl/8.5.0", "Go-http-client/2.0", "kube-probe/1.31", "python-requests/2.32.3"}
	tables     = []string{"orders", "users", "sessions", "payments", "inventory", "events"}
	services   = []string{"payments.internal", "auth.internal", "search.internal", "mail.internal"}
	apps       = []string{"api", "web", "worker", "scheduler", "gateway"}
	queues     = []string{"emails", "thumbnails", "exports", "webhooks"}
	currency   = []string{"EUR", "USD", "GBP", "CHF"}
	exception  = []string{"java.lang.NullPointerException", "java.lang.IllegalStateException: connection closed", "java.util.concurrent.TimeoutException: after 30000ms", "org.postgresql.util.PSQLException: ERROR: deadlock detected"}
	javaFrames = []string{"com.acme.orders.OrderService.create(OrderService.java:%d)", "com.acme.http.Router.dispatch(Router.java:%d)", "com.acme.db.Pool.acquire(Pool.java:%d)", "java.base/java.lang.Thread.run(Thread.java:%d)"}
)

// families are the kinds of events; each returns one or more lines.
var families = []func(s *genStream) []string{
	// 1 web access log (combined format + request time)
	func(s *genStream) []string {
		return []string{fmt.Sprintf(`%s - %s [%s] "%s %s HTTP/1.1" %d %d "-" "%s" %.3f`, s.ip(), s.pick([]string{"-", s.user()}), s.clf(),
			s.pick(methods), s.path(), statuses[s.r.IntN(len(statuses))], s.n(0, 90000), s.pick(agents), float64(s.ms())/1000)}
	},
	// 2 login ok
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s INFO auth: user %s logged in from %s via %s session=%s", s.iso(), s.user(), s.ip(), s.pick([]string{"password", "sso", "webauthn"}), s.hex(32))}
	},
	// 3 login failure
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s WARN auth: failed login for user %s from %s: %s (attempt %d of 5)", s.iso(), s.user(), s.ip(), s.pick([]string{"invalid password", "unknown user", "account locked", "expired token"}), s.n(1, 5))}
	},
	// 4 sshd accepted
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s %s sshd[%d]: Accepted publickey for %s from %s port %d ssh2: ED25519 SHA256:%s", s.syslog(), s.host(), s.n(1000, 65000), s.user(), s.ip(), s.n(1024, 65535), s.hex(43))}
	},
	// 5 sshd disconnect
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s %s sshd[%d]: Disconnected from invalid user %s %s port %d [preauth]", s.syslog(), s.host(), s.n(1000, 65000), s.pick(userNames), s.ip(), s.n(1024, 65535))}
	},
	// 6 slow query
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s WARN db: slow query took %dms rows=%d table=%s query_id=%s", s.iso(), s.n(500, 30000), s.n(0, 100000), s.pick(tables), s.hex(16))}
	},
	// 7 pool stats
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s INFO db: pool stats active=%d idle=%d waiting=%d max=%d", s.iso(), s.n(0, 50), s.n(0, 20), s.n(0, 5), 50)}
	},
	// 8 pod scheduled
	func(s *genStream) []string {
		app := s.pick(apps)
		return []string{fmt.Sprintf("%s Normal Scheduled pod/%s-%s-%s Successfully assigned default/%s-%s-%s to node-%d", s.iso(), app, s.hex(10), s.hex(5), app, s.hex(10), s.hex(5), s.n(1, 30))}
	},
	// 9 image pulled
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s Normal Pulled pod/%s-%s Successfully pulled image \"registry.acme.io/%s:v1.%d.%d\" in %s", s.iso(), s.pick(apps), s.hex(5), s.pick(apps), s.n(0, 40), s.n(0, 20), s.dur())}
	},
	// 10 back-off
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s Warning BackOff pod/%s-%s Back-off restarting failed container %s in pod %s-%s (restarts: %d)", s.iso(), s.pick(apps), s.hex(5), s.pick(apps), s.pick(apps), s.hex(5), s.n(1, 200))}
	},
	// 11 OOM
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s Warning OOMKilled pod/%s-%s container %s exceeded memory limit %dMi (usage %dMi)", s.iso(), s.pick(apps), s.hex(5), s.pick(apps), 256*s.n(1, 8), s.n(256, 4096))}
	},
	// 12 Java exception with stack trace (multi-line)
	func(s *genStream) []string {
		out := []string{fmt.Sprintf("%s ERROR [%s] request %s failed: %s", s.iso(), s.pick(apps), s.uuid(), s.pick(exception))}
		for i := 0; i < s.n(2, 5); i++ {
			out = append(out, "\tat "+fmt.Sprintf(s.pick(javaFrames), s.n(10, 900)))
		}
		return out
	},
	// 13 Go panic (multi-line)
	func(s *genStream) []string {
		return []string{
			fmt.Sprintf("panic: runtime error: index out of range [%d] with length %d", s.n(1, 20), s.n(0, 1)),
			"",
			fmt.Sprintf("goroutine %d [running]:", s.n(1, 5000)),
			fmt.Sprintf("main.(*Handler).serve(0xc000%s, 0x%s)", s.hex(6), s.hex(4)),
			fmt.Sprintf("\t/src/app/handler.go:%d +0x%s", s.n(10, 500), s.hex(3)),
		}
	},
	// 14 outbound HTTP error
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s ERROR http: request to https://%s/v2/%s failed: dial tcp %s:443: i/o timeout after %s request_id=%s", s.iso(), s.pick(services), s.pick([]string{"charge", "verify", "query", "send"}), s.ip(), s.dur(), s.uuid())}
	},
	// 15 cache hit
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s DEBUG cache: hit key=user:%d ttl=%ds", s.iso(), s.n(1, 99999), s.n(1, 3600))}
	},
	// 16 cache miss
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s DEBUG cache: miss key=product:%s loaded in %s", s.iso(), s.hex(8), s.dur())}
	},
	// 17 job done
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s INFO worker: processed job %s queue=%s attempts=%d duration=%dms", s.iso(), s.uuid(), s.pick(queues), s.n(1, 3), s.ms())}
	},
	// 18 job retry
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s WARN worker: job %s on queue %s failed, retrying in %ds: %s", s.iso(), s.uuid(), s.pick(queues), s.n(1, 600), s.pick([]string{"connection reset by peer", "context deadline exceeded", "429 Too Many Requests"}))}
	},
	// 19 payment
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s INFO payments: charge ch_%s amount=%d.%02d %s customer=cus_%s status=%s", s.iso(), s.hex(24), s.n(1, 999), s.n(0, 99), s.pick(currency), s.hex(14), s.pick([]string{"succeeded", "succeeded", "pending", "failed"}))}
	},
	// 20 audit
	func(s *genStream) []string {
		return []string{fmt.Sprintf("AUDIT %s user=%s action=%s resource=%s ip=%s", s.iso(), s.user(), s.pick([]string{"create", "update", "delete", "read"}), s.path(), s.ip())}
	},
	// 21 Go GC trace
	func(s *genStream) []string {
		a := s.n(2, 400)
		return []string{fmt.Sprintf("gc %d @%d.%03ds %d%%: 0.0%d+%d.%d+0.00%d ms clock, %d->%d->%d MB, %d MB goal, %s P", s.n(1, 9000), s.n(0, 90000), s.n(0, 999), s.n(0, 9), s.n(10, 99), s.n(0, 20), s.n(0, 9), s.n(1, 9), a, a+s.n(0, 20), a/2, a+s.n(1, 50), s.pick([]string{"2", "4", "8", "16"}))}
	},
	// 22 health
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s %s health: check %s %s latency=%dms", s.iso(), s.level(), s.pick([]string{"db", "cache", "queue", "disk"}), s.pick([]string{"ok", "ok", "ok", "degraded"}), s.ms())}
	},
	// 23 TLS handshake error
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s http: TLS handshake error from %s:%d: %s", s.t.Format("2006/01/02 15:04:05"), s.ip(), s.n(1024, 65535), s.pick([]string{"EOF", "remote error: tls: bad certificate", "tls: client offered only unsupported versions: [301]"}))}
	},
	// 24 rate limit
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s WARN ratelimit: client %s exceeded %d req/min on %s (count=%d)", s.iso(), s.ip(), 100*s.n(1, 10), s.path(), s.n(100, 5000))}
	},
	// 25 feature flag
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s INFO flags: flag %s evaluated to %v for user %s (rule %d)", s.iso(), s.pick([]string{"new-checkout", "dark-mode", "beta-search", "fast-export"}), s.r.IntN(2) == 0, s.user(), s.n(1, 12))}
	},
	// 26 cron
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s %s CRON[%d]: (%s) CMD (/usr/local/bin/%s --%s)", s.syslog(), s.host(), s.n(1000, 65000), s.pick([]string{"root", "backup", "www-data"}), s.pick([]string{"backup.sh", "rotate-logs", "sync-s3", "cleanup"}), s.pick([]string{"full", "incremental", "dry-run"}))}
	},
	// 27 kernel
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s %s kernel: [%d.%06d] %s", s.syslog(), s.host(), s.n(1, 999999), s.n(0, 999999), s.pick([]string{
			fmt.Sprintf("eth%d: link up, %d Mbps, full duplex", s.n(0, 3), s.pick2(1000, 10000)),
			fmt.Sprintf("Out of memory: Killed process %d (%s) total-vm:%dkB", s.n(100, 99999), s.pick(apps), s.n(10000, 9000000)),
			fmt.Sprintf("EXT4-fs (sda%d): mounted filesystem with ordered data mode", s.n(1, 4)),
		}))}
	},
	// 28 disk
	func(s *genStream) []string {
		used := s.n(80, 99)
		return []string{fmt.Sprintf("%s WARN disk: %s usage %d%% (%d.%dG of 200.0G)", s.iso(), s.pick([]string{"/var/lib/data", "/", "/var/log"}), used, used*2, s.n(0, 9))}
	},
	// 29 JSON log
	func(s *genStream) []string {
		return []string{fmt.Sprintf(`{"ts":%q,"level":%q,"msg":"order created","order_id":"ord_%s","items":%d,"total":%d.%02d,"user":%q}`, s.iso(), strings.ToLower(s.level()), s.hex(12), s.n(1, 12), s.n(1, 999), s.n(0, 99), s.user())}
	},
	// 30 deploy
	func(s *genStream) []string {
		r := s.n(1, 24)
		return []string{fmt.Sprintf("%s INFO deploy: rolled out %s version v1.%d.%d (sha %s) to %d/%d replicas in %ds", s.iso(), s.pick(apps), s.n(0, 40), s.n(0, 20), s.hex(7), r, r, s.n(10, 600))}
	},
	// 31 DHCP
	func(s *genStream) []string {
		return []string{fmt.Sprintf("%s %s dhcpd[%d]: DHCPACK on %s to %s:%s:%s:%s:%s:%s via eth0", s.syslog(), s.host(), s.n(100, 9999), s.ip(), s.hex(2), s.hex(2), s.hex(2), s.hex(2), s.hex(2), s.hex(2))}
	},
}

func (s *genStream) pick2(a, b int) int {
	if s.r.IntN(2) == 0 {
		return a
	}
	return b
}
