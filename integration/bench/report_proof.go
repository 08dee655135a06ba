package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The proof path against the signature floor: what a configuration that
// verifies one signature per request ((c): a fresh credential; (p): a
// fresh request proof) costs Caddy above plain proxying, set against one
// bare Ed25519 verification measured in the same run. The target is at
// most 1.5 verifications.

// floorProofConfigs are the configurations set against the floor.
var floorProofConfigs = []string{"c", "p", "p-redis"}

// proofFloorTarget is the most CPU above plain a proof-path request may
// cost, in bare Ed25519 verifications.
const proofFloorTarget = 1.5

// aboveFloor is one configuration's Caddy CPU above (a) per request.
type aboveFloor struct {
	name   string
	above  []float64 // µs, one per round that ran both it and (a)
	median float64
}

// cpuAbovePlain is, per configuration of floorProofConfigs that ran, the
// median over the rounds of its Caddy CPU per request minus (a)'s in the
// run paired with it.
func (r *Report) cpuAbovePlain() []aboveFloor {
	var out []aboveFloor
	for _, name := range floorProofConfigs {
		af := aboveFloor{name: name}
		for _, s := range r.Samples {
			if s.Config != name || s.Load.Ops == 0 {
				continue
			}
			a, ok := r.plainFor(s)
			if !ok || a.Load.Ops == 0 {
				continue
			}
			af.above = append(af.above, float64(s.CPU)/float64(s.Load.Ops)/1e3-float64(a.CPU)/float64(a.Load.Ops)/1e3)
		}
		if len(af.above) > 0 {
			af.median = median(af.above)
			out = append(out, af)
		}
	}
	return out
}

// ed25519Floor is the bare Ed25519 verification of this run's floors, in
// µs; NaN when the floors did not run.
func (r *Report) ed25519Floor() float64 {
	i := slices.IndexFunc(r.Floors, func(f floor) bool { return f.Name == "BenchmarkEd25519Verify" })
	if i < 0 {
		return math.NaN()
	}
	return r.Floors[i].NsPerOp / 1e3
}

// proofFloorMarkdown writes the table of the proof path against the
// floor, and what minting p's pools took.
func (r *Report) proofFloorMarkdown(b *strings.Builder) {
	rows := r.cpuAbovePlain()
	if len(rows) == 0 {
		return
	}
	floor := r.ed25519Floor()
	b.WriteString("\n### One signature per request, against the floor\n\n")
	fmt.Fprintf(b, "Caddy CPU per request above plain (a), the median over the rounds of the difference from the run of (a) paired with it (which sent the same requests), set against one bare Ed25519 verification (`BenchmarkEd25519Verify`, %s µs in this run). (c) verifies a fresh VC-JWT; (p) a fresh KYA-OS request proof (the credential is reused and cached), its nonce consumed in the memory store, (p-redis) in Redis. Target: at most %.1f×.\n\n",
		fmtUS(floor), proofFloorTarget)
	b.WriteString("| config | CPU above (a) µs/req | range | ×Ed25519 | target |\n|---|--:|--:|--:|---|\n")
	for _, row := range rows {
		x := row.median / floor
		verdict := "–"
		if !math.IsNaN(x) {
			verdict = "missed"
			if x <= proofFloorTarget {
				verdict = "met"
			}
		}
		fmt.Fprintf(b, "| %s | %.1f | %.1f–%.1f | %s | %s |\n", row.name, row.median, slices.Min(row.above), slices.Max(row.above), ratio(x), verdict)
	}
	if p := r.Proofs; p.runs > 0 {
		fmt.Fprintf(b, "\nRequest proofs for (p): %d pools (one per run, minted right before it: a proof lives 60 s), %d signed requests of %d bytes in all, minted on every core in %v; %d repeats.\n",
			p.runs, p.minted, p.bodySize, p.mint.Round(time.Millisecond), p.repeats)
	}
	if p := r.PlainProofs; p.runs > 0 {
		fmt.Fprintf(b, "(a)'s runs paired with them sent pools of their own, so that p's bodies go out once: %d pools, %d signed requests, minted in %v; %d repeats ((a) verifies no proof).\n",
			p.runs, p.minted, p.mint.Round(time.Millisecond), p.repeats)
	}
}

func fmtUS(x float64) string {
	if math.IsNaN(x) {
		return "not measured"
	}
	return fmt.Sprintf("%.1f", x)
}
