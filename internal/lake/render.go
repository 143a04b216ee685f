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

// splitParams cuts a rendered line back into the parameters of template:
// each wildcard takes the shortest text up to the next literal piece, and
// the result renders back to line. A records v3 file stores parameters by
// kind, not as text, so the reader derives them; where a parameter contains
// the literal that follows it the split can differ from the miner's (the
// line never does). nil when line does not match template.
func splitParams(template, line string) []string {
	pieces := strings.Split(template, Wildcard)
	if !strings.HasPrefix(line, pieces[0]) {
		return nil
	}
	last := pieces[len(pieces)-1]
	if len(pieces) == 1 {
		if line != template {
			return nil
		}
		return []string{}
	}
	if len(line) < len(pieces[0])+len(last) || !strings.HasSuffix(line, last) {
		return nil
	}
	rest := line[len(pieces[0]) : len(line)-len(last)]
	params := make([]string, 0, len(pieces)-1)
	for _, p := range pieces[1 : len(pieces)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return nil
		}
		params = append(params, rest[:i])
		rest = rest[i+len(p):]
	}
	return append(params, rest)
}
