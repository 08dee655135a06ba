package handshake

import (
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
)

// tracedDiscover is discover in a span of its own when the request is
// traced, with the source the endpoints came from.
func (dv *Discovery) tracedDiscover(r *http.Request, next Next) (*Endpoints, time.Duration) {
	ctx, span := observe.StartSpan(r.Context(), observe.SpanDiscovery)
	if !span.IsRecording() {
		return dv.discover(r, next)
	}
	eps, ttl := dv.discover(r.WithContext(ctx), next)
	span.SetAttributes(attribute.String("mcpi.discovery_source", eps.Source))
	observe.EndSpan(span, nil)
	return eps, ttl
}
