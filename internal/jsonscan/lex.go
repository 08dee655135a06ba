package jsonscan

import (
	"encoding/binary"
)

// The lexing of single tokens, for readers that walk a document their own
// way (vc's claims decoder) but must accept exactly what Walk accepts.

// ScanString reads the string that starts at b[i] ('"') and returns the
// offset just past its closing quote. plain reports that it holds only
// printable ASCII and no escape, so that its value is its text; ok is
// false when b[i:] does not start with a valid string.
func ScanString(b []byte, i int) (end int, plain, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false, false
	}
	w := walker{b: b, i: i}
	if !w.str() {
		return i, false, false
	}
	return w.i, asciiNoEscape(b[i+1 : w.i-1]), true
}

// asciiNoEscape reports whether s, the inside of a valid string, holds no
// backslash and no byte of 0x80 or above (control characters a valid
// string cannot hold).
func asciiNoEscape(s []byte) bool {
	const highs, ones = 0x8080808080808080, 0x0101010101010101
	i := 0
	for ; i+8 <= len(s); i += 8 {
		v := binary.LittleEndian.Uint64(s[i:])
		// A backslash byte becomes 0 under the xor; subtracting one then
		// borrows into its high bit, as in special.
		if v&highs != 0 || ((v^ones*'\\')-ones)&^v&highs != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= 0x80 || s[i] == '\\' {
			return false
		}
	}
	return true
}

// ScanNumber reads the number that starts at b[i] and returns the offset
// just past it; ok is false when b[i:] does not start with a number.
func ScanNumber(b []byte, i int) (end int, ok bool) {
	w := walker{b: b, i: i}
	if !w.number() {
		return i, false
	}
	return w.i, true
}
