package analysis

// Word segmentation of pure-ASCII text, equal to what UAX #29 (uniseg)
// gives for it, restricted to the words Standard keeps (those holding a
// letter or a digit). TestASCIIWordsMatchUniseg holds the two together.
//
// For ASCII the word-break rules that join characters are: letters, digits
// and "_" join each other (WB5, WB8–WB10, WB13a/b); a letter, then ":" "."
// or "'", then a letter joins across (WB6/7); a digit, then "," ";" "." or
// "'", then a digit joins across (WB11/12). Everything else breaks.

const (
	cOther = iota
	cLetter
	cDigit
	cUnder     // ExtendNumLet
	cMidLetter // ':' MidLetter
	cMidNumLet // '.' MidNumLet, '\'' Single_Quote
	cMidNum    // ',' ';' MidNum
)

var asciiClass = func() (t [128]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = cLetter, cLetter
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = cDigit
	}
	t['_'], t[':'], t['.'], t['\''], t[','], t[';'] = cUnder, cMidLetter, cMidNumLet, cMidNumLet, cMidNum, cMidNum
	return
}()

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// asciiWords calls fn with each word of ASCII text s that holds a letter or
// a digit, in order.
func asciiWords(s string, fn func(string)) {
	class := func(i int) uint8 {
		if i < len(s) {
			return asciiClass[s[i]]
		}
		return cOther
	}
	for i := 0; i < len(s); {
		c := class(i)
		if c != cLetter && c != cDigit && c != cUnder {
			i++
			continue
		}
		start, alnum := i, c != cUnder
		prev := c
		i++
		for i < len(s) {
			c := class(i)
			switch {
			case c == cLetter || c == cDigit || c == cUnder:
				alnum = alnum || c != cUnder
				prev = c
				i++
				continue
			case prev == cLetter && (c == cMidLetter || c == cMidNumLet) && class(i+1) == cLetter:
				prev = cLetter
				i += 2
				continue
			case prev == cDigit && (c == cMidNum || c == cMidNumLet) && class(i+1) == cDigit:
				prev = cDigit
				i += 2
				continue
			}
			break
		}
		if alnum {
			fn(s[start:i])
		}
	}
}
