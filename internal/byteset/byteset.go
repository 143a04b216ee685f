// Package byteset is a set of byte values, as the search planner and the
// timestamp renderer both need one: which bytes a template's parameters
// hold, which bytes a timestamp layout can write.
package byteset

// Set is a set of bytes: bit b&63 of word b>>6 for byte b. The zero value
// is empty.
type Set [4]uint64

// Add puts b in the set.
func (s *Set) Add(b byte) { s[b>>6] |= 1 << (b & 63) }

// AddString puts every byte of str in the set.
func (s *Set) AddString(str string) {
	for i := 0; i < len(str); i++ {
		s.Add(str[i])
	}
}

// Has reports whether b is in the set.
func (s *Set) Has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }

// Covers reports whether every byte of o is in s.
func (s *Set) Covers(o *Set) bool {
	return o[0]&^s[0] == 0 && o[1]&^s[1] == 0 && o[2]&^s[2] == 0 && o[3]&^s[3] == 0
}

// Union adds o's bytes to s.
func (s *Set) Union(o *Set) {
	for i := range s {
		s[i] |= o[i]
	}
}
