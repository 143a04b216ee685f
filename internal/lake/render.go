package lake

import (
	"fmt"
	"strings"
)

// Wildcard marks a parameter in a template's text.
const Wildcard = "<*>"

// render splits template on "<*>" and interleaves params: the inverse of
// mining. It is the same rule as internal/mining.Render, kept local so the
// lake readers do not depend on the miner's package.
func render(template string, params []string) (string, error) {
	if n := strings.Count(template, Wildcard); n != len(params) {
		return "", fmt.Errorf("render: template has %d wildcards, got %d params", n, len(params))
	}
	var b strings.Builder
	size := len(template) - len(params)*len(Wildcard)
	for _, p := range params {
		size += len(p)
	}
	b.Grow(size)
	for _, p := range params {
		i := strings.Index(template, Wildcard)
		b.WriteString(template[:i])
		b.WriteString(p)
		template = template[i+len(Wildcard):]
	}
	b.WriteString(template)
	return b.String(), nil
}
