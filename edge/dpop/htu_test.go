package dpop

import "testing"

func TestNormalizeHTU(t *testing.T) {
	cases := []struct{ in, want string }{
		{"https://edge.example/mcp", "https://edge.example/mcp"},
		{"HTTPS://Edge.EXAMPLE/mcp", "https://edge.example/mcp"},
		{"https://edge.example:443/mcp", "https://edge.example/mcp"},
		{"http://edge.example:80/mcp", "http://edge.example/mcp"},
		{"http://edge.example:443/mcp", "http://edge.example:443/mcp"},
		{"https://edge.example:0443/mcp", "https://edge.example/mcp"},
		{"https://edge.example", "https://edge.example/"},
		{"https://edge.example/mcp?q=1#frag", "https://edge.example/mcp"},
		{"https://edge.example/%7e%41%2f%2a", "https://edge.example/~A%2F%2A"},
		{"https://edge.example/a/./b/../c", "https://edge.example/a/c"},
		{"https://edge.example/a/..", "https://edge.example/"},
		{"https://edge.example/..", "https://edge.example/"},
		{"https://edge.example/a/.", "https://edge.example/a/"},
		{"https://[::1]:8443/mcp", "https://[::1]:8443/mcp"},
		{"https://[::1]:443/mcp", "https://[::1]/mcp"},
		{"https://edge.example/a b", "https://edge.example/a%20b"},
	}
	for _, tc := range cases {
		got, err := normalizeHTU(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("normalizeHTU(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{
		"", "/mcp", "edge.example/mcp", "ftp://edge.example/", "mailto:a@b", "https:opaque",
		"https://user@edge.example/", "https://user:pw@edge.example/", "https://edge.example:99999/",
		"https://edge.example:-1/", "https:///mcp", "https://edge.example/%zz", "https://edge.example/%4",
		"https://:443/", "javascript:alert(1)",
	} {
		if got, err := normalizeHTU(bad); err == nil {
			t.Errorf("normalizeHTU(%q) = %q, want an error", bad, got)
		}
	}
}

// FuzzNormalizeHTU: never panics, and what it returns is a fixed point
// (normalising twice changes nothing), so two URLs that normalise alike
// stay alike.
func FuzzNormalizeHTU(f *testing.F) {
	for _, s := range []string{"https://edge.example/mcp", "HTTP://A:80/%7e/./../b?q#f", "https://[::1]:1/x", "https://e/%2f%2F"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := normalizeHTU(s)
		if err != nil {
			return
		}
		again, err := normalizeHTU(n)
		if err != nil || again != n {
			t.Fatalf("normalizeHTU(%q) = %q, but normalizeHTU(%q) = %q, %v", s, n, n, again, err)
		}
	})
}
