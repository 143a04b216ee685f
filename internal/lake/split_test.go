package lake

import (
	"strings"
	"testing"
)

func TestSplitParams(t *testing.T) {
	for _, tc := range []struct {
		tpl, line string
		want      []string // nil: no match
	}{
		{"GET <*> <*>", "GET /a 200", []string{"/a", "200"}},
		{"<*>", "anything at all", []string{"anything at all"}},
		{"no wildcard", "no wildcard", []string{}},
		{"no wildcard", "other", nil},
		{"a <*> b", "a  b", []string{""}},
		{"<*>:<*>", "x:y:z", []string{"x", "y:z"}},
		{"start <*> end", "start x", nil},
		{"ab<*>ba", "aba", nil},
	} {
		got := splitParams(tc.tpl, tc.line)
		if (got == nil) != (tc.want == nil) || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("splitParams(%q, %q) = %q, want %q", tc.tpl, tc.line, got, tc.want)
		}
		if got != nil {
			if line, err := render(tc.tpl, got); err != nil || line != tc.line {
				t.Errorf("render(%q, %q) = %q, %v, want %q", tc.tpl, got, line, err, tc.line)
			}
		}
	}
}
