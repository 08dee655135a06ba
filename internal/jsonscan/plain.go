package jsonscan

import (
	"encoding/binary"
)

// Plain reports whether q, a string of a valid document with its quotes
// (as Cursor.String gives it), holds only printable ASCII and no escape,
// so that its value is its text: a reader that keeps the document as a
// string can take the value as a substring of it, without a copy.
func Plain(q []byte) bool { return len(q) >= 2 && asciiNoEscape(q[1:len(q)-1]) }

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
