package ratelimit

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of a limit's decision, the result label of
// caddy_mcpi_rate_limit_decisions_total.
const (
	resultAllowed = "allowed"
	resultLimited = "limited"
	resultError   = "error"
)

// Metrics counts decisions per limit kind (the limit's key parts, such as
// "agent+tool", never a DID or a tool name) and result:
//
//	caddy_mcpi_rate_limit_decisions_total{key,result}   allowed|limited|error
type Metrics struct {
	decisions *prometheus.CounterVec
}

// NewMetrics registers the collector in reg, or reuses the one already
// there (another handler of the same configuration).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "mcpi", Name: "rate_limit_decisions_total",
		Help: "Rate limit decisions, by the limit's key (agent, user, tool or a combination) and result (allowed, limited, error: the store could not be reached).",
	}, []string{"key", "result"})
	if err := reg.Register(c); err != nil {
		are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
		if !ok {
			return nil, fmt.Errorf("ratelimit: registering metrics: %v", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("ratelimit: registering metrics: %v", err)
		}
		c = existing
	}
	return &Metrics{decisions: c}, nil
}

// count counts one decision; kind is a Limit.Kind, from the configuration.
func (m *Metrics) count(kind, result string) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(kind, result).Inc()
}
