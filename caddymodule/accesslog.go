package caddymodule

import (
	"encoding/json"
	"net"
	"reflect"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// Caddy's access log records the request headers as they arrived: it
// clones them before any handler runs, so the edge removing a carrier does
// not keep it out of the log, and Caddy itself redacts only Authorization
// (unless log_credentials is on). Provision warns when a credential header
// this route accepts reaches an access log whose encoder keeps it. Caddy
// offers no way to redact more, hence a warning and not a fix.

// carrierLogHeaders are the header carriers that hold a credential (or, for
// the chain, the ancestors' credentials), as Caddy's access log names them:
// Go's canonical spelling.
var carrierLogHeaders = []struct{ carrier, header string }{
	{"kya_delegation", "Kya-Delegation"},
	{"kya_os_delegation_credential", "Kya-Os-Delegation-Credential"},
	{"mcp_i_credential", "Mcp-I-Credential"},
	{"kya_os_delegation_chain", "Kya-Os-Delegation-Chain"},
}

// handshakeSessionHeader holds the Level 3 session token, a bearer token
// too.
const handshakeSessionHeader = "X-Mcpi-Handshake-Session"

// pickupTokenLogHeader holds the draft-kya-http-02 pickup token: whoever
// holds it can poll for the delegation the user approved.
const pickupTokenLogHeader = "X-Kya-Pickup-Token"

// accessLogNote is the warning's explanation.
const accessLogNote = "Caddy logs request headers as they arrived and redacts only Authorization: " +
	"whoever reads the log can present a bare credential or a session token until it expires. " +
	"A credential sent inside a per-request presentation (require_presentation at level 3, " +
	"where each presentation is single-use) is useless alone once logged."

// accessLogCodeNote adds to the note on a route with the front door: the
// log keeps response headers too, among them the consent page's redirect.
const accessLogCodeNote = "With authorization_server, the log also records the consent page's 302 Location " +
	"(resp_headers), which holds an authorization code: single-use, valid 60 s and useless without the client's " +
	"PKCE verifier, so of little value; delete resp_headers>Location with the filter to keep it out."

// accessLogPickupNote adds to the note on a route with kya_http.
const accessLogPickupNote = "With kya_http, X-Kya-Pickup-Token is the agent's pickup token: whoever reads it before " +
	"the agent's first successful poll can collect the delegation the user approved (it is handed out once)."

// warnAccessLog warns, once, when a request this handler admits can be
// written to an access log with a credential header in full. It needs the
// server being provisioned (caddyhttp puts it in the context), so it does
// nothing outside an http app's provisioning.
func (h *Handler) warnAccessLog(ctx caddy.Context) {
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil || srv.Logs == nil {
		return // no access log
	}
	headers := h.credentialHeaders(srv.Logs.ShouldLogCredentials)
	if len(headers) == 0 {
		return
	}
	hosts, anyHost := routeHosts(srv)
	loggers := accessLoggers(srv.Logs, hosts, anyHost)
	if len(loggers) == 0 {
		return
	}
	logs, known := configuredLogs(ctx)
	var leaking []string
	var kept []string
	if !known {
		// Caddy's logging config could not be read: assume the worst, so
		// that an unfiltered log is never passed over in silence.
		leaking = headers
	}
	for _, l := range logs {
		if !slices.ContainsFunc(loggers, l.allows) {
			continue
		}
		logged := false
		for _, hd := range headers {
			if !l.removes(hd) {
				logged = true
				if !slices.Contains(leaking, hd) {
					leaking = append(leaking, hd)
				}
			}
		}
		if logged {
			kept = append(kept, l.name)
		}
	}
	if len(leaking) == 0 {
		return
	}
	// Headers in the order of carrierLogHeaders, logs by name.
	leaking = slices.DeleteFunc(slices.Clone(headers), func(hd string) bool { return !slices.Contains(leaking, hd) })
	slices.Sort(kept)
	note := accessLogNote
	if h.AuthorizationServer != nil {
		note += " " + accessLogCodeNote
	}
	if slices.Contains(leaking, pickupTokenLogHeader) {
		note += " " + accessLogPickupNote
	}
	fields := []zap.Field{
		zap.Strings("headers", leaking),
		zap.String("caddyfile", filterSnippet(leaking)),
		// An object, not a string, so that it can be copied from a JSON log.
		zap.Reflect("json", json.RawMessage(filterJSON(leaking))),
		zap.String("note", note),
	}
	if known {
		fields = append(fields, zap.Strings("logs", kept))
	}
	h.logger.Warn("mcpi: the access log records credential headers in full; "+
		"remove them with a log filter (caddyfile: the site's log block; json: the log's encoder)", fields...)
}

// credentialHeaders are the headers of the enabled carriers that hold a
// credential or a session token, as the access log names them.
func (h *Handler) credentialHeaders(logCredentials bool) []string {
	enabled := func(c string) bool { return len(h.Carriers) == 0 || slices.Contains(h.Carriers, c) }
	var out []string
	if logCredentials && enabled("authorization") {
		out = append(out, "Authorization")
	}
	for _, c := range carrierLogHeaders {
		if enabled(c.carrier) {
			out = append(out, c.header)
		}
	}
	if h.Level >= 3 {
		out = append(out, handshakeSessionHeader)
	}
	if h.AuthorizationServer != nil && h.AuthorizationServer.KYAHTTP != nil {
		out = append(out, pickupTokenLogHeader)
	}
	return out
}

// filterSnippet is the Caddyfile log block that removes headers.
func filterSnippet(headers []string) string {
	var b strings.Builder
	b.WriteString("log {\n\tformat filter {\n")
	for _, hd := range headers {
		b.WriteString("\t\trequest>headers>" + hd + " replace REDACTED\n")
	}
	b.WriteString("\t}\n}")
	return b.String()
}

// filterJSON is the same filter as the "encoder" of a JSON log config.
func filterJSON(headers []string) string {
	type filter struct {
		Filter string `json:"filter"`
		Value  string `json:"value"`
	}
	fields := make(map[string]filter, len(headers))
	for _, hd := range headers {
		fields["request>headers>"+hd] = filter{"replace", "REDACTED"}
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the ">" of the field paths, as written by hand
	_ = enc.Encode(struct {
		Format string            `json:"format"`
		Fields map[string]filter `json:"fields"`
	}{"filter", fields}) // cannot fail: strings only
	return strings.TrimSuffix(b.String(), "\n")
}

// routeHosts returns the hosts the top-level route being provisioned
// matches, or anyHost when it matches every host (no host matcher in one
// of its matcher sets) or cannot be told. Caddy provisions a server's
// routes in order, and clears a route's HandlersRaw only once all its
// handlers are provisioned (caddy.Context.LoadModule), so the route of
// this handler is the first that still has HandlersRaw; the error routes
// come after every other.
func routeHosts(srv *caddyhttp.Server) (hosts []string, anyHost bool) {
	routes := srv.Routes
	if srv.Errors != nil && !slices.ContainsFunc(routes, func(r caddyhttp.Route) bool { return r.HandlersRaw != nil }) {
		routes = srv.Errors.Routes
	}
	i := slices.IndexFunc(routes, func(r caddyhttp.Route) bool { return r.HandlersRaw != nil })
	if i < 0 || len(routes[i].MatcherSets) == 0 {
		return nil, true
	}
	for _, set := range routes[i].MatcherSets {
		found := false
		for _, m := range set {
			var mh caddyhttp.MatchHost
			switch t := m.(type) {
			case *caddyhttp.MatchHost:
				mh = *t
			case caddyhttp.MatchHost:
				mh = t
			default:
				continue
			}
			hosts = append(hosts, mh...)
			found = true
		}
		if !found {
			return nil, true
		}
	}
	return hosts, false
}

// accessLoggers returns the names of the loggers that access log entries
// of requests to hosts are written with: caddyhttp's shouldLogRequest and
// ServerLogConfig.getLoggerHosts, with "http.log.access" prefixed.
// anyHost: the route takes every host the server does.
func accessLoggers(slc *caddyhttp.ServerLogConfig, hosts []string, anyHost bool) []string {
	var names []string
	add := func(n string) {
		full := "http.log.access"
		if n != "" {
			full += "." + n
		}
		if !slices.Contains(names, full) {
			names = append(names, full)
		}
	}
	if anyHost {
		for _, ns := range slc.LoggerNames {
			for _, n := range ns {
				add(n)
			}
		}
		if !slc.SkipUnmappedHosts {
			add(slc.DefaultLoggerName)
		}
		return names
	}
	for _, host := range hosts {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(host)
		mapped := false
		for key := range slc.LoggerNames {
			if certmagic.MatchWildcard(host, key) {
				mapped = true
			}
		}
		skipped := slices.ContainsFunc(slc.SkipHosts, func(s string) bool { return certmagic.MatchWildcard(host, s) })
		switch {
		case mapped:
			for _, n := range loggerNamesFor(slc, host) {
				add(n)
			}
		case skipped || slc.SkipUnmappedHosts:
		default:
			add(slc.DefaultLoggerName)
		}
	}
	return names
}

// loggerNamesFor is caddyhttp's ServerLogConfig.getLoggerHosts (unexported):
// the names of the exact host, else of the first wildcard that matches,
// else the default name. The keys are lower-cased here, as caddyhttp does
// when it provisions the server, which may not have happened yet.
func loggerNamesFor(slc *caddyhttp.ServerLogConfig, host string) []string {
	lookup := func(k string) ([]string, bool) {
		for key, ns := range slc.LoggerNames {
			if strings.EqualFold(key, k) {
				return ns, true
			}
		}
		return nil, false
	}
	if ns, ok := lookup(host); ok {
		return ns
	}
	labels := strings.Split(host, ".")
	for i := range labels {
		if labels[i] == "" {
			continue
		}
		labels[i] = "*"
		if ns, ok := lookup(strings.Join(labels, ".")); ok {
			return ns
		}
	}
	return []string{slc.DefaultLoggerName}
}

// customLog is what warnAccessLog needs of one of Caddy's logs.
type customLog struct {
	name             string
	include, exclude []string
	// removed are the field paths ("request>headers>Kya-Delegation") its
	// filter encoders delete, replace or hash.
	removed []string
}

// configuredLogs returns the logs of the config being provisioned, or
// known false when they cannot be read. Caddy gives modules no access to
// its logging config: it sits behind the context's unexported config
// (caddy.Context.cfg.Logging, provisioned before any app), so it is read
// by reflection, read-only, in the shape of Caddy v2.11. Logs whose writer
// discards are left out, as Caddy leaves them out.
func configuredLogs(ctx caddy.Context) (logs []customLog, known bool) {
	defer func() {
		if recover() != nil {
			logs, known = nil, false
		}
	}()
	cfg := reflect.ValueOf(ctx).FieldByName("cfg")
	if cfg.Kind() != reflect.Pointer || cfg.IsNil() || cfg.Elem().Type() != reflect.TypeFor[caddy.Config]() {
		return nil, false
	}
	lg := cfg.Elem().FieldByName("Logging")
	if lg.IsNil() {
		return nil, false
	}
	m := lg.Elem().FieldByName("Logs")
	iter := m.MapRange()
	for iter.Next() {
		cl := iter.Value().Elem() // caddy.CustomLog
		if w := cl.FieldByName("writerOpener"); w.IsValid() && !w.IsNil() && w.Elem().Type() == reflect.TypeFor[*caddy.DiscardWriter]() {
			continue
		}
		enc := cl.FieldByName("encoder")
		if !enc.IsValid() || enc.Kind() != reflect.Interface {
			return nil, false
		}
		logs = append(logs, customLog{
			name:    iter.Key().String(),
			include: stringsOf(cl.FieldByName("Include")),
			exclude: stringsOf(cl.FieldByName("Exclude")),
			removed: removedFields(enc),
		})
	}
	return logs, true
}

// removedFields are the fields the filter encoders of enc (an encoder, as
// a reflect.Value of interface kind) take out of an entry, descending into
// the encoders they wrap. Any other encoder writes every field.
func removedFields(enc reflect.Value) []string {
	var out []string
	for enc.Kind() == reflect.Interface && !enc.IsNil() && enc.Elem().Type() == reflect.TypeFor[*logging.FilterEncoder]() {
		fe := enc.Elem().Elem()
		iter := fe.FieldByName("Fields").MapRange()
		for iter.Next() {
			switch iter.Value().Elem().Type() {
			case reflect.TypeFor[*logging.DeleteFilter](), reflect.TypeFor[*logging.ReplaceFilter](), reflect.TypeFor[*logging.HashFilter]():
				out = append(out, iter.Key().String())
			}
		}
		enc = fe.FieldByName("wrapped")
	}
	return out
}

func stringsOf(v reflect.Value) []string {
	out := make([]string, v.Len())
	for i := range out {
		out[i] = v.Index(i).String()
	}
	return out
}

// removes reports whether the log's filter takes header out of the access
// log entry: the header itself, or the headers or the request as a whole.
func (l customLog) removes(header string) bool {
	return slices.ContainsFunc(l.removed, func(f string) bool {
		return f == "request" || f == "request>headers" || f == "request>headers>"+header
	})
}

// allows is caddy.CustomLog.loggerAllowed (unexported) for a logger name:
// whether the log takes the entries of the logger called name.
func (l customLog) allows(name string) bool {
	if len(l.include) == 0 && len(l.exclude) == 0 {
		return true
	}
	name += "."
	var accept, reject int
	for _, ns := range l.include {
		if strings.HasPrefix(name, ns+".") && len(ns) > accept {
			accept = len(ns)
		}
	}
	if len(l.include) > 0 && accept == 0 {
		return false
	}
	for _, ns := range l.exclude {
		if ns == "*" {
			return false // every module's logs; "." is the core's
		}
		if strings.HasPrefix(name, ns+".") && len(ns) > reject {
			reject = len(ns)
		}
	}
	if reject > accept {
		return false
	}
	return accept > reject || (len(l.include) == 0 && reject == 0)
}
