package config

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// jsDigits formats a finite f as JavaScript's Number::toString does:
// shortest round-trip digits, plain notation from 1e-6 up to below 1e21,
// exponent form ("1e-7", "1.5e+21") outside, and "0" for -0.
func jsDigits(f float64) string {
	if f == 0 {
		return "0"
	}
	neg := f < 0
	if neg {
		f = -f
	}
	// Shortest digits and decimal exponent: f = 0.d1d2…dk × 10^n.
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	n := exp + 1
	k := len(digits)
	var s string
	switch {
	case k <= n && n <= 21:
		s = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		s = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		s = "0." + strings.Repeat("0", -n) + digits
	default:
		sign := "+"
		ex := n - 1
		if ex < 0 {
			sign, ex = "-", -ex
		}
		if k == 1 {
			s = digits + "e" + sign + strconv.Itoa(ex)
		} else {
			s = digits[:1] + "." + digits[1:] + "e" + sign + strconv.Itoa(ex)
		}
	}
	if neg {
		return "-" + s
	}
	return s
}

// FormatNumber formats f as JSON.stringify does: the digits of
// JavaScript's Number::toString ("0.000001", "1e-7", "1e+21", "0" for -0),
// and NaN and ±Infinity as "null".
func FormatNumber(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	return jsDigits(f)
}

// NumberString formats f as JavaScript's String(f) does: the digits of
// [FormatNumber] for finite numbers, and "NaN", "Infinity" and "-Infinity".
func NumberString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return jsDigits(f)
}

// EnvValueString converts an env or header value of an mcp.servers entry
// the way OpenClaw does, with JavaScript's String(): a string as is, a
// number (float64, float32, a Go integer or a json.Number) as
// [NumberString] prints it, a boolean as "true" or "false". ok is false for
// any other type (OpenClaw drops such values).
func EnvValueString(v any) (s string, ok bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return NumberString(x), true
	case float32:
		return NumberString(float64(x)), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case json.Number:
		return x.String(), true
	}
	return "", false
}
