package laketest

import (
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		got, want []string
		diff      string // substring of the result; "" means equal
	}{
		{nil, nil, ""},
		{[]string{"b", "a", "a"}, []string{"a", "b", "a"}, ""},
		{[]string{"a", "a"}, []string{"a"}, `1 duplicate or unknown (e.g. ["a"]), 0 missing`},
		{[]string{"a"}, []string{"a", "b"}, `0 duplicate or unknown (e.g. []), 1 missing (e.g. ["b"])`},
		{[]string{"x"}, []string{"y"}, `1 duplicate or unknown (e.g. ["x"]), 1 missing (e.g. ["y"])`},
		{[]string{""}, nil, `1 duplicate or unknown (e.g. [""])`},
	} {
		got := append([]string(nil), tc.got...)
		d := Diff(got, tc.want)
		if (tc.diff == "") != (d == "") || !strings.Contains(d, tc.diff) {
			t.Errorf("Diff(%q, %q) = %q, want %q", tc.got, tc.want, d, tc.diff)
		}
		if strings.Join(got, ",") != strings.Join(tc.got, ",") {
			t.Errorf("Diff reordered its input: %q", got)
		}
	}
}
