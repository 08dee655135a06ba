package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The open-loop phase: wrk is closed-loop (each connection waits for its
// answer before it sends again), so its latency at full load says nothing
// of the latency at a given load. After the closed-loop rounds, the bench
// peer drives a and b alternately at a constant rate (a fraction of a's
// peak) with vegeta's attacker, which sends on a schedule whatever the
// answers, and the report gives each one's latency percentiles and the
// p99 that b adds to a in the same round: the target is under
// 1 ms at 50 % of a's peak.

// p99Target is the bound on the p99 latency that b adds at
// targetFrac of a's peak.
const (
	p99Target  = time.Millisecond
	targetFrac = 0.5
)

// openLoopInfo says how the open-loop phase ran.
type openLoopInfo struct {
	// Duration of one run.
	Duration time.Duration
	// Peak is a's median req/s over the closed-loop rounds.
	Peak float64
	// Frac is the rate as a fraction of Peak (when not Fixed).
	Frac float64
	// Rate is the rate asked for, req/s.
	Rate int
	// Fixed: Rate was given (-openloop-rate), not Frac × Peak.
	Fixed bool
	// Vegeta is the version of vegeta the peer was built with.
	Vegeta string
}

// ran reports whether the phase ran.
func (o openLoopInfo) ran() bool { return o.Rate > 0 }

// openLoopResult is the JSON line of `peer openloop` (peer.OpenLoopResult).
type openLoopResult struct {
	Rate        int            `json:"rate"`
	Requests    int64          `json:"requests"`
	SentRate    float64        `json:"sent_rate"`
	Seconds     float64        `json:"seconds"`
	Errors      int64          `json:"errors"`
	FirstError  string         `json:"first_error"`
	Status      map[string]int `json:"status"`
	P50us       float64        `json:"p50_us"`
	P90us       float64        `json:"p90_us"`
	P99us       float64        `json:"p99_us"`
	P999us      float64        `json:"p999_us"`
	MaxUS       float64        `json:"max_us"`
	LagP99us    float64        `json:"lag_p99_us"`
	LagMaxUS    float64        `json:"lag_max_us"`
	Connections int64          `json:"connections"`
	Vegeta      string         `json:"vegeta"`
}

func usDuration(us float64) time.Duration { return time.Duration(us * float64(time.Microsecond)) }

// runOpenLoop drives c at rate req/s for d with the peer's open-loop
// driver (vegeta), the reused credential in Authorization.
func (b *bench) runOpenLoop(ctx context.Context, c config, d time.Duration, rate int) (loadResult, error) {
	if c.load != loadHeader {
		return loadResult{}, fmt.Errorf("config %s is not driven by the open-loop driver", c.name)
	}
	cctx, cancel := context.WithTimeout(ctx, d+60*time.Second)
	defer cancel()
	cmd := b.pin.command(cctx, b.pin.other, b.peerBin, "openloop",
		"-url", b.endpoint(c), "-cred", b.servers[c.name].credFile,
		"-rate", strconv.Itoa(rate), "-d", d.String(),
		"-workers", strconv.Itoa(b.opts.Connections), "-conns", strconv.Itoa(b.opts.Connections), "-timeout", "10s")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return loadResult{}, fmt.Errorf("open-loop driver on %s: %v\n%s", c.name, err, tail(errOut.String(), 2000))
	}
	var o openLoopResult
	if err := json.Unmarshal(out.Bytes(), &o); err != nil {
		return loadResult{}, fmt.Errorf("open-loop driver on %s: %v: %s", c.name, err, out.String())
	}
	return loadResult{
		Ops:        o.Requests,
		Seconds:    o.Seconds,
		P50:        usDuration(o.P50us),
		P99:        usDuration(o.P99us),
		Failed:     o.Errors,
		FirstError: o.FirstError,
		Open:       &o,
	}, nil
}

// openLoopPhase runs a and b alternately at a constant rate, as many
// rounds as the closed-loop phase, each round in the other order.
func (b *bench) openLoopPhase(ctx context.Context) error {
	o := b.opts
	if o.OpenLoop <= 0 {
		return nil
	}
	var pair []config
	for _, c := range b.configs {
		if c.name == "a" || c.name == "b" {
			pair = append(pair, c)
		}
	}
	if len(pair) != 2 {
		b.note("no open-loop phase: it drives configurations a and b, and both must be selected")
		return nil
	}
	info := openLoopInfo{Duration: o.OpenLoop, Frac: o.OpenLoopFrac, Rate: o.OpenLoopRate, Fixed: o.OpenLoopRate > 0}
	info.Peak = b.rep.peak("a")
	if !info.Fixed {
		if math.IsNaN(info.Peak) {
			b.problem("open-loop phase: no peak of a to take %g of", info.Frac)
			return nil
		}
		info.Rate = max(1, int(math.Round(info.Frac*info.Peak)))
	}
	how := fmt.Sprintf("%.0f %% of a's peak of %.0f req/s", 100*info.Frac, info.Peak)
	if info.Fixed {
		how = "fixed by -openloop-rate"
	}
	b.logf("open-loop: %d round(s) of a and b, %v each at %d req/s (%s)", o.Rounds, o.OpenLoop, info.Rate, how)
	b.rep.Open = info
	for r := range o.Rounds {
		order := pair
		if r%2 == 1 {
			order = []config{pair[1], pair[0]}
		}
		for _, c := range order {
			where := fmt.Sprintf("%s open-loop round %d", c.name, r+1)
			s, err := b.measureLoad(c, r, where, "the open-loop driver", func() (loadResult, error) {
				return b.runOpenLoop(ctx, c, o.OpenLoop, info.Rate)
			})
			if err != nil {
				return err
			}
			b.rep.OpenRuns = append(b.rep.OpenRuns, s)
			b.logf("  %-7s %s", c.name, s.openBrief())
			if ol := s.Load.Open; ol != nil {
				b.rep.Open.Vegeta = ol.Vegeta
				if ol.Requests > 0 && ol.SentRate < 0.95*float64(info.Rate) {
					b.note("%s: the driver sent %.0f req/s of the %d asked for: it fell behind its schedule (send lag p99 %s ms)",
						where, ol.SentRate, info.Rate, ms(usDuration(ol.LagP99us)))
				}
			}
		}
	}
	return nil
}

func (s sample) openBrief() string {
	o := s.Load.Open
	if o == nil {
		return s.brief()
	}
	ops := float64(max(s.Load.Ops, 1))
	return fmt.Sprintf("%6.0f req/s sent  p50 %s  p90 %s  p99 %s  p99.9 %s ms  lag p99 %s ms  %d conns  cpu %6.1fµs/op  %d failed",
		o.SentRate, ms(usDuration(o.P50us)), ms(usDuration(o.P90us)), ms(usDuration(o.P99us)), ms(usDuration(o.P999us)),
		ms(usDuration(o.LagP99us)), o.Connections, float64(s.CPU.Microseconds())/ops, s.Load.Failed)
}

// peak is the median req/s of config over the closed-loop rounds, from
// its runs under the plain request (loadHeader), the one the open-loop
// driver sends: (a)'s runs beside c, e, b-2026 or p sent theirs; NaN if
// it did not run so.
func (r *Report) peak(config string) float64 {
	var rps []float64
	for _, s := range r.Samples {
		if s.Config == config && s.Kind == loadHeader && s.Load.Ops > 0 && s.Load.Seconds > 0 {
			rps = append(rps, float64(s.Load.Ops)/s.Load.Seconds)
		}
	}
	return median(rps)
}

// openSummary is one configuration over the open-loop rounds: medians of
// the per-run figures, errors added up.
type openSummary struct {
	c                   config
	runs                int
	sent                float64
	p50, p90, p99, p999 time.Duration
	lagP99              time.Duration
	conns, cpu, share   float64
	errors              int64
}

func (r *Report) openSummaries() []openSummary {
	var out []openSummary
	for _, c := range r.Configs {
		var sent, p50, p90, p99, p999, lag, conns, cpu, share []float64
		sm := openSummary{c: c}
		for _, s := range r.OpenRuns {
			o := s.Load.Open
			if s.Config != c.name || o == nil || o.Requests == 0 {
				continue
			}
			sm.runs++
			sm.errors += o.Errors
			sent = append(sent, o.SentRate)
			p50 = append(p50, o.P50us)
			p90 = append(p90, o.P90us)
			p99 = append(p99, o.P99us)
			p999 = append(p999, o.P999us)
			lag = append(lag, o.LagP99us)
			conns = append(conns, float64(o.Connections))
			cpu = append(cpu, float64(s.CPU)/float64(o.Requests)/1e3)
			share = append(share, s.CPU.Seconds()/s.Load.Seconds)
		}
		if sm.runs == 0 {
			continue
		}
		sm.sent = median(sent)
		sm.p50, sm.p90 = usDuration(median(p50)), usDuration(median(p90))
		sm.p99, sm.p999 = usDuration(median(p99)), usDuration(median(p999))
		sm.lagP99 = usDuration(median(lag))
		sm.conns, sm.cpu, sm.share = median(conns), median(cpu), median(share)
		out = append(out, sm)
	}
	return out
}

// added is one latency percentile of b minus the same of a in the same
// open-loop round, over the rounds where both ran.
type added struct {
	name             string
	pick             func(*openLoopResult) float64 // µs
	deltas           []float64                     // µs, in round order
	median, min, max float64
}

func (r *Report) openAdded() []added {
	out := []added{
		{name: "p50", pick: func(o *openLoopResult) float64 { return o.P50us }},
		{name: "p90", pick: func(o *openLoopResult) float64 { return o.P90us }},
		{name: "p99", pick: func(o *openLoopResult) float64 { return o.P99us }},
		{name: "p99.9", pick: func(o *openLoopResult) float64 { return o.P999us }},
	}
	byRound := make(map[int]map[string]*openLoopResult)
	var rounds []int
	for _, s := range r.OpenRuns {
		if s.Load.Open == nil || s.Load.Open.Requests == 0 {
			continue
		}
		if byRound[s.Round] == nil {
			byRound[s.Round] = make(map[string]*openLoopResult)
			rounds = append(rounds, s.Round)
		}
		byRound[s.Round][s.Config] = s.Load.Open
	}
	slices.Sort(rounds)
	for i := range out {
		for _, rd := range rounds {
			a, b := byRound[rd]["a"], byRound[rd]["b"]
			if a != nil && b != nil {
				out[i].deltas = append(out[i].deltas, out[i].pick(b)-out[i].pick(a))
			}
		}
		out[i].median, out[i].min, out[i].max = math.NaN(), math.NaN(), math.NaN()
		if len(out[i].deltas) > 0 {
			out[i].median = median(out[i].deltas)
			out[i].min, out[i].max = slices.Min(out[i].deltas), slices.Max(out[i].deltas)
		}
	}
	return out
}

// msDelta renders a difference in µs as signed milliseconds.
func msDelta(us float64) string {
	if math.IsNaN(us) {
		return "–"
	}
	return fmt.Sprintf("%+.2f", us/1e3)
}

// openLoopVerdict is the line for the target: p99 added by b at
// 50 % of a's peak under 1 ms.
func (r *Report) openLoopVerdict() string {
	info := r.Open
	var p99 added
	for _, a := range r.openAdded() {
		if a.name == "p99" {
			p99 = a
		}
	}
	target := fmt.Sprintf("p99 added by (b) at %.0f %% of (a)'s peak load under %g ms", 100*targetFrac, p99Target.Seconds()*1e3)
	if len(p99.deltas) == 0 {
		return fmt.Sprintf("**Target** (%s): not measured: no round ran both (a) and (b).", target)
	}
	measured := fmt.Sprintf("%s ms (median of %d round(s); range %s to %s ms)",
		msDelta(p99.median), len(p99.deltas), msDelta(p99.min), msDelta(p99.max))
	if info.Fixed || info.Frac != targetFrac {
		load := fmt.Sprintf("%.0f %% of (a)'s peak", 100*info.Frac)
		if info.Fixed {
			load = fmt.Sprintf("a fixed %d req/s (-openloop-rate)", info.Rate)
		}
		return fmt.Sprintf("**Target** (%s): not judged: this run's load was %s; p99 added: %s.", target, load, measured)
	}
	limit := float64(p99Target.Microseconds())
	over := 0
	for _, d := range p99.deltas {
		if d >= limit {
			over++
		}
	}
	verdict := "**met**"
	switch {
	case p99.median >= limit:
		verdict = "**missed**"
	case over > 0:
		verdict = fmt.Sprintf("**met** on the median, though %d of %d round(s) were at or over %g ms", over, len(p99.deltas), p99Target.Seconds()*1e3)
	}
	return fmt.Sprintf("**Target** (%s): %s: %s.", target, verdict, measured)
}

// openLoopMarkdown renders the open-loop phase.
func (r *Report) openLoopMarkdown(b *strings.Builder) {
	info := r.Open
	sums := r.openSummaries()
	if !info.ran() || len(sums) == 0 {
		return
	}
	how := fmt.Sprintf("%.0f %% of (a)'s peak, the median req/s of (a) in the closed-loop rounds above under the plain request, which this driver sends (%.0f)", 100*info.Frac, info.Peak)
	if info.Fixed {
		how = "fixed by -openloop-rate"
	}
	fmt.Fprintf(b, "\n### Open-loop latency at %d req/s\n\n", info.Rate)
	fmt.Fprintf(b, "After the closed-loop rounds, the bench peer drove (a) and (b) alternately (the order swapped every round), %d round(s) × %v each, "+
		"at %d req/s: %s. The driver is vegeta's constant-rate attacker (`github.com/tsenart/vegeta/v12/lib` %s) in a separate process, sending the same `tools/call` as wrk over keep-alive connections. "+
		"It is **open-loop**: every request is taken up on the schedule whatever the answers (another worker is started when all are waiting); "+
		"the requests share at most %d connections, as wrk's do, and one that finds them all busy waits for one within its latency, "+
		"so a stall of Caddy is counted in the latency of every request due during it (no coordinated omission). "+
		"Latency runs from the moment a request is taken up to the end of its answer; percentiles are exact over every request, and the table shows their medians over the rounds. "+
		"\"send lag p99\" is how late the driver itself took requests up against its schedule (its timer and its own share of the CPU), which the latency does not include. "+
		"CPU is Caddy's per request, as above; errors are transport errors, statuses other than 200 and answers other than the upstream's, over every round.\n\n",
		r.Opts.Rounds, info.Duration, info.Rate, how, orUnknown(info.Vegeta), r.Opts.Connections)
	b.WriteString("| config | what | req/s sent | p50 ms | p90 ms | p99 ms | p99.9 ms | errors | CPU µs/req | core % | send lag p99 ms | connections |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range sums {
		fmt.Fprintf(b, "| %s | %s | %.0f | %s | %s | %s | %s | %d | %.1f | %.0f | %s | %.0f |\n",
			s.c.name, s.c.label, s.sent, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.p999), s.errors, s.cpu, 100*s.share, ms(s.lagP99), s.conns)
	}
	b.WriteString("\nWhat (b) adds: its percentile minus (a)'s in the same round.\n\n| added by (b) | median ms | range ms |\n|---|--:|--:|\n")
	for _, a := range r.openAdded() {
		rng := "–"
		if len(a.deltas) > 0 {
			rng = msDelta(a.min) + " to " + msDelta(a.max)
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", a.name, msDelta(a.median), rng)
	}
	b.WriteString("\n" + r.openLoopVerdict() + "\n")
}

// openLoopRunsMarkdown is the table of every open-loop run.
func (r *Report) openLoopRunsMarkdown(b *strings.Builder) {
	if len(r.OpenRuns) == 0 {
		return
	}
	b.WriteString("\n<details><summary>Every open-loop run</summary>\n\n")
	b.WriteString("| round | config | req/s asked | req/s sent | requests | errors | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | send lag p99 ms | send lag max ms | connections | CPU µs/op | core % | upstream saw |\n")
	b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range r.OpenRuns {
		o := s.Load.Open
		if o == nil {
			continue
		}
		ops := float64(max(o.Requests, 1))
		fmt.Fprintf(b, "| %d | %s | %d | %.0f | %d | %d | %s | %s | %s | %s | %s | %s | %s | %d | %.1f | %.0f | %d |\n",
			s.Round+1, s.Config, o.Rate, o.SentRate, o.Requests, o.Errors,
			ms(usDuration(o.P50us)), ms(usDuration(o.P90us)), ms(usDuration(o.P99us)), ms(usDuration(o.P999us)), ms(usDuration(o.MaxUS)),
			ms(usDuration(o.LagP99us)), ms(usDuration(o.LagMaxUS)), o.Connections,
			float64(s.CPU)/ops/1e3, 100*s.CPU.Seconds()/max(s.Load.Seconds, 1e-9), s.Upstream.Requests)
	}
	b.WriteString("\n</details>\n")
}

func orUnknown(s string) string {
	if s == "" {
		return "version unknown"
	}
	return s
}
