package mining

import (
	"bufio"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The tokenizer is tuned for speed (issue 14), and its output decides every
// template, so a rewrite must not change it by one token. This file keeps
// the straightforward version it was tuned from (the functions named *Ref,
// as of the tuning) and checks that tokenize gives the very same tokens, raw
// count, overflow and shape key (from shapeKey and tokenizeKey, also of
// masked tokens) on Loghub's lines (whole, headers included, and their
// Content column), generated lines, random junk and fuzzed input.

// checkSameTokens fails t when tokenize and tokenizeRef disagree on line.
func checkSameTokens(t *testing.T, line string) {
	t.Helper()
	for _, max := range []int{HardMaxTokens, 7, 40} {
		want, wraw, wover := tokenizeRef(nil, line, max)
		got, graw, gover := tokenize(nil, line, max)
		if !slices.Equal(got, want) || graw != wraw || gover != wover {
			t.Fatalf("tokenize(%q, %d) = %v %d %v, want %v %d %v", line, max, got, graw, gover, want, wraw, wover)
		}
		_, _, _, key := tokenizeKey(nil, line, max)
		if k, wk := shapeKey(line, got), shapeKeyRef(line, want); k != wk || !gover && key != wk {
			t.Fatalf("shapeKey(%q) = %x (from tokenizeKey %x), want %x", line, k, key, wk)
		}
	}
	// Masks cut tokens, the header's too: the pieces keep its head flag.
	toks, _, _ := tokenize(nil, line, HardMaxTokens)
	masked, ok := applyMasks(refMasks, line, toks, nil)
	if !ok {
		masked = toks
	}
	if k, wk := shapeKey(line, masked), shapeKeyRef(line, masked); k != wk {
		t.Fatalf("shapeKey(%q) with masks = %x, want %x", line, k, wk)
	}
}

var refMasks = []compiledMask{{"n", regexp.MustCompile(`[0-9]+|:`)}, {"w", regexp.MustCompile(`[a-z]{3}`)}}

func TestTokenizeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	alpha := []byte("aZ19 .,;:=()<*>[]{}/-_+\"'|!?\t\x00\xc3\xa9\xff")
	for i := 0; i < 20000; i++ {
		b := make([]byte, r.IntN(120))
		for j := range b {
			b[j] = alpha[r.IntN(len(alpha))]
		}
		checkSameTokens(t, string(b))
	}
	for _, l := range genCorpus(5000, 14) {
		checkSameTokens(t, l)
	}
	data, names := loadLoghub(t)
	if data == nil {
		t.Log("Loghub-2k absent: generated and random lines only")
		return
	}
	for _, name := range names {
		for _, l := range data[name] {
			checkSameTokens(t, l)
		}
		f, err := os.Open(filepath.Join(loghubDir(), name, name+"_2k.log"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			checkSameTokens(t, sc.Text())
		}
		f.Close()
	}
}

func FuzzTokenizeMatchesReference(f *testing.F) {
	for _, l := range genCorpus(50, 1) {
		f.Add(l)
	}
	f.Add("2026-11-29T00:00:00.010Z Normal Scheduled pod/api-7a31ff58f4-f08f8 assigned to node-8")
	f.Add("Jun 18 02:08:10 combo sshd(pam_unix)[19939]: size 12.5 KB, blk_1 blk_2 blk_3 a, b, c x;y;z")
	f.Add(`token c2lnbmVkIGJ5IHF1YXJyeQ== nonce="Zm9vYmE=", k=QUJDRA==x logname= ab+/Cd== Abcdefg=`)
	f.Add("mac 00:1a:2b:3c:4d:5e from [fe80::1]:80 ::1 2001:db8::8a2e:370:7334: at 12:30:45 a::b Foo::Bar 1:2:3:4:5:6:7:8 fe80::1%eth0")
	f.Fuzz(func(t *testing.T, line string) { checkSameTokens(t, line) })
}

// The reference tokenizer.

var isoRef = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}([.,][0-9]{1,9})?([Zz]|[+-][0-9]{2}:?[0-9]{2})?`)

var b64Ref = regexp.MustCompile(`^[A-Za-z0-9+/]+={1,2}`)

var (
	hexColonRun = regexp.MustCompile(`^[0-9A-Fa-f:]+`)
	macRef      = regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5,}$`)
	ipv6FullRef = regexp.MustCompile(`^([0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}$`)
	ipv6ZipRef  = regexp.MustCompile(`^(([0-9A-Fa-f]{1,4}:)*[0-9A-Fa-f]{1,4})?::(([0-9A-Fa-f]{1,4}:)*[0-9A-Fa-f]{1,4})?$`)
)

// colonHexRef: a MAC-like run of six or more hex pairs or an IPv6
// address at i, ending the chunk (engine version 5), or 0.
func colonHexRef(line string, i int) int {
	r := hexColonRun.FindString(line[i:])
	if !strings.Contains(r, ":") {
		return 0
	}
	if e := i + len(r); e < len(line) && byteClass[line[e]] >= cChunk {
		return 0
	}
	if strings.HasSuffix(r, ":") && !strings.HasSuffix(r, "::") {
		r = r[:len(r)-1]
	}
	if macRef.MatchString(r) || ipv6FullRef.MatchString(r) ||
		ipv6ZipRef.MatchString(r) && len(strings.FieldsFunc(r, func(c rune) bool { return c == ':' })) <= 7 && r != "::" {
		return i + len(r)
	}
	return 0
}

func isAlnumOrHigh(c byte) bool {
	return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z' || c >= 0x80
}

func tokenizeRef(dst []token, line string, max int) ([]token, int, bool) {
	n := len(line)
	dates, lists, seps := false, false, 0 // whether the merge passes can apply
	i := 0
	if h := headerEnd(line); h > 0 && max > 0 {
		dst = append(dst, token{start: 0, end: int32(h), kind: kVar, head: true})
		i = h
	}
	for i < n {
		if len(dst) >= max {
			return dst, len(dst), true
		}
		c := line[i]
		switch byteClass[c] {
		case cSpace:
			j := i + 1
			for j < n && byteClass[line[j]] == cSpace {
				j++
			}
			dst = append(dst, token{int32(i), int32(j), kSpace, false, 0})
			i = j
		case cHard:
			if c == ':' && (i == 0 || byteClass[line[i-1]] < cChunk && line[i-1] != ':') {
				if e := colonHexRef(line, i); e > 0 {
					dst = append(dst, token{int32(i), int32(e), kVar, false, 0})
					i = e
					continue
				}
			}
			if c == '<' && i+2 < n && line[i+1] == '*' && line[i+2] == '>' {
				// A literal "<*>" is always a parameter so that template
				// texts stay unambiguous.
				dst = append(dst, token{int32(i), int32(i + 3), kVar, false, 0})
				i += 3
				continue
			}
			// URL: scheme "://" rest. The scheme and "://" are literal, the
			// rest (up to whitespace or a closing bracket or quote) is one
			// parameter.
			if c == ':' && i+2 < n && line[i+1] == '/' && line[i+2] == '/' && len(dst) > 0 &&
				dst[len(dst)-1].kind == kWord && int(dst[len(dst)-1].end) == i {
				dst = append(dst, token{int32(i), int32(i + 1), kPunct, false, 0}, token{int32(i + 1), int32(i + 3), kPunct, false, 0})
				j := i + 3
				for j < n && byteClass[line[j]] != cSpace && !isURLEnd(line[j]) {
					j++
				}
				if j > i+3 {
					dst = append(dst, token{int32(i + 3), int32(j), kVar, false, 0})
				}
				i = j
				continue
			}
			dst = append(dst, token{int32(i), int32(i + 1), kPunct, false, 0})
			if c == ',' || c == ';' {
				seps++
			}
			// A standalone empty pair "()", "[]" or "{}" is an empty
			// value: give it an empty parameter so that it lines up with
			// non-empty values ("(host)").
			if (c == '(' || c == '[' || c == '{') && i+1 < n && line[i+1] == closer(c) &&
				(i == 0 || byteClass[line[i-1]] == cSpace) {
				dst = append(dst, token{int32(i + 1), int32(i + 1), kVar, false, 0})
			}
			i++
		default:
			if e := colonHexRef(line, i); e > 0 && (i == 0 || line[i-1] != ':') {
				dst = append(dst, token{int32(i), int32(e), kVar, false, 0})
				i = e
				continue
			}
			// An ISO 8601 date and time with its T is one value (engine
			// version 4).
			if m := isoRef.FindStringIndex(line[i:]); m != nil {
				if e := i + m[1]; e == n || !isAlnumOrHigh(line[e]) {
					dst = append(dst, token{int32(i), int32(e), kVar, false, 0})
					i = e
					continue
				}
			}
			j := i + 1
			letters := byteClass[c] == cLetter // all bytes so far are letters
			for j < n {
				cl := byteClass[line[j]]
				if cl < cChunk {
					break
				}
				if cl == cChunk {
					letters = false
					// A run of two or more dots ("instruction......0")
					// is punctuation between chunks.
					if line[j] == '.' && j+1 < n && line[j+1] == '.' {
						break
					}
				}
				j++
			}
			if line[i] == '.' && j == i+1 && i+1 < n && line[i+1] == '.' {
				for j < n && line[j] == '.' {
					j++
				}
				dst = append(dst, token{int32(i), int32(j), kPunct, false, 0})
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
			// Base64 with its padding is one value (engine version 5).
			if m := b64Ref.FindStringIndex(line[i:]); e == j && m != nil && i+m[1] > j && (m[1]-m[0])%4 == 0 &&
				j-i >= 6 && strings.ContainsAny(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") && strings.ContainsAny(w, "abcdefghijklmnopqrstuvwxyz0123456789") {
				if p := i + m[1]; p == n || byteClass[line[p]] == cSpace || strings.IndexByte(",;)]}\"'&", line[p]) >= 0 {
					dst = append(dst, token{int32(i), int32(p), kVar, false, 0})
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
				k = chunkKind(w)
				if k == kWord && !utf8.ValidString(w) {
					k = kVar // bytes that are not UTF-8 are a value, never template text
				} else if k == kWord && isSymbols(w) {
					k = kPunct // "****", "->": structure, not a value
				}
			}
			if k == kWord && strings.HasSuffix(line[:i], "=\"") && strings.HasPrefix(line[j:], "\"") {
				k = kVar
			}
			if k == kWord {
				if len(w) == 3 && w[0] >= 'A' && w[0] <= 'Z' && isMonthOrDay(w) {
					dates = true
				} else if len(w) <= 4 && (w[0] < 'a' || w[0] == 'k' || w[0] == 's') && isSizeUnit(w) {
					lists = true
				}
			} else if w[0]|0x20 >= 'a' && w[0]|0x20 <= 'z' {
				lists = true // maybe an id list ("blk_1 blk_2")
			}
			if s := strings.IndexByte(w, '/'); k == kVar && s > 0 && isIPv4Ref(w[s+1:]) {
				hk := chunkKind(w[:s])
				if hk == kWord && !utf8.ValidString(w[:s]) {
					hk = kVar
				}
				dst = append(dst, token{int32(i), int32(i + s), hk, false, 0},
					token{int32(i + s), int32(i + s + 1), kPunct, false, 0})
				i += s + 1
			}
			dst = append(dst, token{int32(i), int32(e), k, false, 0})
			for p := e; p < j; p++ {
				if len(dst) >= max {
					return dst, len(dst), true
				}
				dst = append(dst, token{int32(p), int32(p + 1), kPunct, false, 0})
			}
			i = j
		}
	}
	if len(dst) > max {
		return dst, len(dst), true
	}
	raw := len(dst)
	if dates {
		dst = mergeDates(line, dst)
	}
	if lists {
		dst = mergeListsRef(line, dst)
	}
	if seps >= minListItems-1 {
		dst = mergeSepLists(line, dst)
	}
	return dst, raw, false
}

func mergeListsRef(line string, toks []token) []token {
	out := 0
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		if tk.kind == kVar && isDigit(line[tk.start]) && i+2 < len(toks) && toks[i+1].kind == kSpace &&
			toks[i+1].end-toks[i+1].start == 1 && toks[i+2].kind == kWord && isSizeUnit(line[toks[i+2].start:toks[i+2].end]) {
			toks[out] = token{tk.start, toks[i+2].end, kVar, false, 0}
			out++
			i += 2
			continue
		}
		if tk.kind == kVar && tk.end > tk.start {
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
		toks[out] = tk
		out++
	}
	return toks[:out]
}

func shapeKeyRef(line string, toks []token) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	first := -1
	if len(toks) > 0 && toks[0].head {
		first = -2 // the first word after the header names the event
	}
	for i := range toks {
		tk := &toks[i]
		var v uint64
		switch tk.kind {
		case kSpace:
			v = 1
		case kPunct:
			// first byte and length; match compares the bytes
			v = 2 | uint64(line[tk.start])<<8 | uint64(tk.end-tk.start)<<16
		default:
			if first == -1 || first == -2 && !toks[i].head {
				first = i
			}
			v = 7
		}
		h = (h ^ v) * prime
	}
	h ^= uint64(len(toks))
	h *= prime
	if first >= 0 && toks[first].kind == kWord && isPlainWord(line[toks[first].start:toks[first].end]) {
		tk := toks[first]
		for p := tk.start; p < tk.end; p++ {
			h ^= uint64(line[p])
			h *= prime
		}
		h ^= 0xff
		h *= prime
	}
	return h
}

var ipv4Ref = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,3}){3}$`)

func isIPv4Ref(w string) bool { return ipv4Ref.MatchString(w) }
