package authserver

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// A draft-kya-http-02 session id carries what the pickup endpoint must
// know without a record: when the session ends and which agent it was
// issued to (a keyed tag, for bounding that agent's pins), under a MAC.
// "kya-" and 64 lowercase hex digits: 8 random bytes, the expiry (4 bytes,
// Unix seconds), the agent tag (8) and the MAC (12), within the
// reference's ^kya-[0-9a-f]{16,64}$.

const (
	sidPrefix  = "kya-"
	sidRawLen  = 8 + 4 + 8 + 12
	sidTextLen = len(sidPrefix) + 2*sidRawLen
)

var errSIDMalformed = errors.New("not a session id this edge issued")

// kyaSession is a parsed session id.
type kyaSession struct {
	ID       string
	Expires  time.Time
	AgentTag string // hex, the owner of the session's pin
}

func (s *Server) agentTag(agentDID string) []byte {
	return mac(s.secrets.csrf, "kya agent tag", agentDID)[:8]
}

func (s *Server) sidMAC(raw []byte) []byte {
	return mac(s.secrets.csrf, "kya sid", string(raw[:20]))[:12]
}

// newSID makes a session id for agentDID ending at exp.
func (s *Server) newSID(agentDID string, exp time.Time) string {
	raw := make([]byte, 20, sidRawLen)
	_, _ = rand.Read(raw[:8])
	binary.BigEndian.PutUint32(raw[8:12], uint32(exp.Unix()))
	copy(raw[12:20], s.agentTag(agentDID))
	raw = append(raw, s.sidMAC(raw)...)
	return sidPrefix + hex.EncodeToString(raw)
}

// parseSID checks a session id this server issued (expired or not).
func (s *Server) parseSID(id string) (kyaSession, error) {
	enc, ok := strings.CutPrefix(id, sidPrefix)
	if !ok || len(id) != sidTextLen || strings.ToLower(enc) != enc {
		return kyaSession{}, errSIDMalformed
	}
	raw, err := hex.DecodeString(enc)
	if err != nil || len(raw) != sidRawLen || !hmac.Equal(raw[20:], s.sidMAC(raw)) {
		return kyaSession{}, errSIDMalformed
	}
	return kyaSession{
		ID:       id,
		Expires:  time.Unix(int64(binary.BigEndian.Uint32(raw[8:12])), 0),
		AgentTag: hex.EncodeToString(raw[12:20]),
	}, nil
}
