package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// testLog sends the harness's progress to t.Log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestBenchQuick runs the whole harness in quick mode (1 round × 1 s per
// configuration): it builds Caddy, runs every configuration through wrk or
// the handshake driver, and checks that each served requests and that none
// failed. It asserts nothing about speed. A missing wrk or redis-server
// fails it: CI installs both (scripts/test.sh).
func TestBenchQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Caddy under load; skipped under -short")
	}
	for _, tool := range []string{"wrk", "redis-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found in PATH: install it with `apt-get install -y %s` (scripts/test.sh does)", tool, tool)
		}
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	opts := QuickOptions()
	opts.Root = root
	opts.Log = testLog{t}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, opts)
	if rep != nil {
		t.Logf("report:\n%s", rep.Markdown("TestBenchQuick"))
	}
	if err != nil {
		t.Fatal(err)
	}

	ran := make(map[string]bool)
	for _, s := range rep.Samples {
		ran[s.Config] = true
		if s.Load.Ops == 0 {
			t.Errorf("%s round %d: no request completed", s.Config, s.Round+1)
		}
		if s.Load.Failed != 0 {
			t.Errorf("%s round %d: %d failed: %s", s.Config, s.Round+1, s.Load.Failed, s.Load.FirstError)
		}
		if s.CPU <= 0 && s.Load.Seconds >= 1 {
			t.Errorf("%s round %d: no Caddy CPU time measured", s.Config, s.Round+1)
		}
		if s.Mallocs <= 0 {
			t.Errorf("%s round %d: no Caddy allocations measured", s.Config, s.Round+1)
		}
	}
	checkPlainPairs(t, rep)
	if p := rep.Pool; p.Repeats != 0 || p.PlainRepeats != 0 || p.Used == 0 || p.PlainUsed == 0 {
		t.Errorf("pool of %d: c sent %d (%d repeats), (a) beside it %d (%d repeats); want both to send, no repeats",
			p.Size, p.Used, p.Repeats, p.PlainUsed, p.PlainRepeats)
	}
	skipped := strings.Join(rep.Notes, "\n")
	for _, c := range allConfigs {
		switch {
		case ran[c.name]:
		case c.optional && strings.Contains(skipped, "configuration "+c.name+" "):
			t.Logf("%s skipped: its feature has not landed", c.name)
		default:
			t.Errorf("configuration %s did not run", c.name)
		}
	}
	if len(rep.Floors) != 3 {
		t.Errorf("vc floors: got %d benchmarks, want 3", len(rep.Floors))
	}

	// The open-loop phase: a and b each served requests at the fixed
	// quick rate, none failed. Nothing about latency.
	if rep.Open.Rate != quickOpenLoopRate || !rep.Open.Fixed {
		t.Errorf("open-loop phase: rate %d (fixed %v), want %d fixed", rep.Open.Rate, rep.Open.Fixed, quickOpenLoopRate)
	}
	openRan := make(map[string]bool)
	for _, s := range rep.OpenRuns {
		o := s.Load.Open
		if o == nil {
			t.Errorf("%s open-loop round %d: no driver result", s.Config, s.Round+1)
			continue
		}
		openRan[s.Config] = true
		if o.Requests == 0 {
			t.Errorf("%s open-loop round %d: no request sent", s.Config, s.Round+1)
		}
		if o.Errors != 0 {
			t.Errorf("%s open-loop round %d: %d failed: %s", s.Config, s.Round+1, o.Errors, o.FirstError)
		}
		if s.Upstream.Requests < o.Requests {
			t.Errorf("%s open-loop round %d: the upstream saw %d of %d requests", s.Config, s.Round+1, s.Upstream.Requests, o.Requests)
		}
	}
	for _, name := range []string{"a", "b"} {
		if !openRan[name] {
			t.Errorf("configuration %s did not run in the open-loop phase", name)
		}
	}
}

// checkPlainPairs: every run of (a) paired with a configuration sent that
// configuration's requests (the plain request beside Level 3), as what
// reached the upstream on (a)'s route shows: (a) strips nothing, so every
// request still carries its credential, the 2026 ones their framing
// headers, p's its request proof.
func checkPlainPairs(t *testing.T, rep *Report) {
	t.Helper()
	byName := make(map[string]config)
	for _, c := range allConfigs {
		byName[c.name] = c
	}
	for _, s := range rep.Samples {
		if s.Config != "a" || s.Pair == "" {
			continue
		}
		want := plainBeside(byName["a"], byName[s.Pair]).load
		u := s.Upstream
		framed, proved := int64(0), int64(0)
		if want == load2026 || want == loadProof {
			framed = u.Requests
		}
		if want == loadProof {
			proved = u.Requests
		}
		if s.Kind != want || u.Requests == 0 || u.Leaked != u.Requests || u.Framed != framed || u.Proved != proved {
			t.Errorf("%s round %d: sent %v, want %v; the upstream saw %+v (want every request with its credential, %d framed, %d proved)",
				s.label(), s.Round+1, s.Kind, want, u, framed, proved)
		}
	}
}
