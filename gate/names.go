package gate

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The longest names the gate takes, checked where a title or an id is first parsed,
// before anything is claimed: a name is stored with every key and event, so an
// unbounded one would grow the store without limit.
const (
	// MaxTitle is the longest visible title, in characters: longer than any title a
	// chat app's window shows.
	MaxTitle = 256
	// MaxProviderID is the longest destination id after its namespace, in bytes: a
	// bare JID's two parts of at most 1023 bytes and the @ (RFC 7622); a Matrix id is
	// at most 255.
	MaxProviderID = 2047
	// QuotePrefix is how many characters of a long value an error shows.
	QuotePrefix = 40
)

// Quote is s as an error message shows a value it refuses: quoted, and when longer than
// QuotePrefix characters only its first QuotePrefix and its length, so that a message
// never echoes an oversized value whole.
func Quote(s string) string { return quoteN(s, QuotePrefix) }

// quoteKey is a key as an error shows it: whole when of a usual length (a key is its
// identity and 64 hex digits), else its prefix as Quote shows one.
func quoteKey(s string) string { return quoteN(s, 120) }

func quoteN(s string, prefix int) string {
	n := utf8.RuneCountInString(s)
	if n <= prefix {
		return strconv.Quote(s)
	}
	cut := 0
	for i := 0; i < prefix; i++ {
		_, size := utf8.DecodeRuneInString(s[cut:])
		cut += size
	}
	return fmt.Sprintf("%s… (%d characters)", strconv.Quote(s[:cut]), n)
}

// checkLength refuses a name longer than max (counted by count), naming what it is,
// the limit, and only a prefix of the value.
func checkLength(what, s string, max int, unit string, count func(string) int) error {
	if n := count(s); n > max {
		return fmt.Errorf("%w: %s %s is %d %s long; at most %d are allowed", ErrInvalid, what, Quote(s), n, unit, max)
	}
	return nil
}
