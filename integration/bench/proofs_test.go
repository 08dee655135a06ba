package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

func TestProofPoolSize(t *testing.T) {
	cases := []struct {
		name  string
		peak  float64
		d     time.Duration
		conns int
		want  int
	}{
		{"sized from the peak, a quarter to spare", 10_000, 4 * time.Second, 32, 50_032},
		{"a part second is a whole one, as wrk runs it", 1_000, 1500 * time.Millisecond, 8, 2_508},
		{"nothing measured yet: the guess", 0, time.Second, 32, proofRateGuess*5/4 + 32},
		{"NaN peak: the guess", math.NaN(), time.Second, 0, proofRateGuess * 5 / 4},
		{"bounded", 1e9, 10 * time.Second, 32, proofPoolMax},
	}
	for _, c := range cases {
		if got := proofPoolSize(c.peak, c.d, c.conns); got != c.want {
			t.Errorf("%s: proofPoolSize(%v, %v, %d) = %d, want %d", c.name, c.peak, c.d, c.conns, got, c.want)
		}
	}
}

// TestSignBodies: every body is the bench's 2026 call with a proof of its
// own (distinct nonces), on one line, for the signer's audience.
func TestSignBodies(t *testing.T) {
	agent, err := newParty()
	if err != nil {
		t.Fatal(err)
	}
	s := proofSigner{key: agent.key, kid: agent.kid, audience: "did:web:127.0.0.1%3A8080"}
	bodies, err := signBodies(50, s, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	nonces := make(map[string]bool)
	for i, b := range bodies {
		if bytes.IndexByte(b, '\n') >= 0 || !bytes.HasPrefix(b, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"`)) {
			t.Fatalf("body %d: %s", i, b)
		}
		raw, err := kyaos.FindProof(b)
		if err != nil || raw == nil {
			t.Fatalf("body %d: no proof (%v): %s", i, err, b)
		}
		p, err := kyaos.ParseProof(raw)
		if err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
		if p.Audience != s.audience || p.DID != agent.did || nonces[p.Nonce] {
			t.Fatalf("body %d: audience %q did %q nonce %q (repeated: %v)", i, p.Audience, p.DID, p.Nonce, nonces[p.Nonce])
		}
		nonces[p.Nonce] = true
		if p.Expires-p.Created > kyaos.MaxWindow {
			t.Fatalf("body %d: window %d s", i, p.Expires-p.Created)
		}
	}
}

func TestFramingChecks(t *testing.T) {
	cases := []struct {
		name  string
		check func(routeStats) error
		s     routeStats
		want  string // "" for none
	}{
		{"framed", allFramed, routeStats{Requests: 10, Framed: 10}, ""},
		{"headers lost", allFramed, routeStats{Requests: 10, Framed: 9}, "1 of 10 requests reached the upstream without their 2026 framing headers"},
		{"credential leaked", allFramed, routeStats{Requests: 10, Framed: 10, Leaked: 1}, "still carrying the credential"},
		{"proved", allProved, routeStats{Requests: 10, Framed: 10, Proved: 10}, ""},
		{"proof stripped", allProved, routeStats{Requests: 10, Framed: 10, Proved: 7}, "3 of 10 requests reached the upstream without a request proof"},
		{"proved but not framed", allProved, routeStats{Requests: 10, Framed: 0, Proved: 0}, "framing headers"},
	}
	for _, c := range cases {
		err := c.check(c.s)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestProofFloor: CPU above plain is taken within each round, its median
// set against the run's Ed25519 floor and the 1.5× target.
func TestProofFloor(t *testing.T) {
	cs, _ := selectConfigs([]string{"a", "p", "p-redis"})
	run := func(name string, round int, µsPerReq float64) sample {
		return sample{Config: name, Round: round, CPU: time.Duration(µsPerReq * 1000 * 1000), Load: loadResult{Ops: 1000, Seconds: 1}}
	}
	r := &Report{Opts: DefaultOptions(), Configs: cs, Floors: []floor{{Name: "BenchmarkEd25519Verify", NsPerOp: 50_000}},
		Samples: []sample{
			run("a", 0, 100), run("p", 0, 160), run("p-redis", 0, 300),
			run("a", 1, 200), run("p", 1, 290), run("p-redis", 1, 420),
			run("a", 2, 150), run("p", 2, 220), run("p-redis", 2, 390),
			run("p", 3, 900), // no (a) in round 4: not counted
		}}
	got := r.cpuAbovePlain()
	if len(got) != 2 || got[0].name != "p" || got[0].median != 70 || len(got[0].above) != 3 || got[1].name != "p-redis" || got[1].median != 220 {
		t.Fatalf("cpuAbovePlain = %+v; want p median 70 over 3 rounds, p-redis 220", got)
	}
	md := r.Markdown("test")
	for _, want := range []string{"`BenchmarkEd25519Verify`, 50.0 µs in this run", "| p | 70.0 | 60.0–90.0 | 1.40 | met |", "| p-redis | 220.0 | 200.0–240.0 | 4.40 | missed |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	r.Floors = nil
	if md := r.Markdown("test"); !strings.Contains(md, "not measured") || !strings.Contains(md, "| p | 70.0 | 60.0–90.0 | – | – |") {
		t.Errorf("without floors:\n%s", md)
	}
}

// TestMintProofsRefusesLongRuns: a run longer than a proof's window
// allows is refused before anything is signed, not left to fail as
// expired proofs half way.
func TestMintProofsRefusesLongRuns(t *testing.T) {
	b := &bench{opts: DefaultOptions()}
	err := b.mintProofs(config{name: "p"}, proofRunMax+time.Second)
	if err == nil || !strings.Contains(err.Error(), "outlives its request proofs") {
		t.Fatalf("got %v", err)
	}
	if b.proofs.runs != 0 || b.proofs.minted != 0 {
		t.Fatalf("signed anyway: %+v", b.proofs)
	}
}
