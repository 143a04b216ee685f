package mining

import "testing"

func TestHeaderEnd(t *testing.T) {
	tests := []struct {
		line, head string
	}{
		{"2031-04-05 07:08:09,123 WARN [worker-3] net.example.Pool: pool drained after 3 tries", "2031-04-05 07:08:09,123 WARN [worker-3] net.example.Pool:"},
		{"Feb 03 11:22:33 box7 queued[4411]: job accepted", "Feb 03 11:22:33 box7 queued[4411]:"},
		{"[Mon Feb 03 11:22:33 2031] [warn] cache warmed in 3 ms", "[Mon Feb 03 11:22:33 2031] [warn]"},
		{"7/8/31 1:02:03 E Scheduler: queue full", "7/8/31 1:02:03 E Scheduler:"},
		{"88121 rack-4 store.disk write_check.failed 1700000000 1 Disk check failed", "88121 rack-4 store.disk write_check.failed 1700000000 1"},
		{"88121 rack-4 fan speed 1700000000 1 fan slow", "88121 rack-4 fan speed 1700000000 1"},
		{"[01.02 03:04:05] viewer.bin *64 - cdn.example.org:443 open via relay", "[01.02 03:04:05] viewer.bin *64 - cdn.example.org:443"},
		{"0000002a@2031/2/3:04:05:06.789 CORE rebuilt index", "0000002a@2031/2/3:04:05:06.789 CORE"},
		{"- 1700000000 NO_SITE 2031-01-02-03.04.05 NO_SITE NULL UNIT WARN fan tray missing", "- 1700000000 NO_SITE 2031-01-02-03.04.05 NO_SITE NULL UNIT WARN"},
		// glog/klog: the severity letter joined to the date (I, W, E, F)
		{"I1207 23:10:53.845933    1488 server.go:123] Starting kubelet", "I1207 23:10:53.845933    1488 server.go:123]"},
		{"W0102 03:04:05.000001 7 pod_workers.go:9] Pod web-1 not ready", "W0102 03:04:05.000001 7 pod_workers.go:9]"},
		// not headers
		{"X1207 23:10:53.845933 1488 server.go:123] Starting kubelet", ""}, // no severity
		{"I12075 23:10:53 1488 x.go:1] y", ""},                             // five digits
		{"pool drained after 3 tries", ""},
		{"10.0.0.1:80 connected to upstream", ""},                 // one value, then words
		{"126KB LOW memory available", ""},                        // letters in the first field
		{"2031-04-05 07:08:09", ""},                               // all header, no message
		{"2031-04-05 SVC lookup address: 0x1f", "2031-04-05 SVC"}, // not through a colon word before a lone value
		{"reboot: 12 devices", ""},                                // no stamp first
	}
	for _, tt := range tests {
		h := headerEnd(tt.line)
		if got := tt.line[:h]; got != tt.head {
			t.Errorf("headerEnd(%q) = %q, want %q", tt.line, got, tt.head)
		}
	}
}

// TestHeaderDoesNotSplit: lines of one event whose headers differ in shape
// (an optional field, another level, another host) get one template, and
// every line renders back byte for byte.
func TestHeaderDoesNotSplit(t *testing.T) {
	lines := []string{
		"[01.02 03:04:05] viewer.bin - cdn.example.org:443 close, 10 bytes sent",
		"[01.02 03:04:06] viewer.bin *64 - cdn.example.org:443 close, 12 bytes sent",
		"2031-04-05 07:08:09,123 INFO [main] a.b.C: close, 10 bytes sent",
		"2031-04-05 07:08:10,001 ERROR [io-2] a.b.D: close, 77 bytes sent",
		"Feb 03 11:22:33 box7 relay[4411]: close, 5 bytes sent",
	}
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint64]bool{}
	for _, l := range lines {
		r, _ := m.Mine("t", l, nil)
		ids[m.Canonical(r.ID)] = true
		text, _ := m.TemplateVersion(r.ID, r.Version)
		if got, err := Render(text, r.Params); err != nil || got != l {
			t.Fatalf("render %q = %q, %v", l, got, err)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%d templates for one event under different headers, want 1", len(ids))
	}
	// Without headers the event is still told apart from another one.
	r1, _ := m.Mine("t", "2031-04-05 07:08:11,000 INFO [main] a.b.C: open, 10 bytes sent", nil)
	if ids[m.Canonical(r1.ID)] {
		t.Fatal("a different event joined the template because of its header")
	}
}
