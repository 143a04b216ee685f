package recfile

import "unsafe"

// unsafeBytes returns the bytes of s without copying. The writer only reads
// them.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
