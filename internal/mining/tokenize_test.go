package mining

import (
	"strings"
	"testing"
)

// TestChunkKind checks the fused classifier against the rule functions.
func TestChunkKind(t *testing.T) {
	words := []string{
		"a", "jk2_init", "eth0", "blk_-123", "12", "-5", "+x", "0x1F", "dead", "deadbeef1",
		"v1.7", "dquot_6.5.1", "proxy.example.edu.hk", "com.example.mm", "org.Example.X",
		"a..b", ".x.y", "true", "FALSE", "Null", "nulls", "/var/log", "//x", "/", "t761",
		"ab.cd", "a.b.c.", "x_1.y", "MSRA-SA-39.fareast", "\xff\xfe", "node-D7", "ICONS*",
	}
	for _, w := range words {
		want := kWord
		if looksVariable(w) || isNullOrBool(w) || isPath(w) || isDottedName(w) {
			want = kVar
		}
		if got := chunkKind(w); got != want {
			t.Errorf("chunkKind(%q) = %d, want %d", w, got, want)
		}
	}
}

func TestTokenizeClasses(t *testing.T) {
	tests := []struct {
		line string
		want string // token kinds: s space, p punct, w word, v var
	}{
		{"PacketResponder 1 for block blk_1", "wsvswswsw"},
		{"connection at Sat Jun 18 02:08:10 2005", "wswsvpvpv"},
		{"ask 1.2.3.4:50010 to delete blk_10 blk_22 blk_333", "wsvpvswswsv"},
		{"size 12.5 KB, free 3 MB", "wsvpswsv"},
		{"ok /etc/httpd/x.properties", "wsv"},
		{"akka://host@1.2.3.4:5000]", "wppvp"},
		{"jk2_init() done.", "wppswp"},
		{"from x () at", "wswspvpsw"},
		{"illegal instruction......0", "wswpv"},
		{"<*> literal", "vsw"},
		{"is true", "wsv"},
		// Java's resolved socket address, host/IPv4: two values.
		{"Old: msra-sa-41/10.190.173.170:9000 New", "wpsvpvpvsw"},
		{"at localhost/127.0.0.1:8020", "wswpvpv"},
		{"at MININT-FNANLI5.fareast.corp.microsoft.com/10.86.169.121", "wswpv"}, // a capitalised name stays a word
		// Not host/IPv4: paths, a CIDR block, a short address.
		{"from /10.250.19.102:50010", "wsvpv"},
		{"in a/b/10.0.0.1 x", "wsvsw"},
		{"net 10.0.0.0/24 up", "wsvsw"},
		{"get x9/1.2.3 now", "wsvsw"},
		// A quoted value of a key is data; an unquoted word is not.
		{`tag="AudioMix", name=audioserver`, "wppvppswpw"},
		{`say "hello" x=""`, "wspwpswppp"},
	}
	kinds := "spwv"
	for _, tt := range tests {
		toks, _, over := tokenize(nil, tt.line, 1000)
		if over {
			t.Fatalf("%q: overflow", tt.line)
		}
		got := ""
		for _, tk := range toks {
			got += string(kinds[tk.kind])
		}
		if got != tt.want {
			t.Errorf("tokenize(%q) = %s, want %s", tt.line, got, tt.want)
		}
	}
}

// TestISODateTimeOneValue: an ISO 8601 date and time with its T is one
// parameter (engine version 4), with its fraction and zone; anything else
// next to it keeps the old cut.
// checkOneValue asserts that the token of line at want is one value of
// exactly want, or, with want "", that joined reports no token of line
// (joined: a token the rule under test would have made one value).
func checkOneValue(t *testing.T, line, want string, joined func(w string) bool) {
	t.Helper()
	toks, _, _ := tokenize(nil, line, HardMaxTokens)
	if want == "" {
		for _, tk := range toks {
			if w := line[tk.start:tk.end]; joined(w) {
				t.Errorf("%q: token %q is one value", line, w)
			}
		}
		return
	}
	at, found := strings.Index(line, want), false
	for _, tk := range toks {
		if int(tk.start) == at {
			found = true
			if tk.kind != kVar || int(tk.end) != at+len(want) {
				t.Errorf("%q: token %q (kind %d), want the value %q", line, line[tk.start:tk.end], tk.kind, want)
			}
		}
	}
	if !found {
		t.Errorf("%q: no token starts at %q (tokens %v)", line, want, toks)
	}
}

// TestPaddedBase64OneValue: base64 and its padding are one value (engine
// version 5); before, the '='s cut it, and one event was as many templates
// as padding lengths (<*>, <*>= and <*>==).
func TestPaddedBase64OneValue(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"token c2lnbmVkIGJ5IHF1YXJyeQ== ok", "c2lnbmVkIGJ5IHF1YXJyeQ=="},
		{"token c2lnbmVkIGJ5IHF1YXI=", "c2lnbmVkIGJ5IHF1YXI="},
		{`nonce="Zm9vYmE=", x`, "Zm9vYmE="},
		{"sig=ab+/Cd1234== x", "ab+/Cd1234=="},
		{"(QUJDRDEyMzQ1Ng==)", "QUJDRDEyMzQ1Ng=="},
		{"token c2lnbmVkIGJ5IHF1YXJyeQ=== x", ""}, // three '='s
		{"token c2lnbmVkIGJ5IHF1YXJyeQ==x", ""},   // the chunk goes on
		{"token c2lnbmVkIGJ5IHF1YXJyeQ= x", ""},   // not a multiple of four
		{"logname= uid=0", ""},                    // a word and its '='
		{"Abc= x", ""},                            // too short
		{"ABCDEFG= x", ""},                        // capitals only: a word
		{"a_bcDEF= x", ""},                        // not the alphabet
	} {
		checkOneValue(t, tc.line, tc.want, func(w string) bool { return strings.HasSuffix(w, "=") && len(w) > 1 })
	}
	// Mined: tokens of each padding share one template, and render back.
	m := mustNew(t, Config{})
	var ids []uint64
	for _, tok := range []string{"c2lnbmVkIGJ5IHF1YXJyeQ==", "YWJjZGVmZ2hpams=", "QUJDREVGR0hJSktM", "MTIzNDU2Nzg5MA=="} {
		r := checkRoundTrip(t, m, "t", "session 7 issued token "+tok+" for user bob")
		ids = append(ids, r.ID)
	}
	text, _ := m.TemplateVersion(ids[3], 1)
	if ids[0] != ids[1] || ids[1] != ids[2] || ids[2] != ids[3] {
		t.Errorf("template ids %v (text %q), want one template", ids, text)
	}
}

// TestColonHexOneValue: a MAC address, a longer id of hex pairs and an IPv6
// address are one value each (engine version 5); before, their colons cut
// them, IPv6 addresses of different shapes made different templates and a
// pair of hex letters (E2, DC) stayed literal: BGL's 12-pair chip ids, which
// Loghub's truth writes as one <*>, made a template per line.
func TestColonHexOneValue(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"lease to 00:1a:2b:3c:4d:5e ok", "00:1a:2b:3c:4d:5e"},
		{"chip FF:F2:9F:16:E2:23:00:0D:60:E9:1D:DC ip=10.0.0.151", "FF:F2:9F:16:E2:23:00:0D:60:E9:1D:DC"},
		{"from fe80::1 port 22", "fe80::1"},
		{"from [2001:db8::8a2e:370:7334]:443", "2001:db8::8a2e:370:7334"},
		{"bind ::1 ok", "::1"},
		{"peer=::ffff:a00:1 x", "::ffff:a00:1"},
		{"addr 2001:db8:0:0:0:0:0:1 x", "2001:db8:0:0:0:0:0:1"},
		{"addr fe80::1: unreachable", "fe80::1"}, // a colon after it ends a sentence
		{"at 12:30:45 done", ""},                 // a time
		{"at 12:30:45.123 done", ""},             // so is this
		{"Foo::Bar called", ""},                  // a C++ name
		{"onTouchEvent::0, x", ""},               // the chunk before is no address
		{"addr fe80::1%eth0 x", ""},              // a zone goes on
		{"addr 1:2:3:4:5:6:7 x", ""},             // seven groups, no ::
		{"addr 1:2:3:4:5:6:7:8:9 x", ""},         // nine
		{"addr 00:1a:2b:3c:4d x", ""},            // five pairs
		{"addr 12345::1 x", ""},                  // a group of five
		{"addr 1::2::3 x", ""},                   // two ::
		{"addr :::1 x", ""},                      // three colons
		{"cafe: open", ""},                       // a word
	} {
		checkOneValue(t, tc.line, tc.want, func(w string) bool { return strings.Contains(w, ":") && len(w) > 2 })
	}
	// Mined: addresses of every shape share one template, and render back.
	m := mustNew(t, Config{})
	ids := map[uint64]bool{}
	for _, a := range []string{"fe80::1", "2001:db8::8a2e:370:7334", "::1", "2001:db8:0:0:0:0:0:1", "fe80::a1b2:c3d4"} {
		ids[checkRoundTrip(t, m, "t", "connection from "+a+" port 22 accepted").ID] = true
	}
	for _, a := range []string{"00:1a:2b:3c:4d:5e", "FF:F2:9F:16:E2:23", "aa:bb:cc:dd:ee:ff"} {
		ids[checkRoundTrip(t, m, "t", "lease assigned to "+a).ID] = true
	}
	if len(ids) != 2 {
		t.Errorf("%d templates, want one for the IPv6 lines and one for the MAC lines", len(ids))
	}
}

func TestISODateTimeOneValue(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"2026-11-29T00:00:00.010Z up", "2026-11-29T00:00:00.010Z"},
		{"t=2026-11-29t00:00:00,5+01:00 x", "2026-11-29t00:00:00,5+01:00"},
		{"[2026-11-29T23:59:59-0700] x", "2026-11-29T23:59:59-0700"},
		{`time="2026-12-07T20:10:41.533033569Z" level=info`, "2026-12-07T20:10:41.533033569Z"},
		{"at 2026-11-29T00:00:00", "2026-11-29T00:00:00"},
		{"at 2026-11-29T00:00:00+01 x", "2026-11-29T00:00:00"}, // a zone of hours alone is not taken
		{"at 2026-11-29T00:00:00. x", "2026-11-29T00:00:00"},   // a full stop ends it
		{"at 2026-11-29T00:00:00.0123456789Z x", ""},           // 10 fraction digits
		{"at 2026-11-29T00:00:00Zulu x", ""},                   // the chunk goes on
		{"at 2026-11-29T00:00:00é x", ""},                      // so it does
		{"at 2026-11-29T00:00 x", ""},                          // no seconds
		{"at 2026-11-29 00:00:00 x", ""},                       // a space, not T
		{"at x2026-11-29T00:00:00Z y", ""},                     // not at a chunk's start
		{"at 2026-1-29T00:00:00Z y", ""},                       // not two digits
	} {
		checkOneValue(t, tc.line, tc.want, func(w string) bool { return strings.Contains(w, ":") && len(w) > 1 })
	}
	// Mined: two lines that differ in their time share a template with one
	// wildcard for it, and render back.
	m := mustNew(t, Config{})
	r1 := checkRoundTrip(t, m, "t", "2026-11-29T00:00:00.010Z ERROR [api] request 42 failed")
	r2 := checkRoundTrip(t, m, "t", "2026-11-29T00:00:01.5Z ERROR [api] request 43 failed")
	text, _ := m.TemplateVersion(r2.ID, r2.Version)
	if r1.ID != r2.ID || text != "<*> ERROR [api] request <*> failed" || r2.Params[0] != "2026-11-29T00:00:01.5Z" {
		t.Errorf("template %d %q params %q, want one template <*> ERROR [api] request <*> failed", r2.ID, text, r2.Params)
	}
}
