// Package span has byte-span helpers shared by extraction and chunking.
package span

// IsSpace reports whether c is ASCII white space.
func IsSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// Trim shrinks [start, end) of text past leading and trailing ASCII white
// space and returns the new bounds (equal when nothing is left).
func Trim(text string, start, end int) (int, int) {
	for start < end && IsSpace(text[start]) {
		start++
	}
	for end > start && IsSpace(text[end-1]) {
		end--
	}
	return start, end
}
