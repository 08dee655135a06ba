package vc

import (
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// BenchmarkClaimsReaders: the structural reading of a KYA-OS VC-JWT's
// claims (every value checked, repeated member names refused at any
// depth), by jsonScan (which reads through internal/jsonscan's Cursor,
// with its own name set) and by internal/jsonscan alone. "decode" is what
// parseJWS does with them: the reading and the claims' types together.
//
// jsonScan.skip must cost what CheckMembers costs, without allocating:
// its name set is handed to the cursor per call. Kept in the cursor's
// walker instead, it moved to the heap with the walker's slices, and the
// scanner with it, on every decode (BenchmarkParseJWT a quarter slower).
func BenchmarkClaimsReaders(b *testing.B) {
	f := newFixture(b)
	claims := mustJSON(b, f.vc11Claims(f.ed))
	b.Run("vc-jsonScan-skip", func(b *testing.B) {
		b.SetBytes(int64(len(claims)))
		b.ReportAllocs()
		for b.Loop() {
			s := newJSONScan(claims)
			if _, err := s.skip(); err != nil || s.end() != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("jsonscan-CheckMembers", func(b *testing.B) {
		b.SetBytes(int64(len(claims)))
		b.ReportAllocs()
		for b.Loop() {
			if jsonscan.CheckMembers(claims) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("jsonscan-Cursor-Skip", func(b *testing.B) {
		b.SetBytes(int64(len(claims)))
		b.ReportAllocs()
		for b.Loop() {
			c := jsonscan.NewCursor(claims)
			c.Skip()
			if !c.Done() {
				b.Fatal("refused")
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(claims)))
		b.ReportAllocs()
		for b.Loop() {
			var jp jwtPayload
			s := newJSONScan(claims)
			if s.jwtPayload(&jp) != nil {
				b.Fatal("refused")
			}
			releaseRoom(&parsed{room: s.claims})
		}
	})
}
