package web

import (
	"encoding/base64"
	"io"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestAccessFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		enabled bool
		err     string // substring; "" = no error
	}{
		{name: "none", env: nil},
		{name: "tokens", env: map[string]string{EnvTokens: "tok1=acme,beta; tok2=*"}, enabled: true},
		{name: "basic", env: map[string]string{EnvBasicUser: "u", EnvBasicPassword: "p"}, enabled: true},
		{name: "no tenant", env: map[string]string{EnvTokens: "tok1="}, err: "QUARRY_SERVE_TOKENS entry 1"},
		{name: "no token", env: map[string]string{EnvTokens: "=acme"}, err: "entry 1: want TOKEN=TENANT"},
		{name: "bad tenant", env: map[string]string{EnvTokens: "a=*;b=ac me"}, err: "entry 2: tenant \"ac me\""},
		{name: "user only", env: map[string]string{EnvBasicUser: "u"}, err: "must be set together"},
		{name: "every problem", env: map[string]string{EnvTokens: "x", EnvBasicPassword: "p"}, err: "must be set together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := AccessFromEnv(env(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "tok1") || tc.name == "every problem" && !strings.Contains(err.Error(), "entry 1") {
					t.Fatalf("err %v: echoes a secret or misses a problem", err)
				}
				return
			}
			if err != nil || a.Enabled() != tc.enabled {
				t.Fatalf("err %v, enabled %v", err, a.Enabled())
			}
		})
	}
}

func basic(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }

// TestAccess: credentials are checked on every API path, a token limited to
// tenants gets 403 for others and its searches see only its tenants, and the
// page's static files need none.
func TestAccess(t *testing.T) {
	a, err := AccessFromEnv(env(map[string]string{EnvTokens: "alltok=*;acmetok=acme",
		EnvBasicUser: "ops", EnvBasicPassword: "s3cret", EnvBasicTenants: "beta"}))
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, smallLake(), a)
	acme := []string{"Authorization", "Bearer acmetok"}
	for _, tc := range []struct {
		name string
		path string
		hdr  []string
		code int
	}{
		{"no credentials", search(""), nil, 401},
		{"no credentials templates", "/api/templates", nil, 401},
		{"no credentials status", "/api/status", nil, 401},
		{"wrong token", search(""), []string{"Authorization", "Bearer nope"}, 401},
		{"wrong password", search(""), []string{"Authorization", basic("ops", "x")}, 401},
		{"token", search(""), []string{"Authorization", "Bearer alltok"}, 200},
		{"basic", search(""), []string{"Authorization", basic("ops", "s3cret")}, 200},
		{"own tenant", search("", "tenant", "acme"), acme, 200},
		{"other tenant", search("", "tenant", "beta"), acme, 403},
		{"other tenant in the query", search("tenant:beta error"), acme, 403},
		{"other tenant's templates", "/api/templates?tenant=beta", acme, 403},
		{"other tenant's template", "/api/templates/3", acme, 404},
		{"own template", "/api/templates/2", acme, 200},
		{"new templates of another tenant", "/api/templates/new?tenant=beta", acme, 403},
		{"page", "/", nil, 200},
		{"script", "/app.js", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(t, ts, tc.path, tc.hdr...)
			if resp.StatusCode != tc.code {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, b)
			}
			if tc.code == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	// A limited token's searches are restricted to its tenants.
	for _, m := range ndjson(t, get(t, ts, search(""), acme...)) {
		if m["type"] == "hit" && m["tenant"] != "acme" {
			t.Fatalf("acme's token sees %v", m)
		}
	}
	if n := len(lines(ndjson(t, get(t, ts, search(""), acme...)))); n != 20 {
		t.Fatalf("acme's token sees %d lines, want 20", n)
	}
	if n := len(lines(ndjson(t, get(t, ts, search(""), "Authorization", basic("ops", "s3cret"))))); n != 10 {
		t.Fatalf("basic user limited to beta sees %d lines, want 10", n)
	}
	var list struct{ Templates []Template }
	decode(t, get(t, ts, "/api/templates", acme...), &list)
	if len(list.Templates) != 2 {
		t.Fatalf("acme's token lists %d templates, want 2", len(list.Templates))
	}
}
