package caddymodule

import (
	"fmt"

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
	err := eachSetting(d, "chain_fetch: ", []string{"allow"}, func(sub string) error {
		switch sub {
		case "allow":
			var more []string
			if err := argList(d, &more); err != nil {
				return err
			}
			cf.Allow = append(cf.Allow, more...)
			return nil
		case "timeout":
			return parseDuration(d, &cf.Timeout)
		case "cache_ttl":
			return parseDuration(d, &cf.CacheTTL)
		case "max_size":
			return parseSize(d, &cf.MaxSize)
		}
		return d.Errf("unrecognized chain_fetch subdirective %q", sub)
	})
	if err != nil {
		return err
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
	case "status_list_ttl":
		err = parseDuration(d, &c.StatusListTTL)
	case "status_stale_if_error":
		err = parseDuration(d, &c.StatusStaleIfError)
	case "jsonld":
		var v string
		if err = oneOf(d, name, &v, "on", "off"); err == nil {
			c.DisableJSONLD = v == "off"
		}
	case "chain_fetch":
		err = h.unmarshalChainFetch(d)
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
	default:
		return false, nil
	}
	return true, err
}

// unmarshalObservability parses an observability subdirective of the mcpi
// block; handled is false for a name it does not know. Syntax:
//
//	audit_log on|denials|off
func (h *Handler) unmarshalObservability(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	if name != "audit_log" {
		return false, nil
	}
	var v string
	if err := oneOf(d, name, &v, "on", "denials", "off"); err != nil {
		return true, err
	}
	c := &h.ObservabilityConfig
	c.DisableAuditLog, c.AuditDenialsOnly = v == "off", v == "denials"
	return true, nil
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
		err = flag(d, &c.ToolScopeConvention)
	case "consent_url":
		err = args(d, &c.ConsentURL)
	case "handshake_actions":
		err = oneOf(d, name, &c.HandshakeActions, "enforce", "observe", "off")
	case "handshake_action_hosts":
		if err = argList(d, &c.HandshakeActionHosts); err != nil {
			break
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
		err = parseSize(d, &c.MaxResponseSize)
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
	err := eachSetting(d, fmt.Sprintf("tool %q: ", t.Name), []string{"rule"}, func(opt string) error {
		switch opt {
		case "scopes":
			return argList(d, &t.Scopes)
		case "allow_anonymous":
			return flag(d, &t.AllowAnonymous)
		case "require_presentation":
			return flag(d, &t.RequirePresentation)
		case "rule":
			rc, err := unmarshalRule(d)
			t.Rules = append(t.Rules, rc)
			return err
		}
		return d.Errf("tool %q: unrecognized setting %q", t.Name, opt)
	})
	if err != nil {
		return err
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
	if d.NextArg() {
		return d.Errf("tool_annotations_policy: settings go in a block: tool_annotations_policy { read_only … }")
	}
	a := &ToolAnnotationsPolicy{}
	err := eachSetting(d, "tool_annotations_policy: ", nil, func(class string) error {
		switch class {
		case "read_only":
			return argList(d, &a.ReadOnly)
		case "destructive":
			return argList(d, &a.Destructive)
		case "other":
			return argList(d, &a.Other)
		}
		return d.Errf("tool_annotations_policy: unrecognized class %q (want read_only, destructive or other)", class)
	})
	if err != nil {
		return err
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
