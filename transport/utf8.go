package transport

import "unicode/utf8"

// RepairUTF8 returns b with every ill-formed UTF-8 sequence replaced by
// U+FFFD the way the WHATWG Encoding Standard's UTF-8 decoder does, which
// is how Node.js (and so the MCP SDK under OpenClaw) decodes a message: one
// U+FFFD per maximal subpart of an ill-formed sequence (a lone continuation
// byte, a truncated sequence, an overlong or surrogate start each count
// apart). Well-formed input is returned as is, without a copy. Every
// surface repairs what a client sends at its boundary, before any policy,
// so that the policy, the audit log and the upstream server see one value.
func RepairUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c == 0xED:
			need, hi = 2, 0x9F
		case c >= 0xE1 && c <= 0xEF:
			need = 2
		case c == 0xF0:
			need, lo = 3, 0x90
		case c == 0xF4:
			need, hi = 3, 0x8F
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		default:
			out = utf8.AppendRune(out, utf8.RuneError)
			i++
			continue
		}
		j := i + 1
		for k := 0; k < need; k++ {
			if j >= len(b) || b[j] < lo || b[j] > hi {
				break
			}
			lo, hi = 0x80, 0xBF
			j++
		}
		if j-i == need+1 {
			out = append(out, b[i:j]...)
		} else {
			// The maximal subpart b[i:j] becomes one U+FFFD; the byte that
			// broke it starts over.
			out = utf8.AppendRune(out, utf8.RuneError)
		}
		i = j
	}
	return out
}
