package lake

import "testing"

func TestRender(t *testing.T) {
	for _, c := range []struct {
		tpl    string
		params []string
		want   string
		err    bool
	}{
		{"no params", nil, "no params", false},
		{"<*>", []string{"whole"}, "whole", false},
		{"a <*> b <*>", []string{"1", "2"}, "a 1 b 2", false},
		{"<*><*>", []string{"x", ""}, "x", false},
		{"param holds <*>", []string{"<*>"}, "param holds <*>", false},
		{"a <*>", nil, "", true},
		{"a", []string{"x"}, "", true},
	} {
		got, err := render(c.tpl, c.params)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("render(%q, %q) = %q, %v", c.tpl, c.params, got, err)
		}
	}
}
