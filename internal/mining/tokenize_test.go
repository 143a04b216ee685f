package mining

import (
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
