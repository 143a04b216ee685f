package lake

import "testing"

func TestTruncatePrefix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{{"abc", 2, "ab"}, {"abc", 3, "abc"}, {"", 1, ""}, {"ééé", 2, "éé"}} {
		if got := truncatePrefix(tc.in, tc.n); got != tc.want {
			t.Errorf("truncatePrefix(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
