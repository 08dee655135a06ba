package vc

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// Status lists (W3C StatusList2021 and Bitstring Status List v1.0).
//
// A credentialStatus entry (an object, or an array of them) names a list
// credential by URL and a bit by index. For the purposes "revocation" and
// "suspension" (an entry without a purpose counts as revocation) the list
// is fetched over https through the SSRF guard, verified as a credential
// by this package (signature by a key in its issuer's assertionMethod,
// validity window), and must be the matching kind (StatusList2021Entry →
// StatusList2021Credential, BitstringStatusListEntry →
// BitstringStatusListCredential), state the entry's purpose, carry the
// URL as its id (when it has one) and be issued by the credential's own
// issuer or by an issuer trusted by name (WithTrustedIssuers; AnyIssuer
// does not count, or anyone able to serve a URL a credential names could
// answer for its issuer). Its encodedList is base64 or base64url (with or
// without padding, or multibase "u") of a gzip stream; bit i is bit
// 7-(i mod 8) of byte i/8 (most significant bit first), and 1 means
// revoked (or suspended, which is refused the same way while it lasts).
// Other purposes (refresh, message) do not affect validity and are not
// fetched; an unknown entry type with a validity purpose fails closed.
//
// Lists are cached per URL for the TTL, one fetch in flight per URL,
// bounded in count and bytes. A list that cannot be fetched or does not
// verify fails closed (ErrStatusUnavailable, ErrStatusList), unless a
// copy verified earlier is within the stale-if-error window. Failures are
// remembered briefly so an unreachable status server is not asked on
// every request.

const (
	statusTimeout      = 5 * time.Second
	maxStatusBody      = 1 << 20  // a fetched list credential
	maxStatusListBytes = 4 << 20  // a decoded list: 32 Mi entries
	maxStatusCacheSize = 32 << 20 // all decoded lists together
	maxStatusEntries   = 1024     // cached URLs
	maxStatusPerCred   = 8        // entries in one credentialStatus
	maxStatusURL       = 2048
	statusNegativeTTL  = 5 * time.Second
)

type listKind uint8

const (
	kindStatusList2021 listKind = iota + 1
	kindBitstring
)

// statusEntry is one credentialStatus entry.
type statusEntry struct {
	Type                 string          `json:"type"`
	StatusPurpose        string          `json:"statusPurpose"`
	StatusListIndex      json.RawMessage `json:"statusListIndex"`
	StatusListCredential string          `json:"statusListCredential"`
	StatusSize           json.RawMessage `json:"statusSize"`
}

// statusList is a verified, decoded list credential.
type statusList struct {
	kind                 listKind
	id, issuer           string
	purposes             stringList
	notBefore, expiresAt time.Time
	bits                 []byte
}

// statusLists is the statusChecker NewVerifier installs.
type statusLists struct {
	v            *Verifier // verifies list credentials; its clock and trust
	client       *http.Client
	setupErr     error // the client could not be guarded: fail closed
	ttl, stale   time.Duration
	negativeTTL  time.Duration
	mu           sync.Mutex
	entries      map[string]*listEntry
	cachedBytes  int
	maxEntries   int
	maxCacheSize int
}

// listEntry is the cache state of one URL.
type listEntry struct {
	list      *statusList // last list that verified, or nil
	fetchedAt time.Time
	err       error // last failure, remembered until errUntil
	errUntil  time.Time
	flight    *flight // the fetch in progress, or nil
	used      time.Time
}

type flight struct {
	done chan struct{}
	list *statusList
	err  error
}

func newStatusLists(v *Verifier, cfg statusConfig) *statusLists {
	s := &statusLists{
		v:            v,
		ttl:          cfg.ttl,
		stale:        cfg.staleIfError,
		negativeTTL:  min(cfg.ttl, statusNegativeTTL),
		entries:      map[string]*listEntry{},
		maxEntries:   maxStatusEntries,
		maxCacheSize: maxStatusCacheSize,
	}
	s.client, s.setupErr = didresolver.GuardedClient(cfg.client, cfg.allowPrivate, statusTimeout)
	return s
}

// check implements statusChecker.
func (s *statusLists) check(ctx context.Context, issuer string, status json.RawMessage) error {
	entries, err := parseStatusEntries(status)
	if err != nil {
		return err
	}
	for _, e := range entries {
		purpose := e.StatusPurpose
		if purpose == "" {
			purpose = "revocation"
		}
		if purpose != "revocation" && purpose != "suspension" {
			continue
		}
		var kind listKind
		switch e.Type {
		case "StatusList2021Entry":
			kind = kindStatusList2021
		case "BitstringStatusListEntry":
			kind = kindBitstring
		default:
			return fail(ErrStatusUnavailable, "credentialStatus type not supported")
		}
		index, listURL, err := e.target()
		if err != nil {
			return err
		}
		list, err := s.get(ctx, listURL)
		if err != nil {
			return err
		}
		if err := s.accept(list, kind, purpose, issuer, listURL); err != nil {
			return err
		}
		if index >= uint64(len(list.bits))*8 {
			return fail(ErrStatusList, "statusListIndex outside the list")
		}
		if list.bits[index/8]&(0x80>>(index%8)) != 0 {
			if purpose == "suspension" {
				return fail(ErrRevoked, "suspended")
			}
			return fail(ErrRevoked, "")
		}
	}
	return nil
}

// parseStatusEntries reads credentialStatus: one entry or an array.
func parseStatusEntries(raw json.RawMessage) ([]statusEntry, error) {
	raw = bytes.TrimSpace(raw)
	var entries []statusEntry
	if len(raw) > 0 && raw[0] == '[' {
		if err := json.Unmarshal(raw, &entries); err != nil {
			return nil, fail(ErrMalformed, "credentialStatus")
		}
	} else {
		var e statusEntry
		if err := unmarshalObject(raw, &e); err != nil {
			return nil, fail(ErrMalformed, "credentialStatus")
		}
		entries = []statusEntry{e}
	}
	if len(entries) > maxStatusPerCred {
		return nil, fail(ErrMalformed, "too many credentialStatus entries")
	}
	return entries, nil
}

// target returns the bit index and the list URL (https, without
// fragment) of a validity entry.
func (e *statusEntry) target() (uint64, string, error) {
	idx := bytes.TrimSpace(e.StatusListIndex)
	if len(idx) > 1 && idx[0] == '"' && idx[len(idx)-1] == '"' {
		idx = idx[1 : len(idx)-1] // the specs write it as a decimal string
	}
	index, err := strconv.ParseUint(string(idx), 10, 32)
	if err != nil {
		return 0, "", fail(ErrMalformed, "credentialStatus.statusListIndex")
	}
	if size := bytes.TrimSpace(e.StatusSize); len(size) > 0 && string(size) != "1" && !isNull(size) {
		// A validity purpose is one bit per credential (Bitstring §2.1).
		return 0, "", fail(ErrMalformed, "credentialStatus.statusSize")
	}
	if len(e.StatusListCredential) > maxStatusURL {
		return 0, "", fail(ErrMalformed, "credentialStatus.statusListCredential")
	}
	u, err := url.Parse(e.StatusListCredential)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Opaque != "" {
		return 0, "", fail(ErrMalformed, "credentialStatus.statusListCredential must be an https URL")
	}
	u.Fragment, u.RawFragment = "", ""
	return index, u.String(), nil
}

// accept checks that list answers for a credential of issuer.
func (s *statusLists) accept(list *statusList, kind listKind, purpose, issuer, listURL string) error {
	v := s.v
	switch {
	case list.kind != kind:
		return fail(ErrStatusList, "status list credential type does not match the entry")
	case !list.purposes.has(purpose):
		return fail(ErrStatusList, "status list purpose does not match the entry")
	case list.id != "" && list.id != listURL:
		return fail(ErrStatusList, "status list id is not its URL")
	case list.issuer != issuer && (v.trusted == nil || !v.trusts(list.issuer)):
		return fail(ErrStatusList, "status list issuer is not the credential's")
	}
	now := v.now()
	if !list.expiresAt.IsZero() && !now.Before(list.expiresAt.Add(v.skew)) {
		return fail(ErrStatusList, "status list expired")
	}
	if !list.notBefore.IsZero() && now.Add(v.skew).Before(list.notBefore) {
		return fail(ErrStatusList, "status list not yet valid")
	}
	return nil
}

// get returns the list at listURL from the cache, or fetches it.
func (s *statusLists) get(ctx context.Context, listURL string) (*statusList, error) {
	if s.setupErr != nil {
		return nil, &verifyError{kind: ErrStatusUnavailable, detail: "status list client cannot be guarded", cause: didresolver.ErrForbiddenAddress}
	}
	now := s.v.now()
	s.mu.Lock()
	e := s.entries[listURL]
	if e == nil {
		s.evict(s.maxEntries - 1)
		e = &listEntry{}
		s.entries[listURL] = e
	}
	e.used = now
	if s.fresh(e, now) {
		l := e.list
		s.mu.Unlock()
		return l, nil
	}
	if e.err != nil && now.Before(e.errUntil) {
		defer s.mu.Unlock()
		return s.staleOr(e, now)
	}
	f := e.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		e.flight = f
		// The fetch outlives a caller that gives up: others may wait for
		// it, and it is bounded by statusTimeout.
		go s.run(context.WithoutCancel(ctx), listURL, e, f)
	}
	s.mu.Unlock()

	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, &verifyError{kind: ErrStatusUnavailable, detail: "status list fetch aborted", cause: ctx.Err()}
	}
	if f.err == nil {
		return f.list, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.staleOr(e, s.v.now())
}

// fresh: a list is used for the TTL, and is fetched again once it expires
// (a newer one may be out), unless it had already expired when fetched:
// refetching that on every request would only load the status server, and
// accept refuses it anyway.
func (s *statusLists) fresh(e *listEntry, now time.Time) bool {
	if e.list == nil || !now.Before(e.fetchedAt.Add(s.ttl)) {
		return false
	}
	exp := e.list.expiresAt
	return exp.IsZero() || now.Before(exp) || !e.fetchedAt.Before(exp)
}

// staleOr returns the last good list if it is within the stale-if-error
// window, else the last error. s.mu is held.
func (s *statusLists) staleOr(e *listEntry, now time.Time) (*statusList, error) {
	if e.list != nil && s.stale > 0 && now.Before(e.fetchedAt.Add(s.ttl+s.stale)) {
		return e.list, nil
	}
	return nil, e.err
}

func (s *statusLists) run(ctx context.Context, listURL string, e *listEntry, f *flight) {
	list, err := s.fetch(ctx, listURL)
	now := s.v.now()
	s.mu.Lock()
	e.flight = nil
	if s.entries[listURL] == e { // not evicted meanwhile
		if err == nil {
			if e.list != nil {
				s.cachedBytes -= len(e.list.bits)
			}
			e.list, e.fetchedAt, e.err = list, now, nil
			s.cachedBytes += len(list.bits)
			for s.cachedBytes > s.maxCacheSize && s.evictOne(e) {
			}
		} else {
			e.err, e.errUntil = err, now.Add(s.negativeTTL)
		}
	}
	s.mu.Unlock()
	f.list, f.err = list, err
	close(f.done)
}

// evict makes room until at most n entries remain. s.mu is held.
func (s *statusLists) evict(n int) {
	for len(s.entries) > n && s.evictOne(nil) {
	}
}

// evictOne drops the least recently used entry other than keep that has
// no fetch in flight. s.mu is held.
func (s *statusLists) evictOne(keep *listEntry) bool {
	var (
		victim  string
		oldest  *listEntry
		evicted bool
	)
	for u, e := range s.entries {
		if e == keep || e.flight != nil {
			continue
		}
		if oldest == nil || e.used.Before(oldest.used) {
			victim, oldest = u, e
		}
	}
	if oldest != nil {
		if oldest.list != nil {
			s.cachedBytes -= len(oldest.list.bits)
		}
		delete(s.entries, victim)
		evicted = true
	}
	return evicted
}

// fetch gets and verifies the list credential at listURL.
func (s *statusLists) fetch(ctx context.Context, listURL string) (*statusList, error) {
	body, _, err := docFetch{
		client: s.client, timeout: statusTimeout, maxSize: maxStatusBody,
		accept: "application/vc+ld+json, application/vc+jwt, application/vc, application/json;q=0.9",
		kind:   ErrStatusUnavailable, what: "status list",
	}.get(ctx, listURL)
	if errors.Is(err, errFetchURL) {
		return nil, fail(ErrMalformed, "credentialStatus.statusListCredential")
	}
	if err != nil {
		return nil, err
	}
	return s.v.verifyStatusList(ctx, body)
}

// verifyStatusList verifies a status list credential (JSON or VC-JWT) with
// this package's own credential path and decodes its list. A list whose
// issuer cannot be resolved is unavailable; one that does not verify is
// invalid.
func (v *Verifier) verifyStatusList(ctx context.Context, raw []byte) (*statusList, error) {
	raw = trimSpace(raw)
	if len(raw) == 0 {
		return nil, fail(ErrStatusList, "empty status list")
	}
	sum := sha256.Sum256(raw)
	p, vp, err := parseAny(raw, &sum, v.ld)
	if err == nil && vp != nil {
		err = fail(ErrMalformed, "a presentation")
	}
	if err == nil {
		err = v.verifySignature(ctx, p)
	}
	if err != nil {
		if errors.Is(err, ErrIssuerUnresolved) {
			return nil, &verifyError{kind: ErrStatusUnavailable, detail: "status list issuer unresolved", cause: resolverSentinel(err)}
		}
		if errors.Is(err, ErrRepeatedMember) {
			return nil, &verifyError{kind: ErrStatusList, detail: "status list credential repeats a member name", cause: ErrRepeatedMember}
		}
		detail := "status list credential does not verify"
		if errors.Is(err, ErrSignature) {
			detail = "status list signature invalid"
		}
		return nil, fail(ErrStatusList, detail)
	}
	// Cloned: decoded strings of a VC-JWT share the bytes of its whole
	// claims, encodedList included, which the cached list must not keep.
	l := &statusList{
		id:        strings.Clone(p.d.ID),
		issuer:    strings.Clone(p.d.Issuer),
		notBefore: p.d.NotBefore,
		expiresAt: p.d.ExpiresAt,
	}
	subjectType := "StatusList2021"
	switch {
	case !p.types.has("VerifiableCredential"):
	case p.types.has("StatusList2021Credential"):
		l.kind = kindStatusList2021
	case p.types.has("BitstringStatusListCredential"):
		l.kind, subjectType = kindBitstring, "BitstringStatusList"
	}
	var st stringList
	if l.kind == 0 || json.Unmarshal(orNull(p.subject.Type), &st) != nil || (st != nil && !st.has(subjectType)) {
		return nil, fail(ErrStatusList, "not a status list credential")
	}
	var encoded string
	if json.Unmarshal(orNull(p.subject.StatusPurpose), &l.purposes) != nil ||
		json.Unmarshal(orNull(p.subject.EncodedList), &encoded) != nil {
		return nil, fail(ErrStatusList, "status list members")
	}
	if l.bits, err = decodeStatusList(encoded, maxStatusListBytes); err != nil {
		return nil, fail(ErrStatusList, "encodedList")
	}
	return l, nil
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// isStatusListCredential reports whether types name a status list
// credential.
func isStatusListCredential(types stringList) bool {
	return types.has("StatusList2021Credential") || types.has("BitstringStatusListCredential")
}

// decodeStatusList decodes an encodedList: optional multibase "u", then
// base64url or base64, padded or not (StatusList2021 drafts differ; a gzip
// stream in base64 starts with "H4sI", so a leading "u" is never data),
// then gzip, inflating at most max bytes (a list is attacker-sized input).
func decodeStatusList(encoded string, max int) ([]byte, error) {
	s := strings.TrimPrefix(encoded, "u")
	if s == "" {
		return nil, errors.New("empty encodedList")
	}
	var (
		gz  []byte
		err error
	)
	for _, enc := range [...]*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.StdEncoding} {
		if gz, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("encodedList is not base64")
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	bits, err := io.ReadAll(io.LimitReader(zr, int64(max)+1))
	switch {
	case err != nil:
		return nil, err
	case len(bits) > max:
		return nil, errors.New("status list too large")
	case len(bits) == 0:
		return nil, errors.New("empty status list")
	}
	return bits, nil
}

var _ statusChecker = (*statusLists)(nil)
