package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/quarrylake/quarry/streams"
)

// Environment variables Access reads.
const (
	// EnvTokens lists bearer tokens and their tenants:
	// "tok1=tenantA,tenantB;tok2=*" (* = every tenant).
	EnvTokens = "QUARRY_SERVE_TOKENS"
	// EnvBasicUser and EnvBasicPassword set one basic-auth user, granted
	// the tenants of EnvBasicTenants (default every tenant).
	EnvBasicUser     = "QUARRY_SERVE_BASIC_USER"
	EnvBasicPassword = "QUARRY_SERVE_BASIC_PASSWORD"
	EnvBasicTenants  = "QUARRY_SERVE_BASIC_TENANTS"
)

// Grant is what a credential may read: Tenants, or every tenant when nil.
type Grant struct {
	Tenants []string
}

// All reports whether g grants every tenant.
func (g Grant) All() bool { return g.Tenants == nil }

// Allows reports whether g grants tenant.
func (g Grant) Allows(tenant string) bool { return g.All() || slices.Contains(g.Tenants, tenant) }

// Access checks a request's credentials. The zero Access has none
// configured and lets every request through with every tenant.
type Access struct {
	tokens []token
	user   [32]byte
	pass   [32]byte
	basic  *Grant
}

type token struct {
	hash  [32]byte
	grant Grant
}

// ParseGrant parses a tenant list: "*" or "a,b,c".
func parseGrant(s string) (Grant, error) {
	s = strings.TrimSpace(s)
	if s == "*" {
		return Grant{}, nil
	}
	var g Grant
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if err := streams.CheckToken(t); err != nil {
			return Grant{}, fmt.Errorf("tenant %q: %w", t, err)
		}
		g.Tenants = append(g.Tenants, t)
	}
	return g, nil
}

// AccessFromEnv reads EnvTokens and the basic-auth variables. Every
// problem is reported, naming the variable; a secret is never echoed.
func AccessFromEnv(getenv func(string) string) (*Access, error) {
	a := &Access{}
	var errs []error
	if v := strings.TrimSpace(getenv(EnvTokens)); v != "" {
		for i, part := range strings.Split(v, ";") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			tok, tenants, ok := strings.Cut(part, "=")
			tok = strings.TrimSpace(tok)
			if !ok || tok == "" {
				errs = append(errs, fmt.Errorf("%s entry %d: want TOKEN=TENANT[,TENANT...] or TOKEN=*", EnvTokens, i+1))
				continue
			}
			g, err := parseGrant(tenants)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s entry %d: %w", EnvTokens, i+1, err))
				continue
			}
			a.tokens = append(a.tokens, token{hash: sha256.Sum256([]byte(tok)), grant: g})
		}
	}
	user, pass := getenv(EnvBasicUser), getenv(EnvBasicPassword)
	switch {
	case user != "" && pass != "":
		g := Grant{}
		if v := getenv(EnvBasicTenants); v != "" {
			var err error
			if g, err = parseGrant(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", EnvBasicTenants, err))
			}
		}
		a.user, a.pass, a.basic = sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass)), &g
	case user != "" || pass != "":
		errs = append(errs, fmt.Errorf("%s and %s must be set together", EnvBasicUser, EnvBasicPassword))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return a, nil
}

// Enabled reports whether any credential is configured.
func (a *Access) Enabled() bool { return a != nil && (len(a.tokens) > 0 || a.basic != nil) }

// errUnauthorized: no or wrong credentials.
var errUnauthorized = errors.New("missing or wrong credentials")

// Check returns the grant of r's credentials: a bearer token or basic auth.
// With no credentials configured every request gets every tenant.
func (a *Access) Check(r *http.Request) (Grant, error) {
	if !a.Enabled() {
		return Grant{}, nil
	}
	h := r.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(h, "Bearer "); ok && len(a.tokens) > 0 {
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		for _, t := range a.tokens {
			if subtle.ConstantTimeCompare(sum[:], t.hash[:]) == 1 {
				return t.grant, nil
			}
		}
		return Grant{}, errUnauthorized
	}
	if u, p, ok := r.BasicAuth(); ok && a.basic != nil {
		us, ps := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		if subtle.ConstantTimeCompare(us[:], a.user[:])&subtle.ConstantTimeCompare(ps[:], a.pass[:]) == 1 {
			return *a.basic, nil
		}
	}
	return Grant{}, errUnauthorized
}

// challenge is the WWW-Authenticate header of a 401.
func (a *Access) challenge() string {
	if a.basic != nil {
		return `Basic realm="quarry", charset="UTF-8"`
	}
	return `Bearer realm="quarry"`
}
