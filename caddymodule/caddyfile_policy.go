package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/rules"
)

// unmarshalChainFetch parses the chain_fetch subdirective:
//
//	chain_fetch off
//	chain_fetch [on | <url-prefix>...] [{
//		allow <url-prefix>...       # repeatable
//		timeout <duration>          # default 5s
//		max_size <size>             # default 64KiB
//		cache_ttl <duration>        # default 5m
//	}]
//
// Prefixes are checked by Validate; one is required unless off.
func (h *Handler) unmarshalChainFetch(d *caddyfile.Dispenser) error {
	c := &h.DelegationConfig
	if h.chainFetchSet {
		return d.Err("chain_fetch already specified")
	}
	h.chainFetchSet = true
	args := d.RemainingArgs()
	if len(args) == 1 && args[0] == "off" {
		if d.NextBlock(d.Nesting()) {
			return d.Err("chain_fetch off takes no block")
		}
		c.ChainFetch = nil
		return nil
	}
	cf := new(ChainFetchConfig)
	if len(args) == 1 && args[0] == "on" {
		args = nil
	}
	for _, a := range args {
		if a == "on" || a == "off" {
			return d.Errf("chain_fetch %s must stand alone", a)
		}
	}
	cf.Allow = args
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch sub := d.Val(); sub {
		case "allow":
			more := d.RemainingArgs()
			if len(more) == 0 {
				return d.ArgErr()
			}
			cf.Allow = append(cf.Allow, more...)
		case "timeout", "cache_ttl":
			dst := &cf.Timeout
			if sub == "cache_ttl" {
				dst = &cf.CacheTTL
			}
			if *dst != 0 {
				return d.Errf("chain_fetch: %s already specified", sub)
			}
			if err := parseDuration(d, dst); err != nil {
				return err
			}
		case "max_size":
			if cf.MaxSize != 0 {
				return d.Errf("chain_fetch: %s already specified", sub)
			}
			if err := parseSize(d, &cf.MaxSize); err != nil {
				return err
			}
		default:
			return d.Errf("unrecognized chain_fetch subdirective %q", sub)
		}
	}
	if len(cf.Allow) == 0 {
		return d.Err("chain_fetch needs at least one allowed URL prefix (allow <url-prefix>)")
	}
	c.ChainFetch = cf
	return nil
}

// unmarshalDelegation parses a subdirective of this file; handled is false
// for a name it does not know. Syntax:
//
//	status_list_ttl <duration>          # default 60s
//	status_stale_if_error <duration>    # default 0
//	jsonld on|off                       # default on
//	jsonld_context <url> <file>         # repeatable, once per URL
//	chain_fetch ...                     # see unmarshalChainFetch
func (h *Handler) unmarshalDelegation(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	c := &h.DelegationConfig
	switch name {
	case "status_list_ttl", "status_stale_if_error":
		dst := &c.StatusListTTL
		if name == "status_stale_if_error" {
			dst = &c.StatusStaleIfError
		}
		if *dst != 0 {
			return true, d.Errf("%s already specified", name)
		}
		return true, parseDuration(d, dst)

	case "jsonld":
		if h.jsonldSet {
			return true, d.Errf("%s already specified", name)
		}
		h.jsonldSet = true
		var v string
		if !d.AllArgs(&v) {
			return true, d.ArgErr()
		}
		switch v {
		case "on":
			c.DisableJSONLD = false
		case "off":
			c.DisableJSONLD = true
		default:
			return true, d.Errf("jsonld must be on or off, got %q", v)
		}
		return true, nil

	case "chain_fetch":
		return true, h.unmarshalChainFetch(d)

	case "jsonld_context":
		var u, file string
		if !d.AllArgs(&u, &file) {
			return true, d.ArgErr()
		}
		if _, dup := c.JSONLDContexts[u]; dup {
			return true, d.Errf("jsonld_context %q already specified", u)
		}
		if c.JSONLDContexts == nil {
			c.JSONLDContexts = map[string]string{}
		}
		c.JSONLDContexts[u] = file
		return true, nil
	}
	return false, nil
}

// unmarshalObservability parses an observability subdirective of the mcpi
// block; handled is false for a name it does not know. Syntax:
//
//	audit_log on|denials|off
func (h *Handler) unmarshalObservability(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	switch name {
	case "audit_log":
		if h.auditSet {
			return true, d.Errf("%s already specified", name)
		}
		h.auditSet = true
		var v string
		if !d.AllArgs(&v) {
			return true, d.ArgErr()
		}
		c := &h.ObservabilityConfig
		switch v {
		case "on":
			c.DisableAuditLog, c.AuditDenialsOnly = false, false
		case "denials":
			c.DisableAuditLog, c.AuditDenialsOnly = false, true
		case "off":
			c.DisableAuditLog, c.AuditDenialsOnly = true, false
		default:
			return true, d.Errf("audit_log must be on, denials or off, got %q", v)
		}
		return true, nil
	}
	return false, nil
}

// unmarshalPolicy parses a policy subdirective of the mcpi block; handled is
// false for a name it does not know. Syntax:
//
//	tool <name|glob> [{             # repeatable, once per name or glob
//		scopes <scope>...
//		rule <name> <expression> [<message>]   # repeatable
//		allow_anonymous
//		require_presentation
//	}]
//	rule <name> <expression> [<message>]   # repeatable: every tools/call
//	authzen <url> { … }             # an AuthZEN PDP decides every tools/call
//	tool_default allow|deny          # default: deny once a tool rule exists
//	tool_scope_convention            # rules without scopes need <tool>:execute
//	consent_url <url>
//	handshake_actions enforce|observe|off   # default enforce
//	handshake_action_hosts <host|*.domain>...
//	max_response_size <size>         # default 4MiB
//	tool_annotations_policy {        # off by default; see ToolAnnotationsPolicy
//		read_only <scope>...
//		destructive <scope>...
//		other <scope>...
//	}
func (h *Handler) unmarshalPolicy(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	c := &h.PolicyConfig
	once := func(set bool) error {
		if set {
			return d.Errf("%s already specified", name)
		}
		return nil
	}
	switch name {
	case "tool":
		err = h.unmarshalTool(d)
	case "rule":
		var rc edge.RuleConfig
		if rc, err = unmarshalRule(d); err == nil {
			c.Rules = append(c.Rules, rc)
		}
	case "tool_default":
		err = oneOf(d, name, &c.ToolDefault, "allow", "deny")
	case "tool_scope_convention":
		if err = once(c.ToolScopeConvention); err != nil {
			break
		}
		if d.NextArg() {
			return true, d.ArgErr()
		}
		c.ToolScopeConvention = true
	case "consent_url":
		if err = once(c.ConsentURL != ""); err != nil {
			break
		}
		if !d.AllArgs(&c.ConsentURL) {
			return true, d.ArgErr()
		}
	case "handshake_actions":
		err = oneOf(d, name, &c.HandshakeActions, "enforce", "observe", "off")
	case "handshake_action_hosts":
		if err = once(c.HandshakeActionHosts != nil); err != nil {
			break
		}
		if c.HandshakeActionHosts = d.RemainingArgs(); len(c.HandshakeActionHosts) == 0 {
			return true, d.ArgErr()
		}
		for _, host := range c.HandshakeActionHosts {
			if !edge.ValidActionHost(host) {
				return true, d.Errf("handshake_action_hosts: %q is not a host name or *.domain", host)
			}
		}
	case "tool_annotations_policy":
		err = h.unmarshalToolAnnotationsPolicy(d)
	case "authzen":
		err = h.unmarshalAuthZEN(d)
	case "max_response_size":
		if err = once(c.MaxResponseSize != 0); err == nil {
			err = parseSize(d, &c.MaxResponseSize)
		}
	default:
		return false, nil
	}
	return true, err
}

// unmarshalTool parses one tool block.
func (h *Handler) unmarshalTool(d *caddyfile.Dispenser) error {
	var t ToolPolicy
	if !d.NextArg() {
		return d.ArgErr()
	}
	t.Name = d.Val()
	if d.NextArg() {
		return d.Errf("tool %q: settings go in a block: tool <name> { scopes … }", t.Name)
	}
	for _, o := range h.Tools {
		if o.Name == t.Name {
			return d.Errf("tool %q already specified", t.Name)
		}
	}
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if seen[opt] {
			return d.Errf("tool %q: %s already specified", t.Name, opt)
		}
		seen[opt] = true
		switch opt {
		case "scopes":
			if t.Scopes = d.RemainingArgs(); len(t.Scopes) == 0 {
				return d.ArgErr()
			}
		case "allow_anonymous":
			if d.NextArg() {
				return d.ArgErr()
			}
			t.AllowAnonymous = true
		case "require_presentation":
			if d.NextArg() {
				return d.ArgErr()
			}
			t.RequirePresentation = true
		case "rule":
			delete(seen, opt) // repeatable
			rc, err := unmarshalRule(d)
			if err != nil {
				return err
			}
			t.Rules = append(t.Rules, rc)
		default:
			return d.Errf("tool %q: unrecognized setting %q", t.Name, opt)
		}
	}
	if t.AllowAnonymous && len(t.Scopes) > 0 {
		return d.Errf("tool %q: allow_anonymous cannot be combined with scopes", t.Name)
	}
	if t.AllowAnonymous && t.RequirePresentation {
		return d.Errf("tool %q: allow_anonymous cannot be combined with require_presentation", t.Name)
	}
	h.Tools = append(h.Tools, t)
	return nil
}

// unmarshalToolAnnotationsPolicy parses
//
//	tool_annotations_policy {
//		read_only <scope>...
//		destructive <scope>...
//		other <scope>...
//	}
//
// Each class at most once, with at least one scope; at least one class.
func (h *Handler) unmarshalToolAnnotationsPolicy(d *caddyfile.Dispenser) error {
	if h.ToolAnnotationsPolicy != nil {
		return d.Err("tool_annotations_policy already specified")
	}
	if d.NextArg() {
		return d.Errf("tool_annotations_policy: settings go in a block: tool_annotations_policy { read_only … }")
	}
	a := &ToolAnnotationsPolicy{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *[]string
		switch opt := d.Val(); opt {
		case "read_only":
			dst = &a.ReadOnly
		case "destructive":
			dst = &a.Destructive
		case "other":
			dst = &a.Other
		default:
			return d.Errf("tool_annotations_policy: unrecognized class %q (want read_only, destructive or other)", opt)
		}
		if *dst != nil {
			return d.Errf("tool_annotations_policy: %s already specified", d.Val())
		}
		if *dst = d.RemainingArgs(); len(*dst) == 0 {
			return d.ArgErr()
		}
	}
	if err := a.Validate(); err != nil {
		return d.Err(err.Error())
	}
	h.ToolAnnotationsPolicy = a
	return nil
}

// unmarshalRule parses `rule <name> <expression> [<message>]` and compiles
// the expression, so that a rule that does not compile fails `caddy adapt`
// at its line.
func unmarshalRule(d *caddyfile.Dispenser) (edge.RuleConfig, error) {
	var rc edge.RuleConfig
	args := d.RemainingArgs()
	if len(args) < 2 || len(args) > 3 {
		return rc, d.Err("rule takes a name, a CEL expression and maybe a message: rule amount_cap `arguments.amount <= 100` \"transfers are limited to 100\"")
	}
	rc.Name, rc.Expression = args[0], args[1]
	if len(args) == 3 {
		rc.Message = args[2]
	}
	if _, err := rules.Compile(rc.Name, rc.Expression, rc.Message); err != nil {
		return rc, d.Errf("%v", err)
	}
	return rc, nil
}
