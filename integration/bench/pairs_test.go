package main

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// TestPlainBeside: the run of (a) paired with a configuration sends that
// configuration's requests, except beside Level 3 handshakes, whose
// "×(a) CPU" is plain requests per handshake; it stays plain (a).
func TestPlainBeside(t *testing.T) {
	plain := allConfigs[0]
	if plain.name != "a" {
		t.Fatalf("allConfigs starts with %s", plain.name)
	}
	for _, c := range allConfigs {
		got := plainBeside(plain, c)
		want := c.load
		if c.load == loadHandshake {
			want = loadHeader
		}
		if got.load != want || got.name != "a" || got.mcpi != "" || got.check != nil || got.redis {
			t.Errorf("beside %s: name %s load %v mcpi %q redis %v check %v; want plain a with load %v",
				c.name, got.name, got.load, got.mcpi, got.redis, got.check != nil, want)
		}
	}
	if allConfigs[0].load != loadHeader {
		t.Errorf("plainBeside changed allConfigs: a's load is %v", allConfigs[0].load)
	}
}

// run is a closed-loop run of 1000 requests in 1 s with the given CPU and
// allocations per request.
func run(config string, round int, kind loadKind, pair string, µs, allocs float64) sample {
	return sample{Config: config, Round: round, Kind: kind, Pair: pair,
		CPU: time.Duration(µs * 1000 * 1000), Mallocs: allocs * 1000, Load: loadResult{Ops: 1000, Seconds: 1}}
}

// TestPlainRowIsPlainRequests: (a)'s own row and peak come from its runs
// under the plain request; each ratio stays against the run paired with
// it, whatever that run sent; the table of every run says what each run
// of (a) sent.
func TestPlainRowIsPlainRequests(t *testing.T) {
	cs, _ := selectConfigs([]string{"a", "b", "b-2026", "p", "f-mem"})
	r := &Report{Opts: DefaultOptions(), Configs: cs, Samples: []sample{
		run("a", 0, loadHeader, "b", 100, 200), run("b", 0, loadHeader, "", 110, 210),
		run("a", 0, load2026, "b-2026", 150, 250), run("b-2026", 0, load2026, "", 180, 260),
		run("a", 0, loadProof, "p", 400, 300), run("p", 0, loadProof, "", 600, 330),
		run("a", 0, loadHeader, "f-mem", 120, 202), run("f-mem", 0, loadHandshake, "", 480, 800),
	}}
	// (a) ran 4× as fast under 2026 requests, and under e's, whose pair is
	// not in this report.
	r.Samples[2].Load.Ops = 4000
	for round := 1; round <= 2; round++ {
		fast := run("a", round, loadBody, "e", 100, 200)
		fast.Load.Ops = 4000
		r.Samples = append(r.Samples, fast)
	}
	sums := make(map[string]summary)
	for _, s := range r.summaries() {
		sums[s.c.name] = s
	}
	a := sums["a"]
	if a.runs != 2 || a.allocs != 201 || a.cpu != 110 {
		t.Errorf("(a)'s row: %d runs, %v allocs, %v µs; want its 2 plain runs: 201 allocs, 110 µs", a.runs, a.allocs, a.cpu)
	}
	if got := sums["b-2026"].allocRatio; math.Abs(got-260.0/(250.0/4)) > 1e-9 {
		t.Errorf("b-2026 allocs ×(a) = %v, want against its pair (250 allocs over 4000 requests)", got)
	}
	if got := sums["p"].cpuRatio; got != 1.5 {
		t.Errorf("p CPU ×(a) = %v, want 1.5 against its pair", got)
	}
	if p := r.peak("a"); p != 1000 {
		t.Errorf("peak of a = %v, want 1000: the 4000 req/s runs sent 2026 and body requests", p)
	}
	md := r.Markdown("test")
	for _, want := range []string{
		"| a | plain reverse_proxy (the ceiling) | 110.0 | 1.00 |",
		"| b-2026 | level 1, one credential reused, 2026-era stateless requests (framing headers checked) | 180.0 | 4.80 |",
		"| f-mem | level 3 handshakes, memory nonce store | 480.0 | 4.36 |", // against (a)'s plain row: 480/110
		"| 1 | a (b-2026) | 2026, credential in Authorization | 4000 |",
		"| 1 | a (p) | 2026, a request proof each | 1000 |",
		"| 1 | a (f-mem) | 2025, credential in Authorization | 1000 |",
		"| 1 | p | 2026, a request proof each | 1000 |",
		"(a)'s own row is the medians of its runs under the plain request only",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	for _, above := range r.cpuAbovePlain() {
		if above.name == "p" && above.median != 200 {
			t.Errorf("p's CPU above (a) = %v µs, want 200 against its pair", above.median)
		}
	}
}

func TestPoolRepeats(t *testing.T) {
	cases := []struct {
		offset, used int64
		size         int
		want         int64
	}{
		{0, 100, 100, 0},
		{50, 50, 100, 0},
		{50, 60, 100, 10},
		{100, 5, 100, 5},
		{250, 5, 100, 5},
		{0, 0, 100, 0},
	}
	for _, c := range cases {
		if got := poolRepeats(c.offset, c.used, c.size); got != c.want {
			t.Errorf("poolRepeats(%d, %d, %d) = %d, want %d", c.offset, c.used, c.size, got, c.want)
		}
	}
}

// TestPoolSharedWithPlain: (a) beside c takes the pool's next credentials,
// so c never sends one (a) sent while the pool lasts, and each is told
// its own repeats.
func TestPoolSharedWithPlain(t *testing.T) {
	cs, _ := selectConfigs([]string{"a", "c"})
	b := &bench{rep: &Report{Pool: poolInfo{Size: 100}}}
	b.poolSent(plainBeside(cs[0], cs[1]), 60)
	b.poolSent(cs[1], 30)
	if p := b.rep.Pool; b.poolUsed != 90 || p.Used != 30 || p.Repeats != 0 || p.PlainUsed != 60 || p.PlainRepeats != 0 {
		t.Fatalf("after 60 by a and 30 by c: offset %d, %+v", b.poolUsed, p)
	}
	b.poolSent(cs[1], 25)
	b.poolSent(cs[0], 10)
	if p := b.rep.Pool; b.poolUsed != 125 || p.Used != 55 || p.Repeats != 15 || p.PlainUsed != 70 || p.PlainRepeats != 10 {
		t.Fatalf("after the pool ran out: offset %d, %+v; want c 55 sent, 15 repeats; a 70 sent, 10 repeats", b.poolUsed, p)
	}
}

// TestProofRepeatsOfPlain: (a) beside p sends bodies of its own pool; its
// repeats are counted, not a problem (it verifies no proof), while p's
// still fail the run.
func TestProofRepeatsOfPlain(t *testing.T) {
	cs, _ := selectConfigs([]string{"a", "p"})
	plain, p := plainBeside(cs[0], cs[1]), cs[1]
	b := &bench{opts: Options{Log: io.Discard}, rep: &Report{}}
	if b.proofPoolOf(plain) == b.proofPoolOf(p) {
		t.Fatal("(a) and p share a proof pool")
	}
	b.proofs.size, b.plainProofs.size = 100, 100
	b.proofsUsed(plain, "a round 1", 130)
	if len(b.rep.Problems) != 0 || b.plainProofs.repeats != 30 || b.proofs.repeats != 0 {
		t.Fatalf("(a) ran out: problems %q, its repeats %d, p's %d", b.rep.Problems, b.plainProofs.repeats, b.proofs.repeats)
	}
	b.proofsUsed(p, "p round 1", 101)
	if len(b.rep.Problems) != 1 || !strings.Contains(b.rep.Problems[0], "p round 1: wrk sent 101 requests from a pool of 100 request proofs") || b.proofs.repeats != 1 {
		t.Fatalf("p ran out: problems %q, its repeats %d", b.rep.Problems, b.proofs.repeats)
	}
}
