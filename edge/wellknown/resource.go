package wellknown

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge/internal/reply"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
)

// Resource is the RFC 9728 protected resource metadata, served at
// /.well-known/oauth-protected-resource and its per-path forms.
type Resource struct {
	// Level is the MCP-I level enforced; the document lists 1 to Level.
	Level int
	// AuthorizationServers are the configured ones.
	AuthorizationServers []string
	// FrontDoorScopes, when the edge is the authorization server of its
	// own routes, are the scopes it grants; nil when it is not.
	FrontDoorScopes func() []string
}

type resourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	MCPILevelsSupported    []int    `json:"mcpi_levels_supported"`
}

// serve answers the document. The resource is the origin of the request;
// for the per-path form it is origin + path, because RFC 9728 §3.3
// requires the resource to match the URL the document was fetched for.
func (res *Resource) serve(w http.ResponseWriter, r *http.Request, s *site.Site) {
	_, u := s.Original(r)
	origin := s.Origin(r)
	resource := origin + strings.TrimPrefix(u.Path, site.WellKnownResource)
	servers := res.AuthorizationServers
	var scopes []string
	if res.FrontDoorScopes != nil {
		// The edge is the authorization server of its own routes.
		servers = append([]string{origin}, servers...)
		scopes = res.FrontDoorScopes()
	}
	levels := make([]int, 0, res.Level)
	for l := 1; l <= res.Level; l++ {
		levels = append(levels, l)
	}
	body, _ := json.Marshal(resourceMetadata{
		Resource:               resource,
		AuthorizationServers:   servers,
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
		MCPILevelsSupported:    levels,
	})
	// Public and the same for every client of a Host, but short-lived so a
	// config change shows up quickly.
	reply.VaryHost(w)
	reply.JSON(w, http.StatusOK, body, "public, max-age=300")
}
