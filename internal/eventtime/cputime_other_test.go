//go:build !unix

package eventtime

func cpuNanos() int64 { return 0 }
