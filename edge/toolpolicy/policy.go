// Package toolpolicy is the edge's tool policy step. Policy.Check decides
// on an admitted request (the HTTP a policy reads, each tools/call's
// scopes, operator rules and AuthZEN decision, requestState and resume
// tokens, the edge's agent consent, rate limits) and returns either a
// Verdict or a *refusal.Refusal for the caller to write; Policy.Wrap
// applies the Verdict to the answer (tools/list filtering, handshake-action
// and consent-URL checks, learning parameter headers and annotation
// classes). Nothing in the package writes a refusal itself.
package toolpolicy

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/framing"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/rules"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// MCP-aware authorization (docs/protocol/mcpi.md#tool-policy-answers): per-tool policy on
// tools/call, tools/list filtering, and handshake-action checks on tool
// results.
//
// Decisions of this file, in short:
//   - A batch is forwarded only when every tools/call in it is allowed.
//     Otherwise the edge answers the whole batch itself: each denied call
//     gets its tool error result, every other request a JSON-RPC error
//     (codeBatchRefused) asking to send it on its own; notifications and
//     responses in the batch are dropped.
//   - Anonymous access exists only when some tool rule has allow_anonymous.
//     Then a request without credential is admitted when it is a POST whose
//     every message is initialize, server/discover, ping, tools/list, a
//     notification, or a tools/call of a tool whose rule allows anonymous
//     callers. tool_default allow never applies to anonymous callers, and
//     their tools/list shows only the anonymous tools.
//   - A response that must be checked but cannot be (too large, not JSON,
//     compressed, malformed) is not forwarded: the client gets a JSON-RPC
//     error instead. Only an answer to a request without tools/list while
//     handshake_actions is observe or off passes unchecked: there the
//     tool-list filter is a second line of defence. (Enforced, any answer
//     may carry a URL elicitation, so every one is checked.)
//   - tools/list hides every tool the caller may not call now, including
//     those a consent could unlock: list-time and call-time decisions agree.
//     Any answer that looks like a tool list is filtered, whatever request
//     id it carries, and a batch repeating a request id is refused: ids are
//     the client's, and servers route answers by them.
//   - A tool policy polices the body of every method that may carry one,
//     in any letter case, and refuses what an upstream could decode into
//     other JSON first (another charset, a Content-Encoding) or carry past
//     it (a body on GET or DELETE, CONNECT, protocol upgrades).

// Defaults and limits of the per-tool policy.
const (
	defaultMaxResponseSize = 4 << 20

	// maxListedTools bounds the tool names remembered from the upstream's
	// tools/list answers, used as log labels.
	maxListedTools = 512

	// codeBatchRefused is the JSON-RPC error (implementation-defined server
	// error range) given to the requests of a batch the edge did not
	// forward because another call in it was denied.
	codeBatchRefused = -32000
)

// Policy is the tool policy step of the pipeline: Check on the request
// (scopes, operator rules, the AuthZEN PDP, requestState and resume
// tokens, the edge's agent consent, denials, rate limits), Wrap on the
// answer (list filtering, handshake-action and consent-URL checks, learned
// parameter headers, annotation classes). It never writes a response: a
// request that goes no further is a *refusal.Refusal the caller writes.
type Policy struct {
	// pol is nil when no per-tool policy applies (no rules, default not
	// deny): every tool is allowed and tools/list is not filtered.
	pol             *mcp.Policy
	anyAnonymous    bool
	anyPresentation bool
	actions         mcp.ActionMode
	// listed remembers tool names the upstream listed, for log labels.
	listed *toolNames
	// annotations is nil unless tool_annotations_policy is set.
	annotations *annotationPolicy
	// states seals the requestState of 2026 consent prompts.
	states *stateSealer
	// params holds the x-mcp-header bindings learned from tools/list
	// answers (paramheaders.go).
	params *paramHeaderStore
	// rules is nil without operator rules (rules.go).
	rules *toolRules
	// pdp is nil without an AuthZEN PDP (authzen.go).
	pdp *pdpState
	// limits is nil without rate limits (ratelimit.go).
	limits *rateLimits

	actionHosts     []string
	maxBody         int64
	maxResponseSize int64
	// parts are the rest of the edge, as New was given them.
	parts Parts
}

// CarrierSession is the carrier of a decision admitted by a handshake
// session (edge session, or an upstream session bound at verify).
const CarrierSession = "session"

// New builds the step for cfg; maxBody is the route's max_body_size. It
// applies cfg's default max_response_size.
func New(ctx context.Context, cfg *PolicyConfig, maxBody int64, parts Parts) (*Policy, error) {
	pol, err := cfg.policy()
	if err != nil {
		return nil, err
	}
	mode, err := cfg.actionMode()
	if err != nil {
		return nil, err
	}
	var states *stateSealer
	if pol != nil {
		// Only a tool policy prompts; without one, storage is not touched.
		if states, err = newStateSealer(ctx, parts.Keys); err != nil {
			return nil, err
		}
	}
	maxResponse := cfg.MaxResponseSize
	if maxResponse == 0 {
		maxResponse = defaultMaxResponseSize
	}
	p := &Policy{pol: pol, actions: mode, listed: &toolNames{m: make(map[string]struct{})},
		annotations: newAnnotationPolicy(cfg.ToolAnnotationsPolicy, cfg.readsTools()), states: states,
		params: newParamHeaderStore(), actionHosts: cfg.HandshakeActionHosts,
		maxBody: maxBody, maxResponseSize: maxResponse, parts: parts}
	if parts.Limiter != nil {
		p.limits = &rateLimits{limiter: parts.Limiter}
	}
	if p.rules, err = cfg.compileRules(); err != nil {
		return nil, err
	}
	if p.pdp, err = newPDP(cfg.AuthZEN); err != nil {
		return nil, err
	}
	for _, t := range cfg.Tools {
		p.anyAnonymous = p.anyAnonymous || t.AllowAnonymous
		p.anyPresentation = p.anyPresentation || t.RequirePresentation
	}
	return p, nil
}

// PerTool reports whether a per-tool policy applies: then the step reads
// every body and refuses what is not JSON itself.
func (p *Policy) PerTool() bool { return p.pol != nil }

// anonymousMethods are the methods an anonymous client may send (besides
// notifications and the tools/call of anonymous tools): what an MCP client
// needs to start a session and find the public tools.
var anonymousMethods = []string{"initialize", "server/discover", "ping", mcp.MethodToolsList}

// AdmitAnonymous reports whether r, which presents no credential and no
// session, may go upstream anyway because everything it calls is allowed
// anonymously. body is the request body when the carriers read it, else nil.
func (p *Policy) AdmitAnonymous(r *http.Request, rb *framing.Body) bool {
	if p.pol == nil || !p.anyAnonymous || r.Method != http.MethodPost {
		return false
	}
	if rb.Raw() == nil {
		if !carrier.HasBody(r) {
			return false
		}
		body, err := carrier.ReadBody(nil, r, p.maxBody)
		if err != nil {
			return false
		}
		rb.Use(body)
	}
	msgs, _, err := rb.Messages()
	if err != nil {
		return false
	}
	for _, m := range msgs {
		switch {
		case m.Method == mcp.MethodToolsCall:
			name, _ := mcp.ToolCallName(m)
			if !p.toolAllowed(p.parts.Site.Host(r), name, nil, false) {
				return false
			}
		case slices.Contains(anonymousMethods, m.Method), strings.HasPrefix(m.Method, "notifications/"):
		default:
			return false // responses, and every other method
		}
	}
	return true
}

// toolAllowed is the policy's decision on tool, at the site named host
// (site.Host), for the caller holding d (nil when anonymous). An
// anonymous caller gets only tools whose rule allows anonymous callers:
// tool_default allow is for verified callers.
func (p *Policy) toolAllowed(host, tool string, d *vc.Delegation, presented bool) bool {
	dec := p.decide(host, tool, d, presented)
	if d == nil {
		return dec.Allowed && dec.Rule != nil && dec.Rule.AllowAnonymous
	}
	return dec.Allowed
}

func (p *Policy) decide(host, tool string, d *vc.Delegation, presented bool) mcp.Decision {
	pol := p.pol
	if d == nil {
		return pol.Decide(tool, nil, true, false)
	}
	if slices.Contains(handshakeTools, tool) && !pol.KnownTool(tool) {
		return mcp.Decision{Allowed: true, Reason: reasonHandshakeTool}
	}
	dec := pol.Decide(tool, d.Scopes, false, presented)
	if dec.Rule == nil { // no tool rule: the annotation class, if known, replaces tool_default
		if ad, ok := p.annotations.decide(host, tool, d.Scopes); ok {
			return ad
		}
	}
	return dec
}

// handshakeTools are the tools through which older MCP-I and KYA-OS agents
// run the handshake with an MCP-I-aware upstream. They are
// protocol, not capabilities: a verified caller may call them unless an
// exact rule names them (globs and tool_default do not apply).
var handshakeTools = []string{"_mcpi_handshake", "_kyaos_handshake", "_mcpi"}

// reasonHandshakeTool is the decision reason for a handshakeTools call.
const reasonHandshakeTool = "handshake_tool"

// Verdict is what Check decided of a request it lets through: how Wrap
// checks the answer, and the request's decision when Check changed it.
type Verdict struct {
	// check is nil when the answer goes back unchecked.
	check *responseCheck
	// learn: the request holds a tools/list whose answers teach
	// annotation classes before the filter decides on them.
	learn bool
	// Decision replaces the admission as the request's one decision: it
	// names the tools called and, after an approval at the edge's consent
	// page, the delegation approved. Nil: the admission as it came.
	Decision *observe.Decision
}

// Check applies the per-tool policy to an admitted request (d is nil
// for an anonymous one, adm is its admission); Wrap then applies the
// verdict to the answer. It returns a *refusal.Refusal (or an error of the
// carriers or framing) when the request goes no further; the refusal
// carries the request's decision. w is the writer the answer goes to: a
// body read here is limited through it, and the proof step marks on it an
// answer it signed.
//
// Methods are compared without regard to case, since a server may route
// "post" as POST. Every method but GET, HEAD, OPTIONS, DELETE, TRACE and
// CONNECT may carry JSON-RPC (PUT, PATCH and extension methods too): with a
// tool policy its body is read and policed like a POST's. See policeHTTP for
// what a tool policy refuses before that.
//
// Two kinds of request have their response wrapped: one holding JSON-RPC
// requests (when a tool policy exists, for tools/list filtering, or when
// handshake actions are checked: URL elicitations may answer any request),
// and every GET, whose SSE
// stream may carry results (replayed after Last-Event-ID, or sent by a
// server on its standalone stream) to requests the edge has not seen in
// this request. The stream is rewritten event by event, never buffered.
func (p *Policy) Check(w http.ResponseWriter, r *http.Request, d *vc.Delegation, rb *framing.Body, adm observe.Decision) (_ Verdict, err error) {
	body := rb.Raw()
	if p.pol == nil && p.actions == mcp.ActionsOff && p.limits == nil {
		return Verdict{}, nil
	}
	method := strings.ToUpper(r.Method)
	if p.pol != nil {
		if status, err := p.policeHTTP(r, method, body != nil); err != nil {
			return Verdict{}, bodyRefusal(status, mcp.CodeInvalidRequest, err, adm)
		}
	}
	if carrier.Bodyless(method) {
		if method != http.MethodGet || (p.pol == nil && p.actions == mcp.ActionsOff) {
			return Verdict{}, nil
		}
		c := p.newResponseCheck(r, d, nil, false, p.pol != nil, p.actions != mcp.ActionsOff)
		c.presented = p.anyPresentation && p.holderBound(r, d, adm)
		c.ruleIn = p.rulesInput(r, mcp.MethodToolsList, d, adm, c.presented)
		return Verdict{check: c}, nil
	}

	if body == nil {
		// A tool policy reads every body: a tools/call sent with another
		// content type must not slip past it. Handshake-action checks
		// alone look at JSON bodies only.
		if !carrier.HasBody(r) || (!p.ReadsBody() && !carrier.WantsBody(r)) {
			return Verdict{}, nil
		}
		if body, err = carrier.ReadBody(w, r, p.maxBody); err != nil {
			return Verdict{}, err
		}
		rb.Use(body)
	}
	read := rb.Messages
	if !p.ReadsBody() {
		read = rb.Lenient
	}
	msgs, batch, err := read()
	if err == nil && p.pol != nil {
		// A repeated id would leave the edge unable to tell which
		// answer is the tools/list one.
		err = mcp.CheckUniqueIDs(msgs)
	}
	if errors.Is(err, mcp.ErrAmbiguous) {
		// Whatever the edge decided, the upstream might read another
		// request: refused with or without a tool policy.
		return Verdict{}, framing.Ambiguous(err)
	}
	if errors.Is(err, mcp.ErrParse) {
		// Not JSON at all: the answer the carriers give such a body
		// (a JSON-RPC parse error), with or without a tool policy.
		return Verdict{}, carrier.ErrBodyNotJSON
	}
	if err != nil {
		if !p.ReadsBody() {
			return Verdict{}, nil // nothing to authorize; not JSON-RPC
		}
		// What the edge cannot read, it cannot authorize; an upstream
		// reading it differently could run a tool the policy denies.
		return Verdict{}, bodyRefusal(http.StatusBadRequest, mcp.ErrorCode(err), err, adm)
	}

	var hasList, hasCall, hasRequest bool
	for _, m := range msgs {
		hasList = hasList || m.Method == mcp.MethodToolsList
		hasCall = hasCall || m.Method == mcp.MethodToolsCall
		hasRequest = hasRequest || mcp.IsRequest(m)
	}
	presented := false
	if d != nil && p.anyPresentation && (hasCall || hasList) {
		presented = p.holderBound(r, d, adm)
	}

	if p.pol != nil && hasCall {
		var decisions []mcp.Decision
		var one [1]mcp.Decision // a single call's, without allocating
		denied := false
		for i, m := range msgs {
			if m.Method != mcp.MethodToolsCall {
				continue
			}
			if decisions == nil {
				decisions = one[:]
				if len(msgs) > 1 {
					decisions = make([]mcp.Decision, len(msgs))
				}
			}
			name, _ := mcp.ToolCallName(m)
			stateResume, err := p.checkRequestState(r, m, name, d)
			if err != nil {
				return Verdict{}, requestStateRefusal(m, err, adm)
			}
			if err := p.parts.Proofs.CheckResume(r, m, name, d, adm); err != nil {
				return Verdict{}, err
			}
			dec := p.decide(p.parts.Site.Host(r), name, d, presented)
			// A retry after the user approved at the edge's consent page
			// goes on with the delegation approved (agentconsent.go).
			if !batch {
				if nd, ok := p.consented(r, m, stateResume, d, dec); ok {
					d, dec = nd, p.decide(p.parts.Site.Host(r), name, nd, presented)
					adm.Delegation = nd
				}
			}
			if d == nil && dec.Allowed && (dec.Rule == nil || !dec.Rule.AllowAnonymous) {
				// Unreachable through admitAnonymous; kept so the rule
				// holds whatever admits an anonymous request.
				dec = mcp.Decision{Rule: dec.Rule, Reason: mcp.ReasonAnonymous}
			}
			in := p.rulesInput(r, mcp.MethodToolsCall, d, adm, presented)
			dec = p.askPDP(r.Context(), in, &m, name, p.applyRules(in, &m, name, dec))
			decisions[i] = dec
			denied = denied || !dec.Allowed
			p.logDecision(name, d, dec)
		}
		if denied {
			return Verdict{}, p.denied(w, r, msgs, batch, decisions, d, adm)
		}
	}
	if err := p.limitRate(r, d, msgs, batch, adm); err != nil {
		return Verdict{}, err
	}
	var v Verdict
	// The admission of a tools/call names its tool in the audit log.
	if hasCall {
		adm.Tool = toolCallNames(msgs)
		v.Decision = &adm
	}

	// Any answer may carry a tool list: servers that route answers by
	// request id (the TypeScript and Python SDKs) deliver a tools/list
	// answer on the stream of another request that reused its id. That
	// holds for the answer to a POST of notifications or responses alone
	// too: like a GET's, it is checked.
	filter := p.pol != nil
	// Any answer may carry a URL elicitation: MCP 2026 input-required results
	// answer prompts/get and resources/read too, and a 2025 server sends
	// elicitation/create on the stream of any request.
	actions := p.actions != mcp.ActionsOff
	if !filter && !actions {
		return v, nil
	}
	c := p.newResponseCheck(r, d, msgs, batch, filter, actions)
	c.presented = presented
	if p.rules != nil || p.pdp != nil {
		c.lazyRuleIn = func() *rules.Input { return p.rulesInput(r, mcp.MethodToolsList, d, adm, presented) }
	}
	c.sniff = !hasList
	// Learn the listed tools' annotation classes before the filter
	// decides on them (no-op unless tool_annotations_policy is set). Only
	// the answers to credentialed callers teach: the learned sites are
	// bounded, and an anonymous caller must not be able to spend that
	// bound (under made-up Host headers) to evict the sites others use.
	v.check, v.learn = c, filter && hasList && d != nil
	return v, nil
}

// Wrap returns w wrapped to check the answer to r as v says; w itself
// when nothing is checked. Finish ends what it wrapped.
func (p *Policy) Wrap(w http.ResponseWriter, r *http.Request, v Verdict) http.ResponseWriter {
	if v.check == nil {
		return w
	}
	w = v.check.wrap(w, r)
	if v.learn {
		return p.annotations.learnFrom(w, v.check.host, v.check.ids, p.maxResponseSize)
	}
	return w
}

// toolCallNames names the tools/call requests of msgs for an audit entry:
// the tool of a single call, the tools of a batch joined by commas, cut at
// observe.MaxAuditTool bytes (the names are the client's choice).
func toolCallNames(msgs []mcp.Message) string {
	var names string
	for _, m := range msgs {
		if m.Method != mcp.MethodToolsCall {
			continue
		}
		name, _ := mcp.ToolCallName(m)
		if names == "" {
			names = name
		} else {
			names += "," + name
		}
		if len(names) >= observe.MaxAuditTool {
			break
		}
	}
	return names
}

// holderBound reports whether d was presented holder-bound: in a VP signed by
// the agent, or over a Level 3 handshake session (the agent proved its key
// when the session was issued).
func (p *Policy) holderBound(r *http.Request, d *vc.Delegation, adm observe.Decision) bool {
	if d == nil {
		return false
	}
	if d.Presented || adm.Carrier == CarrierSession {
		// Admitted by its session: that session is the proof, and
		// looking it up again would cost another MAC or store round trip.
		return true
	}
	if p.parts.Sessions == nil {
		return false
	}
	s, err := p.parts.Sessions.Session(r)
	return err == nil && s != nil && s.Hash == d.Hash && s.AgentDID == d.AgentDID
}

// toolLabel is tool as a log or metric label: a name from the configured
// policy or from the upstream's tool list, else "other".
func (p *Policy) toolLabel(tool string) string {
	return mcp.LabelForTool(tool, func(n string) bool {
		return (p.pol != nil && p.pol.KnownTool(n)) || p.listed.has(n)
	})
}

// toolNames is a bounded set of tool names seen in upstream tool lists.
type toolNames struct {
	mu sync.RWMutex
	m  map[string]struct{}
}

func (t *toolNames) add(name string) {
	if t == nil || name == "" || len(name) > 64 || t.has(name) {
		return
	}
	t.mu.Lock()
	if len(t.m) < maxListedTools {
		t.m[name] = struct{}{}
	}
	t.mu.Unlock()
}

func (t *toolNames) has(name string) bool {
	if t == nil {
		return false
	}
	t.mu.RLock()
	_, ok := t.m[name]
	t.mu.RUnlock()
	return ok
}
