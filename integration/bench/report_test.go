package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

// openReport is a report of three open-loop rounds whose p99s are given
// in µs, a's and b's by round.
func openReport(aP99, bP99 []float64, info openLoopInfo) *Report {
	cs, _ := selectConfigs([]string{"a", "b"})
	r := &Report{Opts: DefaultOptions(), Configs: cs, Open: info}
	for i := range aP99 {
		for _, c := range []struct {
			name string
			p99  float64
		}{{"a", aP99[i]}, {"b", bP99[i]}} {
			o := &openLoopResult{Rate: info.Rate, Requests: 1000, SentRate: float64(info.Rate),
				P50us: c.p99 / 4, P90us: c.p99 / 2, P99us: c.p99, P999us: c.p99 * 2, MaxUS: c.p99 * 3, Connections: 32}
			r.OpenRuns = append(r.OpenRuns, sample{Config: c.name, Round: i, CPU: 100 * time.Millisecond,
				Load: loadResult{Ops: 1000, Seconds: 1, Open: o}})
		}
	}
	return r
}

func TestOpenLoopAdded(t *testing.T) {
	r := openReport([]float64{1000, 2000, 1500}, []float64{1300, 2900, 1500}, openLoopInfo{Rate: 5000, Frac: 0.5, Peak: 10000})
	for _, a := range r.openAdded() {
		if a.name != "p99" {
			continue
		}
		if len(a.deltas) != 3 || a.median != 300 || a.min != 0 || a.max != 900 {
			t.Errorf("p99 added: deltas %v median %v range %v–%v; want 3 rounds, median 300, range 0–900", a.deltas, a.median, a.min, a.max)
		}
	}
	if v := r.openLoopVerdict(); !strings.Contains(v, "**met**: +0.30 ms (median of 3 round(s); range +0.00 to +0.90 ms)") {
		t.Errorf("verdict: %s", v)
	}
	md := r.Markdown("test")
	for _, want := range []string{"### Open-loop latency at 5000 req/s", "| p99 | +0.30 | +0.00 to +0.90 |", "Every open-loop run", "| open-loop runs | 3 rounds × a, b × "} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestOpenLoopVerdict(t *testing.T) {
	cases := []struct {
		name       string
		a, b       []float64
		info       openLoopInfo
		want, nope string
	}{
		{"missed", []float64{1000, 1000, 1000}, []float64{2100, 2500, 1900}, openLoopInfo{Rate: 5000, Frac: 0.5}, "**missed**: +1.10 ms", ""},
		{"met on the median", []float64{1000, 1000, 1000}, []float64{1500, 2500, 1900}, openLoopInfo{Rate: 5000, Frac: 0.5}, "**met** on the median, though 1 of 3 round(s)", ""},
		{"fixed rate", []float64{1000}, []float64{1100}, openLoopInfo{Rate: 500, Fixed: true, Frac: 0.5}, "not judged: this run's load was a fixed 500 req/s", "**met**"},
		{"other fraction", []float64{1000}, []float64{1100}, openLoopInfo{Rate: 8000, Frac: 0.8}, "not judged: this run's load was 80 % of (a)'s peak", "**met**"},
		{"no rounds", nil, nil, openLoopInfo{Rate: 5000, Frac: 0.5}, "not measured", "**met**"},
	}
	for _, c := range cases {
		v := openReport(c.a, c.b, c.info).openLoopVerdict()
		if !strings.Contains(v, c.want) || c.nope != "" && strings.Contains(v, c.nope) {
			t.Errorf("%s: %s", c.name, v)
		}
	}
}

func TestPeak(t *testing.T) {
	r := &Report{Samples: []sample{
		{Config: "a", Load: loadResult{Ops: 9000, Seconds: 1}},
		{Config: "b", Load: loadResult{Ops: 1, Seconds: 1}},
		{Config: "a", Load: loadResult{Ops: 20000, Seconds: 2}},
		{Config: "a", Load: loadResult{Ops: 33000, Seconds: 3}},
	}}
	if p := r.peak("a"); p != 10000 {
		t.Errorf("peak of a = %v, want the median 10000", p)
	}
	if p := r.peak("c"); !math.IsNaN(p) {
		t.Errorf("peak of a configuration that did not run = %v, want NaN", p)
	}
}
