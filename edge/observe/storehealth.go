package observe

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Health of the shared nonce store, read from the stores themselves when
// metrics are scraped (a store outlives the configurations using it, so
// its counts do too):
//
//	caddy_mcpi_nonce_store_up{kind}                          1 when its last operation reached it
//	caddy_mcpi_nonce_store_failures_total{kind}              operations that could not reach it
//	caddy_mcpi_nonce_store_replica_wait_timeouts_total{kind} single-use writes too few replicas acknowledged in time
//
// kind is the deployment: standalone, sentinel or cluster. Several stores
// of one kind in a configuration are added up, and up is 0 when any is
// down.

// StoreHealth is one store's health at one moment.
type StoreHealth struct {
	Kind                   string
	Up                     bool
	Failures, WaitTimeouts uint64
}

// storeHealthCollector is registered once per registry; each store
// module of the configuration adds its source.
type storeHealthCollector struct {
	mu      sync.Mutex
	sources map[any]func() StoreHealth

	up, failures, waits *prometheus.Desc
}

// RegisterStoreHealth adds a store's health to reg's metrics; key names the
// store (its pool key), so a store used twice in a configuration counts
// once.
func RegisterStoreHealth(reg prometheus.Registerer, key any, src func() StoreHealth) error {
	name := func(n string) string { return prometheus.BuildFQName(metricsNamespace, metricsSubsystem, n) }
	c := &storeHealthCollector{
		sources:  map[any]func() StoreHealth{},
		up:       prometheus.NewDesc(name("nonce_store_up"), "1 when the nonce store's last operation reached it, by deployment kind.", []string{"kind"}, nil),
		failures: prometheus.NewDesc(name("nonce_store_failures_total"), "Nonce store operations that could not reach the store, by deployment kind.", []string{"kind"}, nil),
		waits: prometheus.NewDesc(name("nonce_store_replica_wait_timeouts_total"),
			"Single-use writes that too few Redis replicas acknowledged in time (refused with 503), by deployment kind.", []string{"kind"}, nil),
	}
	c, err := register(reg, c)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.sources[key] = src
	c.mu.Unlock()
	return nil
}

func (c *storeHealthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.failures
	ch <- c.waits
}

func (c *storeHealthCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	byKind := map[string]StoreHealth{}
	for _, src := range c.sources {
		h := src()
		k := fromSet(storeKinds, h.Kind)
		sum, seen := byKind[k]
		if !seen {
			sum.Up = true
		}
		sum.Up = sum.Up && h.Up
		sum.Failures += h.Failures
		sum.WaitTimeouts += h.WaitTimeouts
		byKind[k] = sum
	}
	c.mu.Unlock()
	for kind, h := range byKind {
		up := 0.0
		if h.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, kind)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(h.Failures), kind)
		ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(h.WaitTimeouts), kind)
	}
}

var storeKinds = labelSet("standalone", "sentinel", "cluster")
