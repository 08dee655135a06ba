package mcpicli

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// `caddy mcpi verify --config`: the route of a config that a credential is
// checked against, and the edge that checks it.

// mcpiRoute is one mcpi handler of a config and where it serves.
type mcpiRoute struct {
	listen []string // its server's listen addresses
	// hosts are the host matchers of its top-level route; nil when the
	// route takes every host of the server.
	hosts   []string
	handler map[string]any // its JSON config
}

// label names the route in messages: its hosts and its server's addresses.
func (r mcpiRoute) label() string {
	hosts := "any host"
	if r.hosts != nil {
		hosts = strings.Join(r.hosts, ",")
	}
	return hosts + " (" + strings.Join(r.listen, ",") + ")"
}

// siteHost is the Host a client of the route sends when the route has one
// host on one port, else "".
func (r mcpiRoute) siteHost(c Caddy) string {
	if len(r.hosts) != 1 || strings.Contains(r.hosts[0], "*") || len(r.listen) != 1 {
		return ""
	}
	return withPort(r.hosts[0], c.ListenPort(r.listen[0]), "")
}

// findMCPIRoutes lists the mcpi handlers of a JSON config's http servers,
// in their routes and error routes, by server name.
func findMCPIRoutes(cfgJSON []byte) ([]mcpiRoute, error) {
	type route struct {
		Match  []map[string]json.RawMessage `json:"match"`
		Handle []any                        `json:"handle"`
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen []string `json:"listen"`
					Routes []route  `json:"routes"`
					Errors *struct {
						Routes []route `json:"routes"`
					} `json:"errors"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		return nil, fmt.Errorf("reading config: %v", err)
	}
	var out []mcpiRoute
	servers := cfg.Apps.HTTP.Servers
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		srv := servers[name]
		routes := srv.Routes
		if srv.Errors != nil {
			routes = append(slices.Clone(routes), srv.Errors.Routes...)
		}
		for _, rt := range routes {
			hosts, err := routeHostMatchers(rt.Match)
			if err != nil {
				return nil, fmt.Errorf("reading config: server %s: %v", name, err)
			}
			for _, h := range rt.Handle {
				eachMCPIHandler(h, func(m map[string]any) {
					out = append(out, mcpiRoute{listen: srv.Listen, hosts: hosts, handler: m})
				})
			}
		}
	}
	return out, nil
}

// routeHostMatchers returns the hosts of a route's matcher sets, or nil
// when one set has no host matcher (the route takes any host).
func routeHostMatchers(sets []map[string]json.RawMessage) ([]string, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	var hosts []string
	for _, set := range sets {
		raw, ok := set["host"]
		if !ok {
			return nil, nil
		}
		var hs []string
		if err := json.Unmarshal(raw, &hs); err != nil {
			return nil, fmt.Errorf("host matcher: %v", err)
		}
		hosts = append(hosts, hs...)
	}
	return hosts, nil
}

// pickRoute chooses the route of site (a site address as the Caddyfile
// writes it: [scheme://]host[:port], or :port), or the only route when
// site is empty, and returns the Host a client of it sends ("" when that
// cannot be told). Routes whose handlers have the same settings count as
// one, since the same settings give the same verdict for the same Host.
func pickRoute(c Caddy, routes []mcpiRoute, site string) (mcpiRoute, string, error) {
	if len(routes) == 0 {
		return mcpiRoute{}, "", errors.New("the config has no mcpi handler")
	}
	if site == "" {
		if distinct := distinctRoutes(routes); len(distinct) > 1 {
			return mcpiRoute{}, "", fmt.Errorf("the config has %d mcpi routes with different settings, choose one with --site: %s", len(distinct), labels(distinct))
		}
		// The Host of the site, when every route has the same one.
		host := routes[0].siteHost(c)
		for _, r := range routes[1:] {
			if r.siteHost(c) != host {
				host = ""
			}
		}
		return routes[0], host, nil
	}

	scheme, siteHost, sitePort, err := c.ParseSite(site)
	if err != nil || (siteHost == "" && sitePort == "") {
		return mcpiRoute{}, "", fmt.Errorf("--site %q: want a site address, [scheme://]host[:port] or :port", site)
	}
	port := sitePort
	switch {
	case port != "":
	case scheme == "http":
		port = strconv.Itoa(httpPort)
	case scheme == "https":
		port = strconv.Itoa(httpsPort)
	}
	onPort := func(r mcpiRoute) bool {
		return port == "" || slices.ContainsFunc(r.listen, func(l string) bool { return c.ListenPort(l) == port })
	}
	// The routes naming the host, else those taking any host on that port:
	// as Caddy tries a site's own routes before a catch-all.
	var matched []mcpiRoute
	if siteHost != "" {
		for _, r := range routes {
			if onPort(r) && slices.ContainsFunc(r.hosts, func(h string) bool { return c.MatchHost(siteHost, h) }) {
				matched = append(matched, r)
			}
		}
	}
	if len(matched) == 0 {
		for _, r := range routes {
			if onPort(r) && r.hosts == nil {
				matched = append(matched, r)
			}
		}
	}
	switch distinct := distinctRoutes(matched); len(distinct) {
	case 0:
		return mcpiRoute{}, "", fmt.Errorf("no mcpi route serves %s; the config's mcpi routes: %s", site, labels(distinctRoutes(routes)))
	case 1:
	default:
		return mcpiRoute{}, "", fmt.Errorf("%s has %d mcpi handlers with different settings (%s): verify cannot tell which one a request meets", site, len(distinct), labels(distinct))
	}
	host := ""
	if siteHost != "" {
		host = withPort(siteHost, sitePort, scheme)
	}
	return matched[0], host, nil
}

// distinctRoutes keeps the first route of each handler configuration.
func distinctRoutes(routes []mcpiRoute) []mcpiRoute {
	var out []mcpiRoute
	seen := map[string]bool{}
	for _, r := range routes {
		b, _ := json.Marshal(r.handler) // map keys sorted: equal settings, equal bytes
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, r)
		}
	}
	return out
}

func labels(routes []mcpiRoute) string {
	var ls []string
	for _, r := range routes {
		ls = append(ls, r.label())
	}
	return strings.Join(ls, "; ")
}

// The default ports of the schemes: the CLI runs no http app that could
// have changed them.
const httpPort, httpsPort = 80, 443

// withPort is the Host header a client sends for host on port: without
// the port when it is the default of the scheme (either scheme's, when
// scheme is not given).
func withPort(host, port, scheme string) string {
	https, http := strconv.Itoa(httpsPort), strconv.Itoa(httpPort)
	switch {
	case port == "",
		port == https && scheme != "http",
		port == http && scheme != "https":
		return host
	}
	return host + ":" + port
}

// routeEdge builds the edge of a route's handler config as Provision does,
// keeping only what verifying a credential uses. The rest would start
// work, or read keys and storage, that a one-off check has no use for:
// Level 2 keys and upstream probes, the Level 3 handshake and its store,
// the per-tool policy, the audit log, the verification cache.
func routeEdge(c Caddy, handler map[string]any) (*edge.Handler, edge.Config, error) {
	m := make(map[string]any, len(handler))
	for k, v := range handler {
		if k != "handler" { // the module name, as Caddy strips it
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, edge.Config{}, err
	}
	cfg, err := c.EdgeConfig(b)
	if err != nil {
		return nil, edge.Config{}, fmt.Errorf("the route's mcpi settings: %v", err)
	}
	cfg.Level = 1
	cfg.Level2Config = edge.Level2Config{}
	cfg.Level3Config = edge.Level3Config{}
	cfg.PolicyConfig = edge.PolicyConfig{}
	cfg.ObservabilityConfig = edge.ObservabilityConfig{}
	cfg.VerificationCacheSize = -1
	e, err := edge.New(cfg)
	if err != nil {
		return nil, edge.Config{}, fmt.Errorf("the route's mcpi settings: %v", err)
	}
	return e, cfg, nil
}

// Routes is the RouteLoader of Verify in c: it reads the config (adapting
// it like `caddy run` does) and returns the edge of the route of site, and
// the Host its clients send.
func Routes(c Caddy) RouteLoader {
	return func(configFile, adapter, site string) (*edge.Handler, string, error) {
		return loadRoute(c, configFile, adapter, site)
	}
}

func loadRoute(c Caddy, configFile, adapter, site string) (*edge.Handler, string, error) {
	cfgJSON, err := c.LoadConfig(configFile, adapter)
	if err != nil {
		return nil, "", err
	}
	routes, err := findMCPIRoutes(cfgJSON)
	if err != nil {
		return nil, "", err
	}
	r, host, err := pickRoute(c, routes, site)
	if err != nil {
		return nil, "", err
	}
	e, cfg, err := routeEdge(c, r.handler)
	if err != nil {
		return nil, "", err
	}
	if host == "" && len(cfg.Audiences) == 0 {
		_ = e.Close()
		return nil, "", fmt.Errorf("the route %s derives its audiences from the Host of each request: "+
			"name the host agents use with --site <host>[:<port>]", r.label())
	}
	return e, host, nil
}
