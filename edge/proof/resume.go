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

// The resumeToken of a signed needs_authorization challenge (KYA-OS §5).
// The sources name no carrier for it on the retry (open question 6); the
// project's (docs/configuration.md §3.9): the retry carries it in
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

// Reasons a retry's resumeToken is refused (snake_case, §9.6).
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

// IssueResume records a new resumeToken for agentDID ("" for an anonymous
// caller: then any agent may redeem it) calling tool, and returns it with
// its end.
func (g *Gate) IssueResume(ctx context.Context, agentDID, tool string, now time.Time) (string, time.Time, error) {
	if g == nil || g.store == nil {
		return "", time.Time{}, ErrNoResumeStore
	}
	token := ResumePrefix + kyaos.NewResumeToken()
	exp := now.Add(ResumeTTL)
	// Kept past its end (like Level 3 challenges) so that a late retry is
	// told "expired", not "unknown".
	err := g.store.Put(ctx, resumeKey(token), challenge.Record{
		Challenge: resumeRecordPrefix + tool, AgentDID: agentDID, IssuedAt: now, ExpiresAt: exp,
	}, ResumeTTL+time.Minute)
	if err != nil {
		return "", time.Time{}, err
	}
	return token, exp, nil
}

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
// consumes it. The refusal says why: unknown (never issued here, or long
// gone), replayed (already redeemed), foreign (issued to another agent or
// for another tool; the token is left for its owner), expired.
func (g *Gate) RedeemResume(ctx context.Context, token, agentDID, tool string, now time.Time) *Refusal {
	if g == nil || g.store == nil {
		return resumeRefusal(http.StatusServiceUnavailable, "nonce_store_unavailable")
	}
	key := resumeKey(token)
	// Check before consuming when the store can: a foreign caller must not
	// burn a token it cannot use.
	if p, ok := g.store.(challenge.Peeker); ok {
		rec, err := p.Peek(ctx, key)
		if !errors.Is(err, errors.ErrUnsupported) {
			if rf := g.resumeLookup(ctx, key, rec, err); rf != nil {
				return rf
			}
			if rf := checkResume(rec, agentDID, tool, now); rf != nil {
				return rf
			}
		}
	}
	rec, err := g.store.Consume(ctx, key)
	if rf := g.resumeLookup(ctx, key, rec, err); rf != nil {
		return rf // lost a race with another retry: replayed
	}
	if rf := checkResume(rec, agentDID, tool, now); rf != nil {
		return rf
	}
	// Remember the redemption for as long as the token lived, so that a
	// second one is told "replayed".
	_ = g.store.Put(ctx, key+":used", challenge.Record{Challenge: "kyaos-resume-used", IssuedAt: now, ExpiresAt: rec.ExpiresAt}, ResumeTTL+time.Minute)
	return nil
}

// resumeLookup maps a failed lookup of key to its refusal (nil: found).
func (g *Gate) resumeLookup(ctx context.Context, key string, _ challenge.Record, err error) *Refusal {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, challenge.ErrNonceNotFound):
		if p, ok := g.store.(challenge.Peeker); ok {
			if _, uerr := p.Peek(ctx, key+":used"); uerr == nil {
				return resumeRefusal(http.StatusForbidden, ResumeReplayed)
			}
		}
		return resumeRefusal(http.StatusForbidden, ResumeUnknown)
	default:
		return resumeRefusal(http.StatusServiceUnavailable, "nonce_store_unavailable")
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
// domain code and data.reason, as a refused proof (§9.6).
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
