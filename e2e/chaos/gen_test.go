//go:build chaos

package chaos

import (
	"fmt"
	"math/rand"
)

// genLines returns n deterministic log lines of tenant for seed: a handful
// of event shapes with varying parameters, so the miner builds and widens
// templates, plus the odd repeated line (the checks are multisets).
func genLines(seed int64, tenant string, n int) []string {
	rng := rand.New(rand.NewSource(seed ^ int64(len(tenant))*7919 ^ int64(tenant[0])))
	users := []string{"alice", "bob", "carol", "dave", "eve", "mallory", "trent"}
	paths := []string{"/api/v1/orders", "/api/v1/users", "/login", "/healthz", "/static/app.js", "/api/v2/search"}
	out := make([]string, n)
	ts := int64(1767225600) // 2026-01-01
	for i := range out {
		ts += int64(rng.Intn(3))
		stamp := fmt.Sprintf("2026-01-%02dT%02d:%02d:%02dZ", 1+(ts/86400)%28, (ts/3600)%24, (ts/60)%60, ts%60)
		switch k := rng.Intn(10); {
		case k < 3:
			out[i] = fmt.Sprintf("%s %s INFO request method=GET path=%s status=%d bytes=%d dur=%dms", stamp, tenant,
				paths[rng.Intn(len(paths))], []int{200, 200, 200, 304, 404, 500}[rng.Intn(6)], rng.Intn(90000), rng.Intn(900))
		case k < 5:
			out[i] = fmt.Sprintf("%s %s INFO user %s logged in from 10.%d.%d.%d", stamp, tenant, users[rng.Intn(len(users))], rng.Intn(256), rng.Intn(256), rng.Intn(256))
		case k < 6:
			out[i] = fmt.Sprintf("%s %s WARN cache miss ratio %.2f on shard %d", stamp, tenant, rng.Float64(), rng.Intn(16))
		case k < 7:
			out[i] = fmt.Sprintf("%s %s ERROR payment %08x failed: card declined by issuer %s", stamp, tenant, rng.Uint32(), []string{"visa", "amex", "mc"}[rng.Intn(3)])
		case k < 8:
			out[i] = fmt.Sprintf("%s %s INFO job %d finished in %d ms with %d items", stamp, tenant, rng.Intn(5000), rng.Intn(100000), rng.Intn(1000))
		case k < 9 && i > 0:
			out[i] = out[rng.Intn(i)] // a repeat
		default:
			out[i] = fmt.Sprintf("%s %s DEBUG gc pause %dus heap %dMB goroutines %d", stamp, tenant, rng.Intn(5000), rng.Intn(4096), rng.Intn(2000))
		}
	}
	return out
}
