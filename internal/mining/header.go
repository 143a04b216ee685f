package mining

// Line headers.
//
// Raw log lines usually start with a header written by the logging
// framework: a timestamp, a pid, a level, a host or a component name. The
// header names no event, so it must not decide which template a line joins:
// an optional field or a level that changes between two lines of one event
// would otherwise split the event, and a constant level or component would
// inflate the similarity of two different events. headerEnd finds such a
// header by the general shapes of its fields only (no word lists), and
// tokenize makes it one parameter.
//
// A header is a run of whitespace-separated fields at the start of a line
// that
//   - starts with a bracketed group ("[...]"), a lone "-", a month or
//     weekday abbreviation, or a field with a digit and no letters but
//     hexadecimal ones (a date, a time, a sequence number);
//   - continues over header-like fields: stamp-like fields (those and any
//     field containing a digit), all-capital
//     words ("INFO", "D"), identifiers joined by '.', '_' or '$'
//     ("org.example.Main");
//   - ends after a field that ends with a colon (a component, "sshd[12]:"),
//     possibly after one more field of any shape (a host name), or else
//     before the first field that is not header-like.
//
// A header has at least two fields (a single leading value, "10.0.0.1:80
// connected", is part of the message). A line that is all header has none:
// its fields are the message.

// Bounds on the header scan.
const (
	maxHeaderFields  = 16
	maxHeaderBytes   = 512
	maxBracketHeader = 256
)

// headerField returns the end of the whitespace-delimited field at fs and
// whether it is a bracketed group.
func headerField(line string, fs int) (int, bool) {
	n := len(line)
	if line[fs] == '[' {
		for j := fs + 1; j < n && j-fs <= maxBracketHeader; j++ {
			if line[j] == ']' {
				j++
				for j < n && byteClass[line[j]] != cSpace {
					j++
				}
				return j, true
			}
		}
	}
	j := fs
	for j < n && byteClass[line[j]] != cSpace {
		j++
	}
	return j, false
}

func hasDigit(f string) bool {
	for i := 0; i < len(f); i++ {
		if isDigit(f[i]) {
			return true
		}
	}
	return false
}

// isStampField reports whether a header may start with f.
func isStampField(f string, bracket bool) bool {
	return bracket || f == "-" || hasDigit(f) || isMonthOrDay(f)
}

// isFirstField reports whether a header may start with f: a bracketed
// group, a lone "-", a month or weekday, a field with a digit and no
// letters but hexadecimal ones (a date, a time, a sequence number), or a
// glog/klog severity letter and date ("I1207": Info on December 7th).
func isFirstField(f string, bracket bool) bool {
	if bracket || f == "-" || isMonthOrDay(f) {
		return true
	}
	if len(f) == 5 && (f[0] == 'I' || f[0] == 'W' || f[0] == 'E' || f[0] == 'F') && isDigits(f[1:], 4, 4) {
		return true
	}
	digits := 0
	for i := 0; i < len(f); i++ {
		switch {
		case isDigit(f[i]):
			digits++
		case byteClass[f[i]] == cLetter && !isHex(f[i]) || f[i] >= 0x80:
			return false
		}
	}
	return digits > 0
}

// isCapsWord reports whether f is written in capitals: letters only ("D",
// "INFO") or like a constant ("UNKNOWN_LOCATION").
func isCapsWord(f string) bool {
	for i := 0; i < len(f); i++ {
		if f[i] < 'A' || f[i] > 'Z' {
			return isConstantCase(f)
		}
	}
	return len(f) > 0
}

// isJoinedIdent reports whether f is an identifier of letters, digits, '_'
// and '-' joined by at least one '.' or '$' ("org.example.Main",
// "state_change.unavailable", "app.exe").
func isJoinedIdent(f string) bool {
	joins, letters := 0, false
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case byteClass[c] == cLetter:
			letters = true
		case isDigit(c) || c == '-':
		case c == '.' || c == '$':
			joins++
		case c == '_':
		default:
			return false
		}
	}
	return letters && joins > 0 && f[len(f)-1] != '.'
}

// isColonName reports whether f, followed by whitespace, ends a header: a
// name ending with one colon ("main:", "sshd[12]:", "org.example.Main:").
func isColonName(f string) bool {
	if len(f) < 2 || f[len(f)-1] != ':' || f[len(f)-2] == ':' {
		return false
	}
	return byteClass[f[0]] == cLetter
}

// headerEnd returns the end of the header of line (the byte after its last
// field, before the whitespace that separates it from the message), or 0
// when the line has no header.
func headerEnd(line string) int {
	n := len(line)
	if n == 0 || byteClass[line[0]] == cSpace {
		return 0
	}
	end, fields, pos := 0, 0, 0
	for fields < maxHeaderFields && pos < n && pos < maxHeaderBytes {
		fs := pos
		for fs < n && byteClass[line[fs]] == cSpace {
			fs++
		}
		if fs == n {
			break
		}
		fe, bracket := headerField(line, fs)
		f := line[fs:fe]
		if fields == 0 && !isFirstField(f, bracket) {
			return 0
		}
		if fields > 0 && fe < n && isColonName(f) {
			end = fe
			fields++
			break
		}
		if isStampField(f, bracket) || isCapsWord(f) || isJoinedIdent(f) {
			end, pos = fe, fe
			fields++
			continue
		}
		// A field of any shape (a host name) before a component.
		if ge, ok := nextField(line, fe); ok && isColonName(line[nextStart(line, fe):ge]) {
			if sentenceAfter(line, ge) {
				end = ge
				fields += 2
			}
			break
		}
		// One to three words between stamp fields (a component column
		// between a node and a time): the header goes on when two
		// stamp-like fields follow them and a message after those.
		if e, ok := wordsThenStamps(line, fs); ok {
			end, pos = e, e
			fields += 3
			continue
		}
		break
	}
	if fields < 2 || end >= n || end > maxHeaderBytes+maxBracketHeader {
		return 0
	}
	// the header must be followed by whitespace and a message
	rest := end
	for rest < n && byteClass[line[rest]] == cSpace {
		rest++
	}
	if rest == end || rest == n {
		return 0
	}
	return end
}

// nextStart returns the start of the field after the whitespace at p.
func nextStart(line string, p int) int {
	for p < len(line) && byteClass[line[p]] == cSpace {
		p++
	}
	return p
}

// nextField returns the end of the field after position p (which must be
// followed by whitespace) and whether there is one.
func nextField(line string, p int) (int, bool) {
	s := nextStart(line, p)
	if s == p || s >= len(line) {
		return 0, false
	}
	e, _ := headerField(line, s)
	return e, true
}

// sentenceAfter reports whether at least two fields follow p: a component
// prefix is followed by a message, not by a lone value ("address: 0x1f").
func sentenceAfter(line string, p int) bool {
	e, ok := nextField(line, p)
	if !ok {
		return false
	}
	_, ok = nextField(line, e)
	return ok
}

// isPlainField reports whether f is a word of letters, '-' and '_' or a
// joined identifier (see isJoinedIdent).
func isPlainField(f string) bool {
	for i := 0; i < len(f); i++ {
		if byteClass[f[i]] != cLetter && f[i] != '-' && f[i] != '_' {
			return isJoinedIdent(f)
		}
	}
	return len(f) > 0
}

// wordsThenStamps matches, at fs, one to three plain words followed by two
// letter-free fields with digits and at least one more field, and returns the end of the
// second stamp-like field.
func wordsThenStamps(line string, fs int) (int, bool) {
	p := fs
	words := 0
	for words < 4 {
		e, _ := headerField(line, p)
		f := line[p:e]
		if isStampField(f, false) {
			break
		}
		if !isPlainField(f) || words == 3 {
			return 0, false
		}
		words++
		if p = nextStart(line, e); p == e || p >= len(line) {
			return 0, false
		}
	}
	for k := 0; k < 2; k++ {
		e, bracket := headerField(line, p)
		if bracket || !isFirstField(line[p:e], false) {
			return 0, false
		}
		if k == 1 {
			if _, ok := nextField(line, e); !ok {
				return 0, false
			}
			return e, true
		}
		if p = nextStart(line, e); p == e || p >= len(line) {
			return 0, false
		}
	}
	return 0, false
}
