package vc

import (
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// BenchmarkClaimsReaders: the structural reading of a KYA-OS VC-JWT's
// claims (every value checked, repeated member names refused at any
// depth), by this package's jsonScan and by internal/jsonscan, which the
// edge's other readers of untrusted JSON use. "decode" is what parseJWS
// does with them: the reading and the claims' types together.
//
// internal/jsonscan's walker reads the claims about three times as fast
// as jsonScan.skip, so jsonScan should skip through it. Done naively
// (the walker given jsonScan's name set) it made BenchmarkParseJWT a
// quarter slower: escape analysis does not tell the walker's fields
// apart, so the name set, and with it the scanner, moved to the heap on
// every decode. The walker must first take the name set apart from the
// slices that leak.
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
