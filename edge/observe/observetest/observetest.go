// Package observetest reads the edge's metrics back in tests: the series
// of a registry, one series' value, and the checks every label must pass.
package observetest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// Series is one sample of a gathered metric: its labels and value (the
// sample count for a histogram).
type Series struct {
	Labels map[string]string
	Value  float64
}

// Gather returns the mcpi series of reg by metric name.
func Gather(t testing.TB, reg prometheus.Gatherer) map[string][]Series {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := make(map[string][]Series)
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "caddy_mcpi_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			s := Series{Labels: make(map[string]string)}
			for _, lp := range m.GetLabel() {
				s.Labels[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.Value = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.Value = float64(m.GetHistogram().GetSampleCount())
			}
			out[mf.GetName()] = append(out[mf.GetName()], s)
		}
	}
	return out
}

// Lint runs Prometheus' linter (naming, units, help) on the mcpi
// metrics of reg.
func Lint(t testing.TB, reg prometheus.Gatherer) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var ours []*dto.MetricFamily
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "caddy_mcpi_") {
			ours = append(ours, mf)
		}
	}
	problems, err := promlint.NewWithMetricFamilies(ours).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}

// Value returns the value of the series of name with exactly labels.
func Value(all map[string][]Series, name string, labels ...string) float64 {
	for _, s := range all[name] {
		if len(s.Labels) != len(labels)/2 {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if s.Labels[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if match {
			return s.Value
		}
	}
	return 0
}

// safeLabel is the shape every label value must have: snake_case tags and
// MCP tool names, never a DID (':'), a JWS or a URL.
var safeLabel = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,64}$`)

// AssertBoundedLabels fails if a label value of any mcpi metric has an
// unsafe shape or contains one of secrets.
func AssertBoundedLabels(t testing.TB, all map[string][]Series, secrets ...string) {
	t.Helper()
	for name, ss := range all {
		for _, s := range ss {
			for k, v := range s.Labels {
				if !safeLabel.MatchString(v) || strings.Contains(v, "did:") {
					t.Errorf("%s{%s=%q}: unbounded label value", name, k, v)
				}
				for _, sec := range secrets {
					if sec != "" && strings.Contains(sec, v) && len(v) > 8 {
						t.Errorf("%s{%s=%q}: label holds part of a secret", name, k, v)
					}
				}
			}
		}
	}
}
