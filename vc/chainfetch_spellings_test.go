package vc

// chain_fetch allow-list spellings beyond those of TestChainFetchURLs. Each is refused, or allowed only where the request
// goes to the allowed host and under the allowed path as Go sends it.

import (
	"net/url"
	"testing"
)

func TestChainFetchURLSpellings(t *testing.T) {
	fc := newChainFetcher(NewVerifier(nil), ChainFetch{Allow: []string{
		"https://creds.example.com/c/", "https://[2001:db8::1]/v/",
	}})
	refused := []string{
		"https://creds.example.com./c/x",                // trailing dot: another name to the allow-list
		"https://creds.example.com:0443/c/x",            // port spelt otherwise
		"https://creds.example.com:8443/c/x",            // other port
		"https://credſ.example.com/c/x",                 // U+017F: IDNA maps it to s, the allow-list does not
		"https://ｃreds.example.com/c/x",                 // fullwidth: IDNA maps it, the allow-list does not
		"https://creds%2eexample.com/c/x",               // escaped dot in the host
		"https://creds.example.com%2f@evil.example/c/x", // user info
		"https://creds.example.com\\@evil.example/c/x",  // backslash user info
		"https://evil.example\\@creds.example.com/c/x",  // backslash user info, other order
		"https://creds.example.com/c/%2e%2e/%2e%2e/x",   // encoded dot segments
		"https://creds.example.com/c/x/..",              // trailing dot segment
		"https://creds.example.com/c/..;/admin/x",       // "..;" is ".." to Tomcat, Jetty, Spring
		"https://creds.example.com/c/%2e%2e%3b/x",       // the same, encoded
		"https://creds.example.com/c/%252e%252e/x",      // ".." to a server that decodes twice
		"https://creds.example.com/c/%5c..%5cx",         // encoded backslash
		"https://creds.example.com/C/x",                 // path case
		"https://creds.example.com//c/x",                // leading empty segment
		"https://[2001:db8::1%25eth0]/v/x",              // zone
		"https://[2001:db8:0:0:0:0:0:1]/v/x",            // IPv6 spelt in full
		"https://[::ffff:192.0.2.1]/v/x",                // mapped
	}
	for _, raw := range refused {
		if got, ok := fc.allowed(raw); ok {
			t.Errorf("allowed(%q) = %q", raw, got)
		}
	}
	// Allowed: each sends the request to the allowed host, under /c/.
	for _, raw := range []string{
		"HTTPS://creds.example.com/c/x",
		"https://CREDS.EXAMPLE.COM/c/x",
		"https://creds.example.com:/c/x",
		"https://creds.example.com/c/x#../../admin",
		"https://creds.example.com/c/a%2fb",
	} {
		got, ok := fc.allowed(raw)
		if !ok {
			t.Errorf("allowed(%q) refused", raw)
			continue
		}
		u, err := url.Parse(got)
		if err != nil || u.Hostname() != "creds.example.com" && u.Hostname() != "CREDS.EXAMPLE.COM" || u.Fragment != "" ||
			len(u.EscapedPath()) < 3 || u.EscapedPath()[:3] != "/c/" || (u.Port() != "" && u.Port() != "443") {
			t.Errorf("allowed(%q) = %q: leaves the prefix", raw, got)
		}
	}
}
