package mining

import (
	"strings"
	"unicode/utf8"
)

// Token classes. The tokenizer is a hand-written byte scanner: it never
// allocates per token and never fails, whatever the input bytes are.
//
//   - kSpace: a maximal run of ASCII whitespace (space, \t, \n, \r, \v, \f).
//   - kPunct: one "hard" delimiter byte (see isHardDelim).
//   - kWord:  a maximal run of any other bytes that does not look variable.
//   - kVar:   such a run that looks variable (numbers, hex, ids with digit
//     runs), or the literal three bytes "<*>".
//
// Space and punctuation tokens are structural: a line only matches a
// template whose structural tokens are byte-identical. Word and variable
// tokens ("chunks") are the positions that may become parameters.
type tokKind uint8

const (
	kSpace tokKind = iota
	kPunct
	kWord
	kVar
)

// token is a byte range of a line.
type token struct {
	start, end int32
	kind       tokKind
	head       bool  // the line's header (see headerEnd), always kVar
	mask       uint8 // 1 + index of the mask that made this kVar token; 0 if none
}

// Byte classes. Chunk bytes are cChunk or cLetter (>= cChunk).
const (
	cSpace uint8 = iota
	cHard
	cChunk  // any other byte
	cLetter // an ASCII letter (a chunk byte)
)

var byteClass = func() (t [256]uint8) {
	for c := range t {
		t[c] = cChunk
		if byte(c)|0x20 >= 'a' && byte(c)|0x20 <= 'z' {
			t[c] = cLetter
		}
	}
	for _, c := range []byte(" \t\n\r\v\f") {
		t[c] = cSpace
	}
	for _, c := range []byte("=,;:()[]{}\"'|!?<>") {
		t[c] = cHard
	}
	return t
}()

func closer(c byte) byte {
	switch c {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}

// isNullOrBool reports whether w is true, false or null in any case: such
// values are parameters (Loghub's BL rule).
func isNullOrBool(w string) bool {
	switch len(w) {
	case 4:
		a, b, c, d := w[0]|0x20, w[1]|0x20, w[2]|0x20, w[3]|0x20
		return a == 't' && b == 'r' && c == 'u' && d == 'e' || a == 'n' && b == 'u' && c == 'l' && d == 'l'
	case 5:
		return w[0]|0x20 == 'f' && w[1]|0x20 == 'a' && w[2]|0x20 == 'l' && w[3]|0x20 == 's' && w[4]|0x20 == 'e'
	}
	return false
}

// isSymbols reports whether w has only ASCII symbols (no letters, digits,
// control or non-ASCII bytes).
func isSymbols(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c <= ' ' || c >= 0x7f || byteClass[c] == cLetter || isDigit(c) {
			return false
		}
	}
	return true
}

// isURLEnd reports whether c ends the variable part of a URL.
func isURLEnd(c byte) bool {
	switch c {
	case ']', ')', '}', '"', '\'', '>', ',', ';', '|':
		return true
	}
	return false
}

// isPath reports whether w is an absolute path ("/var/log/x").
func isPath(w string) bool {
	return len(w) >= 2 && w[0] == '/' && w[1] != '/'
}

// isDottedName reports whether w is a lower-case dotted name with at least
// three parts: a host name ("proxy.example.com") or a package name
// ("com.example.app"). Names with capitals (Java classes) stay words.
func isDottedName(w string) bool {
	dots, seg := 0, 0
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c == '.':
			if seg == 0 {
				return false
			}
			dots++
			seg = 0
		case c >= 'a' && c <= 'z' || isDigit(c) || c == '-' || c == '_':
			seg++
		default:
			return false
		}
	}
	return dots >= 2 && seg > 0
}

// isSizeUnit reports whether w is an abbreviated unit of data size or time.
func isSizeUnit(w string) bool {
	switch w {
	case "B", "KB", "MB", "GB", "TB", "PB", "kB", "KiB", "MiB", "GiB", "TiB", "sec", "secs":
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// looksVariable reports whether a chunk should be a parameter on sight:
// it starts with a digit (optionally after a sign), it contains a run of two
// or more digits or a digit, a dot and a digit, or it is a hexadecimal
// string with at least one digit.
// A lone digit inside a word ("jk2_init", "eth0") keeps the word literal.
func looksVariable(s string) bool {
	if len(s) == 0 {
		return false
	}
	c := s[0]
	if isDigit(c) {
		return true
	}
	if (c == '-' || c == '+') && len(s) > 1 && isDigit(s[1]) {
		return true
	}
	run, digits, allHex := 0, 0, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' && run > 0 && i+1 < len(s) && isDigit(s[i+1]) {
			return true // a version or decimal: "v1.7", "dquot_6.5.1"
		}
		if isDigit(c) {
			run++
			digits++
			if run >= 2 {
				return true
			}
		} else {
			run = 0
			if !isHex(c) {
				allHex = false
			}
		}
	}
	return digits > 0 && allHex && len(s) >= 4
}

// addTok appends the token line[start:end] of kind k to dst. It writes the
// fields in place: append of a token literal builds the token on the stack
// and copies it, and the copy's loads wait on the stores (a store-forwarding
// stall that was a quarter of tokenize's time).
func addTok(dst []token, start, end int, k tokKind) []token {
	n := len(dst)
	if n == cap(dst) {
		dst = append(dst, token{})
	} else {
		dst = dst[:n+1]
	}
	t := &dst[n]
	t.start, t.end, t.kind, t.head, t.mask = int32(start), int32(end), k, false, 0
	return dst
}

// scanChunk returns the end of the run of chunk bytes at i (i must be a
// chunk byte) and the OR of its bytes' chunkFlags. A run of two or more
// dots ("instruction......0") is punctuation between chunks: the run ends
// before it.
func scanChunk(line string, i int) (int, uint8) {
	flags := chunkFlags[line[i]]
	j := i + 1
	for j < len(line) {
		c := line[j]
		f := chunkFlags[c]
		if f == 0 || c == '.' && j+1 < len(line) && line[j+1] == '.' {
			break
		}
		flags |= f
		j++
	}
	return j, flags
}

// Flags of chunk bytes for scanChunk: every chunk byte has bChunk, those
// that are not ASCII letters bOther, and bLetter, bDigit, bDot and bHigh
// (not ASCII) say what else a byte is. Space and hard delimiter bytes have
// none.
const (
	bChunk = 1 << iota
	bOther
	bLetter
	bDigit
	bDot
	bHigh
)

var chunkFlags = func() (t [256]uint8) {
	for c := range t {
		switch byteClass[c] {
		case cLetter:
			t[c] = bChunk | bLetter
		case cChunk:
			t[c] = bChunk | bOther
			switch {
			case isDigit(byte(c)):
				t[c] |= bDigit
			case c == '.':
				t[c] |= bDot
			case c >= 0x80:
				t[c] |= bHigh
			}
		}
	}
	return t
}()

// tokenize appends the tokens of line to dst and returns it with the raw
// token count (before dates and id lists are merged, which only shortens
// the list). It stops early and reports overflow when the raw count would
// exceed max.
func tokenize(dst []token, line string, max int) ([]token, int, bool) {
	dst, raw, over, _ := tokenizeKey(dst, line, max)
	return dst, raw, over
}

// tokenizeKey is tokenize that also returns shapeKey of the tokens, or 0
// when it overflows. Each place that makes a token mixes in its shapeValue,
// known there without a branch on the kind; the tokens are hashed again
// only when a merge pass changed them.
func tokenizeKey(dst []token, line string, max int) ([]token, int, bool, uint64) {
	n := len(line)
	key := uint64(shapeBasis)             // shapeHash of dst, mixed in as tokens are made
	dates, lists, seps := false, false, 0 // whether the merge passes can apply
	listFrom := -1                        // no id list or number with a unit starts before this token; -1: none at all
	i := 0
	if h := headerEnd(line); h > 0 && max > 0 {
		dst = addTok(dst, 0, h, kVar)
		key = shapeMix(key, shapeOther)
		dst[len(dst)-1].head = true
		if idPrefix(line[:h]) != "" {
			listFrom = 0
		}
		i = h
	}
	for i < n {
		if len(dst) >= max {
			return dst, len(dst), true, 0
		}
		c := line[i]
		switch byteClass[c] {
		case cSpace:
			j := i + 1
			for j < n && byteClass[line[j]] == cSpace {
				j++
			}
			dst = addTok(dst, i, j, kSpace)
			key = shapeMix(key, shapeSpace)
			i = j
		case cHard:
			if c == ':' && i+1 < n && line[i+1] == ':' && (i == 0 || chunkFlags[line[i-1]] == 0 && line[i-1] != ':') {
				if j := colonHexEnd(line, i); j > 0 {
					dst = addTok(dst, i, j, kVar) // an IPv6 address: "::1"
					key = shapeMix(key, shapeOther)
					i = j
					continue
				}
			}
			if c == '<' && i+2 < n && line[i+1] == '*' && line[i+2] == '>' {
				// A literal "<*>" is always a parameter so that template
				// texts stay unambiguous.
				dst = addTok(dst, i, i+3, kVar)
				key = shapeMix(key, shapeOther)
				i += 3
				continue
			}
			// URL: scheme "://" rest. The scheme and "://" are literal, the
			// rest (up to whitespace or a closing bracket or quote) is one
			// parameter.
			if c == ':' && i+2 < n && line[i+1] == '/' && line[i+2] == '/' && len(dst) > 0 &&
				dst[len(dst)-1].kind == kWord && int(dst[len(dst)-1].end) == i {
				dst = addTok(dst, i, i+1, kPunct)
				dst = addTok(dst, i+1, i+3, kPunct)
				key = shapeMix(key, shapePunct(':', 1))
				key = shapeMix(key, shapePunct('/', 2))
				j := i + 3
				for j < n && byteClass[line[j]] != cSpace && !isURLEnd(line[j]) {
					j++
				}
				if j > i+3 {
					if listFrom < 0 && idPrefix(line[i+3:j]) != "" {
						listFrom = len(dst)
					}
					dst = addTok(dst, i+3, j, kVar)
					key = shapeMix(key, shapeOther)
				}
				i = j
				continue
			}
			dst = addTok(dst, i, i+1, kPunct)
			key = shapeMix(key, shapePunct(c, 1))
			if c == ',' || c == ';' {
				seps++
			}
			// A standalone empty pair "()", "[]" or "{}" is an empty
			// value: give it an empty parameter so that it lines up with
			// non-empty values ("(host)").
			if (c == '(' || c == '[' || c == '{') && i+1 < n && line[i+1] == closer(c) &&
				(i == 0 || byteClass[line[i-1]] == cSpace) {
				dst = addTok(dst, i+1, i+1, kVar)
				key = shapeMix(key, shapeOther)
			}
			i++
		default:
			if i+19 <= n && line[i+4] == '-' && isDigit(c) {
				if j := isoDateTimeEnd(line, i); j > 0 {
					// An ISO 8601 date and time with its T is one value,
					// not the three its colons would cut it into.
					dst = addTok(dst, i, j, kVar)
					key = shapeMix(key, shapeOther)
					i = j
					continue
				}
			}
			j, flags := scanChunk(line, i)
			if j < n && line[j] == ':' && j-i <= 4 && (i == 0 || line[i-1] != ':') {
				if e := colonHexEnd(line, i); e > 0 {
					// A MAC address or an IPv6 address is one value, not
					// the groups its colons would cut it into.
					dst = addTok(dst, i, e, kVar)
					key = shapeMix(key, shapeOther)
					i = e
					continue
				}
			}
			letters := flags&bOther == 0
			if line[i] == '.' && j == i+1 && i+1 < n && line[i+1] == '.' {
				for j < n && line[j] == '.' {
					j++
				}
				dst = addTok(dst, i, j, kPunct)
				key = shapeMix(key, shapePunct('.', j-i))
				i = j
				continue
			}
			// Trailing full stops end a sentence rather than belong to the
			// word: "done." is "done" + ".".
			// Paths and URLs keep them.
			e := j
			if line[j-1] == '.' && strings.IndexByte(line[i:j], '/') < 0 {
				for e > i+1 && line[e-1] == '.' {
					e--
				}
			}
			w := line[i:e]
			if e == j && j < n && line[j] == '=' {
				if p := paddedBase64End(line, i, j); p > 0 {
					// Base64 with its padding is one value: its '='s
					// would cut it into as many shapes as padding lengths.
					dst = addTok(dst, i, p, kVar)
					key = shapeMix(key, shapeOther)
					i = p
					continue
				}
			}
			var k tokKind
			switch {
			case letters && len(w) != 4 && len(w) != 5:
				k = kWord // letters only: never variable but for true/false/null
			case letters:
				k = kWord
				if isNullOrBool(w) {
					k = kVar
				}
			default:
				// A chunk without digits or dots that is not a path has
				// nothing chunkKind looks for (w is the whole chunk: only
				// dots are trimmed).
				k = kWord
				if flags&(bDigit|bDot) != 0 || w[0] == '/' {
					k = chunkKind(w)
				}
				if k == kWord && flags&bHigh != 0 && !utf8.ValidString(w) {
					k = kVar // bytes that are not UTF-8 are a value, never template text
				} else if k == kWord && flags&(bLetter|bDigit) == 0 && isSymbols(w) {
					k = kPunct // "****", "->": structure, not a value
				}
			}
			if k == kWord && isQuotedValue(line, i, j) {
				k = kVar
			}
			if k == kWord {
				if len(w) == 3 && w[0] >= 'A' && w[0] <= 'Z' && isMonthOrDay(w) {
					dates = true
				} else if len(w) <= 4 && (w[0] < 'a' || w[0] == 'k' || w[0] == 's') && isSizeUnit(w) {
					lists = true
					if u := len(dst) - 2; listFrom < 0 || u < listFrom {
						listFrom = u // the number two tokens before
						if u < 0 {
							listFrom = 0
						}
					}
				}
			} else if w[0]|0x20 >= 'a' && w[0]|0x20 <= 'z' {
				lists = true // maybe an id list ("blk_1 blk_2")
				if listFrom < 0 && idPrefix(w) != "" {
					listFrom = len(dst)
				}
			}
			if s := slashIPv4(w, k, flags); s > 0 {
				// "host/10.0.0.1": the host and the address are two values.
				hk := chunkKind(w[:s])
				if hk == kWord && flags&bHigh != 0 && !utf8.ValidString(w[:s]) {
					hk = kVar // as for a whole chunk: bytes that are not UTF-8 are never template text
				}
				dst = addTok(dst, i, i+s, hk)
				dst = addTok(dst, i+s, i+s+1, kPunct)
				i += s + 1
				k = kVar
				key = shapeMix(key, shapeOther)
				key = shapeMix(key, shapePunct('/', 1))
			}
			dst = addTok(dst, i, e, k)
			if k == kPunct {
				key = shapeMix(key, shapePunct(w[0], len(w)))
			} else {
				key = shapeMix(key, shapeOther)
			}
			for p := e; p < j; p++ {
				if len(dst) >= max {
					return dst, len(dst), true, 0
				}
				dst = addTok(dst, p, p+1, kPunct)
				key = shapeMix(key, shapePunct('.', 1))
			}
			i = j
		}
	}
	if len(dst) > max {
		return dst, len(dst), true, 0
	}
	raw := len(dst)
	if dates {
		dst = mergeDates(line, dst)
	}
	if dates {
		listFrom = 0 // mergeDates moved the tokens
	}
	if lists && listFrom >= 0 {
		dst = mergeLists(line, dst, listFrom)
	}
	if seps >= minListItems-1 {
		dst = mergeSepLists(line, dst)
	}
	if len(dst) != raw {
		// Every merge shortens the list: an unchanged length is
		// unchanged tokens.
		key = shapeHash(line, dst)
	}
	return dst, raw, false, shapeFinish(line, dst, key)
}

// isQuotedValue reports whether the chunk line[i:j] is the whole quoted
// value of a key: key="value" (tag="AudioMix"). Such a value is data, even
// a plain word, as in the labels of Loghub's Android set; an unquoted
// key=word stays literal (user=root, mode=auto name states more often than
// data: making them values lowered OpenSSH's and Linux's scores).
func isQuotedValue(line string, i, j int) bool {
	return i >= 2 && line[i-1] == '"' && line[i-2] == '=' && j < len(line) && line[j] == '"'
}

// slashIPv4 returns the index of the '/' in a variable chunk w of the form
// HOST/IPV4 (how Java prints a resolved socket address: "node-1/10.0.0.1",
// with ":port" after it as tokens of their own), or 0. HOST is one
// non-empty segment without '/', so paths stay one value.
func slashIPv4(w string, k tokKind, flags uint8) int {
	if k != kVar || flags&bDigit == 0 || len(w) < 9 {
		return 0
	}
	s := strings.IndexByte(w, '/')
	if s <= 0 || !isIPv4(w[s+1:]) {
		return 0
	}
	return s
}

// isIPv4 reports whether w is four dot-separated runs of 1-3 digits.
func isIPv4(w string) bool {
	parts, digits := 0, 0
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case isDigit(c):
			if digits++; digits > 3 {
				return false
			}
		case c == '.' && digits > 0 && parts < 3:
			parts++
			digits = 0
		default:
			return false
		}
	}
	return parts == 3 && digits > 0
}

// Character flags for chunkKind.
const (
	fDigit = 1 << iota
	fHex
	fNameChar // a-z - _ (digits are handled apart)
)

var charFlags = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		if isDigit(b) {
			t[c] |= fDigit
		}
		if isHex(b) {
			t[c] |= fHex
		}
		if b >= 'a' && b <= 'z' || b == '-' || b == '_' {
			t[c] |= fNameChar
		}
	}
	return t
}()

// chunkKind classifies a chunk in one pass: it is a parameter on sight
// (kVar) when looksVariable, isPath, isDottedName or isNullOrBool holds.
func chunkKind(w string) tokKind {
	n := len(w)
	c := w[0]
	if isDigit(c) || c == '/' && n >= 2 && w[1] != '/' {
		return kVar
	}
	if (c == '-' || c == '+') && n > 1 && isDigit(w[1]) {
		return kVar
	}
	run, digits, dots, seg := 0, 0, 0, 0
	allHex, dotted := true, true
	for i := 0; i < n; i++ {
		c := w[i]
		f := charFlags[c]
		if f&fDigit != 0 {
			run++
			digits++
			if run >= 2 {
				return kVar
			}
			seg++
			continue
		}
		if f&fNameChar != 0 {
			seg++
		} else if c == '.' {
			if run > 0 && i+1 < n && isDigit(w[i+1]) {
				return kVar
			}
			if seg == 0 {
				dotted = false
			}
			dots++
			seg = 0
		} else {
			dotted = false
		}
		run = 0
		if f&fHex == 0 {
			allHex = false
		}
	}
	if digits > 0 && allHex && n >= 4 || dotted && dots >= 2 && seg > 0 || (n == 4 || n == 5) && isNullOrBool(w) {
		return kVar
	}
	return kWord
}

// idPrefix returns the alphabetic prefix of an id-like token including its
// separator ("blk_" of "blk_-123", "node-" of "node-12"), or "".
func idPrefix(s string) string {
	i := 0
	for i < len(s) && (s[i]|0x20 >= 'a' && s[i]|0x20 <= 'z') {
		i++
	}
	if i < 2 || i >= len(s) || (s[i] != '_' && s[i] != '-') {
		return ""
	}
	return s[:i+1]
}

// mergeLists turns a space-separated list of variable tokens that share an
// id prefix ("blk_1 blk_2 blk_3") into one variable token, so that lists of
// any length fit one template.
//
// It also joins a number and its unit ("12.5 KB", "3 ms") into one
// variable token. No list or number with a unit starts before toks[from]:
// those tokens stay as they are.
func mergeLists(line string, toks []token, from int) []token {
	out := from
	for i := from; i < len(toks); i++ {
		tk := &toks[i]
		if tk.kind != kVar {
			if out != i {
				toks[out] = *tk
			}
			out++
			continue
		}
		if isDigit(line[tk.start]) && i+2 < len(toks) && toks[i+1].kind == kSpace &&
			toks[i+1].end-toks[i+1].start == 1 && toks[i+2].kind == kWord && isSizeUnit(line[toks[i+2].start:toks[i+2].end]) {
			toks[out] = token{tk.start, toks[i+2].end, kVar, false, 0}
			out++
			i += 2
			continue
		}
		if tk.end > tk.start {
			if p := idPrefix(line[tk.start:tk.end]); p != "" {
				j := i
				for j+2 < len(toks) && toks[j+1].kind == kSpace && toks[j+1].end-toks[j+1].start == 1 &&
					toks[j+2].kind == kVar && strings.HasPrefix(line[toks[j+2].start:toks[j+2].end], p) {
					j += 2
				}
				if j > i {
					toks[out] = token{tk.start, toks[j].end, kVar, false, 0}
					out++
					i = j
					continue
				}
			}
		}
		if out != i {
			toks[out] = *tk
		}
		out++
	}
	return toks[:out]
}

// isMonthOrDay reports whether w is an English month or weekday
// abbreviation ("Jan", "Sat").
func isMonthOrDay(w string) bool {
	if len(w) != 3 || w[0] < 'A' || w[0] > 'Z' {
		return false
	}
	switch w {
	case "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
		"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun":
		return true
	}
	return false
}

func isDigits(s string, min, max int) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// colonHexEnd returns the end of the hex groups and colons at i (not after
// a colon: the run is taken whole) when they are one address, or 0: six
// or more pairs of hex digits (a MAC address, 00:1a:2b:3c:4d:5e, or a
// longer id of pairs such as BGL's 12-pair chip ids, which Loghub's truth
// writes as one <*>), or an IPv6 address (eight
// groups of 1-4 hex digits, or fewer around one "::": fe80::1, ::1,
// 2001:db8::8a2e:370:7334). The run of hex digits and colons must end the
// chunk (the line's end or a byte that is neither a chunk byte nor a
// colon); one colon after it that is not part of a "::" ends a sentence
// ("fe80::1: unreachable") and is left out. A time (12:30:45) is neither.
func colonHexEnd(line string, i int) int {
	e := i
	for e < len(line) && (isHex(line[e]) || line[e] == ':') {
		e++
	}
	if e < len(line) && chunkFlags[line[e]] != 0 {
		return 0 // the chunk goes on: "12:30:45.5", "fe80::1%eth0", a word
	}
	r := line[i:e]
	if strings.HasSuffix(r, ":") && !strings.HasSuffix(r, "::") {
		r = r[:len(r)-1]
	}
	groups, pairs, empty := 0, true, 0
	for g := range strings.SplitSeq(r, ":") {
		if len(g) > 4 {
			return 0
		}
		if len(g) == 0 {
			empty++
		} else {
			groups++
		}
		pairs = pairs && len(g) == 2
	}
	switch d := strings.Count(r, "::"); {
	case d == 0 && pairs && groups >= 6:
	case d == 0 && empty == 0 && groups == 8:
	case d == 1 && !strings.Contains(r, ":::") && groups >= 1 && groups <= 7:
	default:
		return 0
	}
	return i + len(r)
}

// paddedBase64End returns the end of the padding when the chunk line[i:j]
// and the one or two '='s after it are base64 with its padding (a digest, a
// nonce, a key: "c2lnbmVkIGJ5IHF1YXJyeQ=="), or 0. The chunk is at least 6
// bytes of the base64 alphabet (A-Z a-z 0-9 + /) with a capital and a small
// letter or a digit, so that a word and its '=' ("logname= uid=0") stay
// apart; with its padding its length is a multiple of four; after the
// padding comes the line's end, a blank or one of ,;)]}"'&.
func paddedBase64End(line string, i, j int) int {
	p := j
	for p < len(line) && p < j+2 && line[p] == '=' {
		p++
	}
	if p == j || j-i < 6 || (p-i)%4 != 0 {
		return 0
	}
	if p < len(line) && byteClass[line[p]] != cSpace && strings.IndexByte(",;)]}\"'&", line[p]) < 0 {
		return 0
	}
	upper, other := false, false
	for k := i; k < j; k++ {
		switch c := line[k]; {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z' || isDigit(c):
			other = true
		case c != '+' && c != '/':
			return 0
		}
	}
	if !upper || !other {
		return 0
	}
	return p
}

// isoDateTimeEnd returns the end of the ISO 8601 / RFC 3339 date and time
// that starts line[i:], or 0: YYYY-MM-DD, T or t, hh:mm:ss, an optional
// fraction of 1-9 digits after "." or ",", and an optional zone (Z, z,
// ±hh:mm or ±hhmm), ending where the chunk ends (the line's end or a byte
// that is neither a letter nor a digit). "2026-11-29T00:00:00.010Z" is one
// parameter (engine version 4): a log's own time, which the encoder stores
// as the record's ts. The date with a space instead of T stays as it was,
// as the Loghub truth writes it ("<*> <*>:<*>:<*>").
func isoDateTimeEnd(line string, i int) int {
	n := len(line)
	if i+19 > n || line[i+4] != '-' || line[i+7] != '-' || line[i+10]|0x20 != 't' || line[i+13] != ':' || line[i+16] != ':' {
		return 0
	}
	for _, k := range [...]int{0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18} {
		if !isDigit(line[i+k]) {
			return 0
		}
	}
	j := i + 19
	if j+1 < n && (line[j] == '.' || line[j] == ',') && isDigit(line[j+1]) {
		k := j + 1
		for k < n && isDigit(line[k]) {
			k++
		}
		if k-j-1 > 9 {
			return 0 // more than 9 fraction digits
		}
		j = k
	}
	switch {
	case j < n && line[j]|0x20 == 'z':
		j++
	case j+5 <= n && (line[j] == '+' || line[j] == '-') && isDigit(line[j+1]) && isDigit(line[j+2]):
		if j+6 <= n && line[j+3] == ':' && isDigit(line[j+4]) && isDigit(line[j+5]) {
			j += 6
		} else if isDigit(line[j+3]) && isDigit(line[j+4]) {
			j += 5
		}
	}
	if j < n && (isDigit(line[j]) || line[j]|0x20 >= 'a' && line[j]|0x20 <= 'z' || line[j] >= 0x80) {
		return 0 // the chunk goes on: not a date and time alone
	}
	return j
}

// mergeDates rewrites a syslog-style date ("[Sat ]Jun 18 02:08:10[ 2005]")
// so that the calendar part and the hour form one variable token ("Sat Jun
// 18 02"), followed by ":" minutes ":" seconds (with the year, if any), as
// the Loghub ground truth writes it ("<*>:<*>:<*>"). The tokens are
// compacted in place.
func mergeDates(line string, toks []token) []token {
	out := 0
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		if tk.kind == kWord && isMonthOrDay(line[tk.start:tk.end]) {
			if j, ok := matchDate(line, toks, i); ok {
				toks[out] = token{tk.start, toks[j].end, kVar, false, 0}
				out++
				// minutes, colon, seconds; a year after the seconds joins them
				copy(toks[out:], toks[j+1:j+5])
				out += 4
				i = j + 4
				if i+2 < len(toks) && toks[i+1].kind == kSpace && toks[i+1].end-toks[i+1].start == 1 &&
					isDigits(line[toks[i+2].start:toks[i+2].end], 4, 4) {
					toks[out-1].end = toks[i+2].end
					i += 2
				}
				continue
			}
		}
		toks[out] = tk
		out++
	}
	return toks[:out]
}

// matchDate matches [Day SP] Mon SP DD SP HH ":" MM ":" SS at toks[i] and
// returns the index of the HH token.
func matchDate(line string, toks []token, i int) (int, bool) {
	text := func(k int) string { return line[toks[k].start:toks[k].end] }
	isSpace := func(k int) bool { return k < len(toks) && toks[k].kind == kSpace }
	isNum := func(k, min, max int) bool { return k < len(toks) && isDigits(text(k), min, max) }
	isColon := func(k int) bool { return k < len(toks) && toks[k].kind == kPunct && text(k) == ":" }
	k := i
	if isSpace(k+1) && k+2 < len(toks) && toks[k+2].kind == kWord && isMonthOrDay(text(k+2)) {
		k += 2 // weekday then month
	}
	if !(isSpace(k+1) && isNum(k+2, 1, 2) && isSpace(k+3) && isNum(k+4, 1, 2) &&
		isColon(k+5) && isNum(k+6, 2, 2) && isColon(k+7) && isNum(k+8, 2, 2)) {
		return 0, false
	}
	return k + 4, true
}

// minListItems is the fewest items a separated list must have to be one
// parameter.
const minListItems = 3

// mergeSepLists turns a list of minListItems or more single-chunk items
// separated by one ',' or ';' (and at most one space), such as "a, b, c" or
// "x;y;z", into one variable token: a list of a variable number of names is
// one value, so lines that differ only in its length share a template. The
// items must all be words (then with a space after each separator) or all
// variables; lists of enumeration constants stay literal.
func mergeSepLists(line string, toks []token) []token {
	item := func(k int) bool {
		return k < len(toks) && (toks[k].kind == kWord || toks[k].kind == kVar) && !toks[k].head
	}
	// next returns the index of the item after the separator at k, or -1.
	next := func(k int, sep byte) int {
		if k >= len(toks) || toks[k].kind != kPunct || toks[k].end-toks[k].start != 1 || line[toks[k].start] != sep {
			return -1
		}
		k++
		if k < len(toks) && toks[k].kind == kSpace && toks[k].end-toks[k].start == 1 && line[toks[k].start] == ' ' {
			k++
		}
		if !item(k) {
			return -1
		}
		return k
	}
	out := 0
	for i := 0; i < len(toks); i++ {
		if item(i) && (i == 0 || toks[i-1].kind == kSpace || toks[i-1].kind == kPunct) && i+1 < len(toks) &&
			toks[i+1].kind == kPunct && toks[i+1].end-toks[i+1].start == 1 {
			sep := line[toks[i+1].start]
			if sep == ',' || sep == ';' {
				last, n := i, 1
				for {
					k := next(last+1, sep)
					if k < 0 {
						break
					}
					last, n = k, n+1
				}
				// The list must end at a boundary, not inside a chunk run,
				// its items must be of one kind, and a list of enumeration
				// constants ("TERM, HUP, INT") is literal.
				same, consts, spaced := true, true, true
				for k := i; k <= last; k++ {
					switch toks[k].kind {
					case kWord, kVar:
						same = same && toks[k].kind == toks[i].kind
						consts = consts && isConstantCase(line[toks[k].start:toks[k].end])
					case kPunct:
						spaced = spaced && toks[k+1].kind == kSpace
					}
				}
				if toks[i].kind == kWord && !spaced {
					same = false // "Service,attach,pid" is one name
				}
				if n >= minListItems && same && !consts &&
					(last+1 >= len(toks) || toks[last+1].kind != kWord && toks[last+1].kind != kVar) {
					toks[out] = token{toks[i].start, toks[last].end, kVar, false, 0}
					out++
					i = last
					continue
				}
			}
		}
		toks[out] = toks[i]
		out++
	}
	return toks[:out]
}
