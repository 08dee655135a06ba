package proof

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/mcp/extension"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// The resumeToken of a signed needs_authorization challenge (docs/protocol/kyaos.md#resume-tokens).
// The sources name no carrier for it on the retry; the edge's choice:
// the retry carries it in
// params._meta["org.kya-os/resume-token"], next to its request proof.
// _meta is the one part of a proof-bearing request an intermediary may
// read and leave as it is, and the edge's own member there cannot be
// confused with an argument of the tool.
//
// A token is recorded in the route's nonce store (memory, or Redis shared
// by replicas) when issued, bound to the agent and the tool, and consumed
// on the retry: single use, for ResumeTTL. It grants nothing: the retry
// goes through every check (credential, proof, scope) as any call; the
// token only lets the edge refuse, with a clear reason, a retry that
// replays, forges or borrows one.

// ResumePrefix starts every token the edge issues. A token without it is
// not the edge's (an upstream's own challenge issued it) and passes on
// unchecked, as the upstream's requestStates do.
const ResumePrefix = "mcpi-rt-"

// IsEdgeResume reports whether token claims to be the edge's.
func IsEdgeResume(token string) bool { return strings.HasPrefix(token, ResumePrefix) }

// ResumeTokenKey is where the retry carries the token.
const ResumeTokenKey = "org.kya-os/resume-token"

// ResumeTTL is how long a resumeToken can be redeemed (the reference's
// expiresAt: now + 300 s).
const ResumeTTL = 5 * time.Minute

// maxResumeToken bounds what the edge looks up: its own tokens are 36
// characters.
const maxResumeToken = 128

// Reasons a retry's resumeToken is refused (snake_case, docs/protocol/kyaos.md#resume-tokens).
const (
	ResumeMalformed = "resume_token_malformed"
	ResumeUnknown   = "resume_token_unknown"
	ResumeReplayed  = "resume_token_replayed"
	ResumeForeign   = "resume_token_foreign"
	ResumeExpired   = "resume_token_expired"
)

// resumeRecord is the Challenge of a token's record: the tool it resumes.
const resumeRecordPrefix = "kyaos-resume:"

// ErrNoResumeStore: the gate has no nonce store to keep tokens in.
var ErrNoResumeStore = errors.New("mcpi: no nonce store for resume tokens")

// IssueResume records a new resumeToken for agentDID calling tool, and
// returns it with its end. The record counts against owner (the user who
// delegated), who holds at most maxResumePerOwner live tokens: one caller
// that keeps calling tools it lacks scopes for pushes out only its own.
func (g *Gate) IssueResume(ctx context.Context, owner, agentDID, tool string, now time.Time) (string, time.Time, error) {
	if g == nil || g.sessions == nil || owner == "" {
		return "", time.Time{}, ErrNoResumeStore
	}
	token := ResumePrefix + kyaos.NewResumeToken()
	exp := now.Add(ResumeTTL)
	rec, err := json.Marshal(challenge.Record{Challenge: resumeRecordPrefix + tool, AgentDID: agentDID, IssuedAt: now, ExpiresAt: exp})
	if err != nil {
		return "", time.Time{}, err
	}
	// Kept past its end (like Level 3 challenges) so that a late retry is
	// told "expired", not "unknown".
	if err := g.sessions.BindOwned(ctx, challenge.KindResume, owner, resumeKey(token), rec, ResumeTTL+time.Minute, maxResumePerOwner); err != nil {
		return "", time.Time{}, err
	}
	return token, exp, nil
}

// maxResumePerOwner bounds the live resumeTokens of one owner.
const maxResumePerOwner = 32

// ResumeToken returns the resumeToken a tools/call's params carry, and
// whether they carry one; a malformed one (not a string, repeated or
// case-folded names on the way) is an error.
func ResumeToken(params []byte) (string, bool, error) {
	meta := jsonscan.Member(params, "_meta")
	if meta == nil {
		return "", false, nil
	}
	if jsonscan.CheckMembers(meta) != nil {
		return "", false, errResumeMalformed
	}
	v := jsonscan.Member(meta, ResumeTokenKey)
	if v == nil {
		return "", false, nil
	}
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil || s == "" || len(s) > maxResumeToken {
		return "", false, errResumeMalformed
	}
	return s, true, nil
}

var errResumeMalformed = errors.New(ResumeMalformed)

// RedeemResume checks the resumeToken of a retry by agentDID of tool and
// consumes it; owner is the retry's user, whom the "used" mark counts
// against. The refusal says why: unknown (never issued here, or long
// gone), replayed (already redeemed), foreign (issued to another agent or
// for another tool; the token is left for its owner), expired.
func (g *Gate) RedeemResume(ctx context.Context, token, owner, agentDID, tool string, now time.Time) *Refusal {
	if g == nil || g.sessions == nil {
		return resumeRefusal(http.StatusServiceUnavailable, "nonce_store_unavailable")
	}
	key := resumeKey(token)
	// Check before consuming: a foreign caller must not burn a token it
	// cannot use.
	rec, rf := g.resumeLookup(ctx, key, g.sessions.Lookup)
	if rf != nil {
		return rf
	}
	if rf := checkResume(rec, agentDID, tool, now); rf != nil {
		return rf
	}
	if rec, rf = g.resumeLookup(ctx, key, g.sessions.Take); rf != nil {
		return rf // lost a race with another retry: replayed
	}
	if rf := checkResume(rec, agentDID, tool, now); rf != nil {
		return rf
	}
	// Remember the redemption for as long as the token lived, so that a
	// second one is told "replayed".
	if owner != "" {
		_ = g.sessions.BindOwned(ctx, challenge.KindResume, owner, key+":used", []byte{1}, ResumeTTL+time.Minute, maxResumePerOwner)
	}
	return nil
}

// resumeLookup reads the record under key with get (Lookup, or Take to
// consume it), mapping a failure to its refusal.
func (g *Gate) resumeLookup(ctx context.Context, key string, get func(context.Context, string) ([]byte, error)) (challenge.Record, *Refusal) {
	val, err := get(ctx, key)
	switch {
	case err == nil:
		var rec challenge.Record
		if json.Unmarshal(val, &rec) != nil {
			return rec, resumeRefusal(http.StatusForbidden, ResumeUnknown)
		}
		return rec, nil
	case errors.Is(err, challenge.ErrBindingNotFound):
		if _, uerr := g.sessions.Lookup(ctx, key+":used"); uerr == nil {
			return challenge.Record{}, resumeRefusal(http.StatusForbidden, ResumeReplayed)
		}
		return challenge.Record{}, resumeRefusal(http.StatusForbidden, ResumeUnknown)
	default:
		return challenge.Record{}, resumeRefusal(http.StatusServiceUnavailable, "nonce_store_unavailable")
	}
}

func checkResume(rec challenge.Record, agentDID, tool string, now time.Time) *Refusal {
	if rec.Challenge != resumeRecordPrefix+tool || (rec.AgentDID != "" && rec.AgentDID != agentDID) {
		return resumeRefusal(http.StatusForbidden, ResumeForeign)
	}
	if !now.Before(rec.ExpiresAt) {
		return resumeRefusal(http.StatusForbidden, ResumeExpired)
	}
	return nil
}

// ResumeMalformedRefusal answers a retry whose token could not be read.
func ResumeMalformedRefusal() *Refusal { return resumeRefusal(http.StatusBadRequest, ResumeMalformed) }

// resumeRefusal is a refused resumeToken: the JSON-RPC error has the
// domain code and data.reason, as a refused proof (docs/protocol/kyaos.md#refusals).
func resumeRefusal(status int, reason string) *Refusal {
	return &Refusal{Status: status, Reason: reason, Tag: reason, RPC: &extension.RPCError{
		Code:    CodeProof,
		Message: fmt.Sprintf("resumeToken refused: %s", reason),
		Data:    map[string]any{"reason": reason},
	}}
}

// resumeKey is a token's key in the store: a hash, never the token (whoever
// lists the store's keys must not learn live tokens).
func resumeKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "kyaos-resume:" + hex.EncodeToString(sum[:])
}
