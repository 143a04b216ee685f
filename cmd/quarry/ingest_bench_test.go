package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/quarrylake/quarry/producer"
)

// TestIngestBench is `make bench`'s ingest section (scripts/bench/ingest.sh):
// the same generated lines through `quarry run` (the binary in QUARRY_BIN,
// a process of its own) from a file and from each receiver, as fast as it
// goes and then paced at 80% of that rate. It writes a markdown table to
// QUARRY_INGEST_BENCH_OUT and is skipped without it.
//
// Per row: lines/s from the start of sending to the committer's high-water
// covering every frame (end to end, the lake holds every line); the
// publish→ack p50/p99 of the run's summary (a frame from publish to its
// fsync'd JetStream ack); for the HTTP receivers the client's request
// p50/p99 (an answer comes once the lines are durable); the process's CPU
// per line and its peak RSS; for the receivers, the CPU per line of the
// bench's own clients (this process: requests sent and answers read, the
// bodies being built before the clock starts, as a load generator's are).
// QUARRY_INGEST_LINES (default 300000) lines,
// one tenant. QUARRY_INGEST_SOURCES=jsonline,file picks sources and
// QUARRY_INGEST_UNPACED=1 skips the paced runs (with QUARRY_CPUPROFILE set,
// the run's profile is the last run's); QUARRY_INGEST_TIMELINE=1 logs a
// receiver run's CPU and counters every 250 ms.
func TestIngestBench(t *testing.T) {
	out := os.Getenv("QUARRY_INGEST_BENCH_OUT")
	if out == "" {
		t.Skip("QUARRY_INGEST_BENCH_OUT not set (scripts/bench/ingest.sh sets it)")
	}
	bin := os.Getenv("QUARRY_BIN")
	if bin == "" {
		t.Fatal("QUARRY_BIN: the quarry binary to measure")
	}
	n := atoiDefault(os.Getenv("QUARRY_INGEST_LINES"), 300000)
	// Empty lines (the generator's Go panics have one) are left out: a
	// JSON or OTLP record without a message is not a line to every receiver.
	lines := slices.DeleteFunc(producer.NewGenerator(1, []string{"acme"}).Lines("acme", n), func(l string) bool { return l == "" })
	dir := t.TempDir()
	file := filepath.Join(dir, "lines.log")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var rows []string
	sources := []string{"file", "syslog-tcp", "otlp-http", "bulk", "jsonline"}
	if v := os.Getenv("QUARRY_INGEST_SOURCES"); v != "" {
		sources = strings.Split(v, ",") // a subset, for profiling one
	}
	for _, src := range sources {
		var max benchResult
		for _, paced := range []bool{false, true} {
			if paced && os.Getenv("QUARRY_INGEST_UNPACED") != "" {
				continue
			}
			rate := 0.0
			if paced {
				rate = math.Round(0.8 * max.rate)
			}
			r := benchSource(t, bin, src, filepath.Join(dir, fmt.Sprintf("%s-%v", src, paced)), file, lines, rate)
			if !paced {
				max = r
			}
			t.Logf("%s rate %.0f: %+v", src, rate, r)
			load := "as fast as it goes"
			if paced {
				load = fmt.Sprintf("paced at %.0f lines/s (80%%)", rate)
			}
			req := "–"
			if r.reqP50 > 0 {
				req = fmt.Sprintf("%s / %s", ms(r.reqP50), ms(r.reqP99))
			}
			client := "–"
			if r.clientCPU > 0 {
				client = fmt.Sprintf("%.2f", r.clientCPU)
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %d | %.0f | %s / %s | %s | %.2f | %s | %d |",
				src, load, len(lines), r.rate, ms(r.ackP50), ms(r.ackP99), req, r.cpuPerLine, client, r.rssMB))
		}
	}
	table := "| source | load | lines | lines/s (end to end) | publish→ack p50 / p99 | request p50 / p99 | CPU µs/line | client CPU µs/line | peak RSS MiB |\n" +
		"|---|---|---:|---:|---:|---:|---:|---:|---:|\n" + strings.Join(rows, "\n") + "\n"
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

type benchResult struct {
	rate           float64 // lines per second, end to end
	ackP50, ackP99 time.Duration
	reqP50, reqP99 time.Duration // HTTP receivers: request to durable answer
	cpuPerLine     float64       // µs
	clientCPU      float64       // µs per line of this process (the clients) while the clock runs
	rssMB          int64
}

// benchSource runs one measurement: `quarry run --input` for the file,
// `quarry run --follow` with one receiver and a client otherwise. rate 0
// is unlimited.
func benchSource(t *testing.T, bin, src, data, file string, lines []string, rate float64) benchResult {
	t.Helper()
	metrics := freeAddr(t)
	args := []string{"run", "--data", data, "--tenant", "acme", "--http", metrics}
	recvAddr := freeAddr(t)
	ready := "lake"
	switch src {
	case "file":
		args = append(args, "--input", file)
		if rate > 0 {
			args = append(args, "--rate", strconv.FormatFloat(rate, 'f', 0, 64))
		}
	case "syslog-tcp":
		args, ready = append(args, "--follow", "--listen-syslog", recvAddr), "syslog on"
	case "otlp-http":
		args, ready = append(args, "--follow", "--listen-otlp", recvAddr), "otlp logs over http on"
	case "bulk", "jsonline":
		args, ready = append(args, "--follow", "--listen-http", recvAddr), "http ingest on"
	}
	// A receiver's requests are built before the process starts, as a load
	// generator's are: building 1,000-line bodies (json.Marshal per line)
	// in the clock took this process's CPU from the receiver's.
	var bodies [][]byte
	if src != "file" {
		c0, t0 := selfCPU(), time.Now()
		bodies = encodeBodies(t, src, lines)
		t.Logf("%s: %d bodies built in %v (%v CPU), before the clock", src, len(bodies), time.Since(t0).Round(time.Millisecond), (selfCPU() - c0).Round(time.Millisecond))
	}
	cmd := exec.Command(bin, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // a no-op once it exited
	var errLog syncBuf
	readyc := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			errLog.Write([]byte(sc.Text() + "\n"))
			if strings.Contains(sc.Text(), ready) {
				once.Do(func() { close(readyc) })
			}
		}
	}()
	select {
	case <-readyc:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: not ready:\n%s", src, errLog.String())
	}
	var r benchResult
	if src == "file" {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", src, err, errLog.String())
		}
		el := parseSummary(t, stdout.String(), &r)
		r.rate = float64(len(lines)) / el.Seconds()
	} else {
		// The clock starts with the first line sent, after the server is up.
		start = time.Now()
		stopTimeline := func() {}
		if os.Getenv("QUARRY_INGEST_TIMELINE") != "" {
			stopTimeline = timeline(t, cmd.Process.Pid, metrics)
		}
		cpu0 := selfCPU()
		lat := sendBodies(t, src, recvAddr, bodies, rate)
		if len(lat) > 0 {
			slices.Sort(lat)
			r.reqP50, r.reqP99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
		}
		waitCommitted(t, metrics, uint64(len(lines)), &errLog)
		stopTimeline()
		r.rate = float64(len(lines)) / time.Since(start).Seconds()
		r.clientCPU = float64(selfCPU()-cpu0) / float64(time.Microsecond) / float64(len(lines))
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", src, err, errLog.String())
		}
		parseSummary(t, stdout.String(), &r)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.rssMB = ru.Maxrss / 1024
	}
	return r
}

var (
	reLines   = regexp.MustCompile(`lines in +(\d+)`)
	reElapsed = regexp.MustCompile(`elapsed +(\S+)`)
	reCPU     = regexp.MustCompile(`([\d.]+) µs/line`)
	reAck     = regexp.MustCompile(`publish-ack +p50 (\S+), p99 (\S+)`)
)

// parseSummary reads the run's summary into r and returns its elapsed.
func parseSummary(t *testing.T, s string, r *benchResult) time.Duration {
	t.Helper()
	m := reLines.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no summary:\n%s", s)
	}
	if c := reCPU.FindStringSubmatch(s); c != nil {
		r.cpuPerLine, _ = strconv.ParseFloat(c[1], 64)
	}
	if a := reAck.FindStringSubmatch(s); a != nil {
		r.ackP50, _ = time.ParseDuration(a[1])
		r.ackP99, _ = time.ParseDuration(a[2])
	}
	var el time.Duration
	if e := reElapsed.FindStringSubmatch(s); e != nil {
		el, _ = time.ParseDuration(e[1])
	}
	return el
}

// waitCommitted polls the run's metrics until the committer's high-water
// covers every frame the producer wrote (a fresh WAL holds only frames,
// numbered from 1) and the producer wrote every line.
func waitCommitted(t *testing.T, addr string, lines uint64, errLog *syncBuf) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		m := scrape(addr)
		if m["quarry_producer_lines_total"] >= float64(lines) && m["quarry_committer_high_water"] >= m["quarry_producer_frames_total"] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not committed: %v\n%s", m, errLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func scrape(addr string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out
}

// timeline logs, every 250 ms until stop, the CPU of the process pid
// and of this one (cores) and the pipeline's counters: a run's shape, for
// finding what holds it back (QUARRY_INGEST_TIMELINE=1).
func timeline(t *testing.T, pid int, metrics string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t0, lastT := time.Now(), time.Now()
		lastP, lastS := procCPU(pid), selfCPU()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			now, p, s := time.Now(), procCPU(pid), selfCPU()
			dt := now.Sub(lastT).Seconds()
			m := scrape(metrics)
			sum := func(prefix string) float64 {
				v := 0.0
				for k, x := range m {
					if k == prefix || strings.HasPrefix(k, prefix+"{") {
						v += x
					}
				}
				return v
			}
			t.Logf("t %5.2fs quarry %.2f client %.2f cores | produced %8.0f mined %8.0f encoded %8.0f | frames %5.0f high-water %5.0f",
				now.Sub(t0).Seconds(), (p-lastP).Seconds()/dt, (s-lastS).Seconds()/dt,
				sum("quarry_producer_lines_total"), sum("quarry_miner_records_total"), sum("quarry_encoder_records_total"),
				sum("quarry_producer_frames_total"), sum("quarry_committer_high_water"))
			lastT, lastP, lastS = now, p, s
		}
	}()
	return func() { close(done); wg.Wait() }
}

// procCPU is the user+sys CPU of process pid so far (/proc/pid/stat).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis; utime and stime
	// are the 14th and 15th of the line, in clock ticks (100 a second).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// selfCPU is this process's user+sys CPU so far (its children's not
// included).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// linesPerBody is the lines of one request (or syslog write).
const linesPerBody = 1000

// encodeBodies cuts lines into the bodies sendBodies sends.
func encodeBodies(t *testing.T, src string, lines []string) [][]byte {
	t.Helper()
	var bodies [][]byte
	for i := 0; i < len(lines); i += linesPerBody {
		bodies = append(bodies, encodeBody(t, src, lines[i:min(i+linesPerBody, len(lines))]))
	}
	return bodies
}

// sendBodies sends bodies (encodeBodies's) to a receiver from
// $QUARRY_INGEST_CLIENTS clients (4 when unset), paced at rate lines/s
// when rate > 0, and returns the HTTP requests' latencies (none for
// syslog, which has no answer). A 429 is retried after a short pause, as
// a shipper would.
func sendBodies(t *testing.T, src, addr string, bodies [][]byte, rate float64) []time.Duration {
	t.Helper()
	const per = linesPerBody
	clients := atoiDefault(os.Getenv("QUARRY_INGEST_CLIENTS"), 4)
	url := map[string]string{"otlp-http": "/v1/logs", "bulk": "/acme/_bulk", "jsonline": "/jsonline?tenant=acme"}[src]
	ctype := map[string]string{"otlp-http": "application/x-protobuf", "bulk": "application/x-ndjson", "jsonline": "application/x-ndjson"}[src]
	next := make(chan int)
	go func() {
		t0 := time.Now()
		for i := range bodies {
			if rate > 0 {
				time.Sleep(time.Until(t0.Add(time.Duration(float64(i*per) / rate * float64(time.Second)))))
			}
			next <- i
		}
		close(next)
	}()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var conn net.Conn
			if src == "syslog-tcp" {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					errc <- err
					return
				}
				defer c.Close()
				conn = c
			}
			for i := range next {
				if conn != nil {
					if _, err := conn.Write(bodies[i]); err != nil {
						errc <- err
						return
					}
					continue
				}
				t0 := time.Now()
				for {
					resp, err := client.Post("http://"+addr+url, ctype, bytes.NewReader(bodies[i]))
					if err != nil {
						errc <- err
						return
					}
					io.Copy(io.Discard, resp.Body) //nolint:errcheck // drained for reuse
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					if resp.StatusCode != http.StatusOK {
						errc <- fmt.Errorf("%s: status %d", url, resp.StatusCode)
						return
					}
					break
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	return lat
}

// encodeBody is one request (or syslog write) of lines in src's protocol.
func encodeBody(t *testing.T, src string, lines []string) []byte {
	t.Helper()
	var b bytes.Buffer
	switch src {
	case "syslog-tcp":
		for _, l := range lines {
			fmt.Fprintf(&b, "<14>1 2026-11-29T10:00:00Z host-1 app - - - %s\n", l)
		}
	case "otlp-http":
		recs := make([]*logspb.LogRecord, len(lines))
		for i, l := range lines {
			recs[i] = &logspb.LogRecord{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: l}}}
		}
		req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: recs}}}}}
		p, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return p
	case "bulk", "jsonline":
		for _, l := range lines {
			if src == "bulk" {
				b.WriteString("{\"index\":{}}\n")
			}
			m, _ := json.Marshal(map[string]string{"message": l})
			b.Write(m)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
