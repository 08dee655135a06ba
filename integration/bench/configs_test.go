package main

import (
	"strconv"
	"strings"
	"testing"
)

// TestCaddyfileOneServerPerConfig: every configuration gets a site of its
// own on its own port, whose only route is the configuration's, so that no
// request is tested against another configuration's route first.
func TestCaddyfileOneServerPerConfig(t *testing.T) {
	ports := make(map[string]int)
	for i, c := range allConfigs {
		ports[c.name] = 40001 + i
	}
	cf := caddyfile(allConfigs, ports, 40000, "/tmp/storage", "127.0.0.1:9", "did:key:z6Mkissuer", "redis://127.0.0.1:6379")

	// The sites, by the port they open with: each top-level block but the
	// global options.
	sites := make(map[int][]string) // port -> its handle lines
	port := 0
	for _, line := range strings.Split(cf, "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			p, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, ":"), " {"))
			if err != nil {
				t.Fatalf("site address %q is not :<port>", line)
			}
			if _, dup := sites[p]; dup {
				t.Fatalf("port %d has two sites", p)
			}
			port = p
			sites[p] = nil
		case line == "}":
			port = 0
		case strings.HasPrefix(strings.TrimSpace(line), "handle "):
			if port == 0 {
				t.Fatalf("%q outside a site", line)
			}
			sites[port] = append(sites[port], strings.TrimSpace(line))
		}
	}
	if len(sites) != len(allConfigs) {
		t.Errorf("%d sites for %d configurations:\n%s", len(sites), len(allConfigs), cf)
	}
	for _, c := range allConfigs {
		want := []string{"handle /" + c.name + "/* {"}
		if got := sites[ports[c.name]]; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("site of %s (:%d): routes %q, want %q", c.name, ports[c.name], got, want)
		}
	}
	if !strings.Contains(cf, "\tadmin 127.0.0.1:40000\n") {
		t.Errorf("the global options lost the admin address:\n%s", cf)
	}
}
