package eventtime

import (
	"bytes"
	"time"
)

// Renderer is Render for a stream of timestamps, such as the lines of a
// file, where many in a row fall in one second: per layout it keeps the
// text of the last second seen twice running, rendered once, and writes
// only the fraction's digits anew. Its output is Render's, byte for byte.
// The zero Renderer is ready; it is not safe for concurrent use.
type Renderer struct {
	e [numLayouts]rendered
}

// rendered is one layout's second: text is it rendered at the second's
// start, its fraction's digits text[at:at+n].
type rendered struct {
	ok      bool
	sec     int64
	residue []byte
	text    []byte
	at, n   int
	// The last second rendered without the cache: the next timestamp of
	// that second fills it, so a stream of distinct seconds renders each
	// once.
	missSec     int64
	missResidue []byte
	missSet     bool
}

// Render appends t as Render(dst, t, layout, residue) does.
func (r *Renderer) Render(dst []byte, t time.Time, layout LayoutID, residue []byte) []byte {
	if !layout.Valid() {
		return dst
	}
	sec := t.Unix()
	e := &r.e[layout]
	if !e.ok || e.sec != sec || !bytes.Equal(e.residue, residue) {
		if !e.missSet || e.missSec != sec || !bytes.Equal(e.missResidue, residue) || !e.fill(sec, layout, residue) {
			e.missSec, e.missResidue, e.missSet = sec, append(e.missResidue[:0], residue...), true
			return Render(dst, t, layout, residue)
		}
	}
	dst = append(dst, e.text[:e.at]...)
	if e.n > 0 {
		f := t.Nanosecond() / pow10[9-e.n]
		for i := e.n - 1; i >= 0; i-- {
			dst = append(dst, byte('0'+f/pow10[i]%10))
		}
	}
	return append(dst, e.text[e.at+e.n:]...)
}

// fill renders second sec at its start and at its last nanosecond: the
// bytes that differ are the fraction's digits (zeros, then nines), the
// rest is the same for every instant of the second. False when that does
// not hold (a second before 1970, a number that grows a digit): the
// caller renders with Render.
func (e *rendered) fill(sec int64, layout LayoutID, residue []byte) bool {
	e.ok = false
	if sec < 0 || len(residue) > 0 && decodeResidue(layout, residue).nanos != 0 {
		return false // the fraction's digits are not the time's (AppendNanos)
	}
	a := Render(e.text[:0], time.Unix(sec, 0), layout, residue)
	b := Render(make([]byte, 0, 64), time.Unix(sec, 999_999_999), layout, residue)
	e.text = a
	if len(a) != len(b) {
		return false
	}
	i, j := 0, len(a)
	for i < j && a[i] == b[i] {
		i++
	}
	for j > i && a[j-1] == b[j-1] {
		j--
	}
	if j-i > 9 {
		return false
	}
	for k := i; k < j; k++ {
		if a[k] != '0' || b[k] != '9' {
			return false
		}
	}
	e.ok, e.sec, e.residue, e.at, e.n = true, sec, append(e.residue[:0], residue...), i, j-i
	return true
}
