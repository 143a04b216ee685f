package recfile

import "unsafe"

// unsafeBytes returns the bytes of s without copying. The writer only reads
// them.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// unsafeString returns b as a string without copying; b must not change
// afterwards (the encoder's arena only grows).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
