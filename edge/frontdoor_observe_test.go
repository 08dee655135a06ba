package edge_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// TestFrontDoorEvents: registrations, consents, issued and revoked
// credentials are counted and audited, and no audit entry holds a token.
func TestFrontDoorEvents(t *testing.T) {
	reg := prometheus.NewRegistry()
	core, logs := observer.New(zap.InfoLevel)
	f := newFrontDoor(t, nil, nil, edge.WithMetrics(reg), edge.WithLogger(zap.New(core)))
	_, tok := f.flow("echo:execute")
	f.postForm("/oauth/revoke", map[string][]string{"token": {tok.RefreshToken}}, false, nil)

	count := func(event string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() != "caddy_mcpi_authserver_events_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == event {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	for _, e := range []string{"registration", "consent_approved", "issued", "revoked"} {
		if count(e) != 1 {
			t.Errorf("%s counted %v times, want 1", e, count(e))
		}
	}
	var audited []string
	for _, e := range logs.All() {
		if e.Message != "mcpi authorization server event" {
			continue
		}
		fields := e.ContextMap()
		audited = append(audited, fields["event"].(string))
		for k, v := range fields {
			s, _ := v.(string)
			for _, secret := range []string{tok.AccessToken, tok.RefreshToken, tok.AccessToken[:40], strings.Split(tok.RefreshToken, ".")[1]} {
				if s != "" && strings.Contains(s, secret) {
					t.Errorf("audit field %s holds a token", k)
				}
			}
		}
	}
	if strings.Join(audited, ",") != "registration,consent_approved,issued,revoked" {
		t.Errorf("audited %v", audited)
	}
}
