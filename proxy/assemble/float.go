package assemble

import (
	"math"

	"github.com/orchard-rl/orchard/internal/jsonscan"
)

// Engines send a logprob for every sampled token, and vLLM prints each the
// way Python prints a float: the shortest decimal of the double that its
// float32 widens to, 16 or 17 digits (-0.009614944458007812,
// -1.1920928244535389e-07). strconv.ParseFloat reads those through its
// general reader, which cost several times the rest of a chunk's replay;
// the functions here read the JSON number grammar alone and answer only
// where they are sure to give strconv's bits, leaving the rest to it.

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// maxMantissa is the most significant digits decimal reads: 19 always fit
// a uint64.
const maxMantissa = 19

// decimal reads the JSON number b as m × 10^exp, negative when neg, where
// m holds the number's significant digits: those after its leading zeros
// (0.0065 is 65 × 10^-4). ok is false when b is not a JSON number, has more
// than maxMantissa significant digits, or an exponent of more than three
// digits.
func decimal(b []byte) (m uint64, exp int, neg, ok bool) {
	i := 0
	if len(b) > 0 && b[0] == '-' {
		i, neg = 1, true
	}
	nd := 0 // significant digits in m
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i]-'1' <= 8:
		if i, m, nd = mantissa(b, i, m, nd); nd > maxMantissa {
			return 0, 0, false, false
		}
	default:
		return 0, 0, false, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		frac := i
		for m == 0 && i < len(b) && b[i] == '0' {
			i++ // a leading zero of the fraction
		}
		if i, m, nd = mantissa(b, i, m, nd); nd > maxMantissa || i == frac {
			return 0, 0, false, false
		}
		exp = frac - i
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		e, ok := 0, false
		if i, e, ok = exponent(b, i+1); !ok {
			return 0, 0, false, false
		}
		exp += e
	}
	return m, exp, neg, i == len(b)
}

// mantissa appends the digits from b[i] on to m, eight at a time, counting
// them in nd, and returns where they end; it stops once nd passes
// maxMantissa, when m is no longer the digits' number.
func mantissa(b []byte, i int, m uint64, nd int) (int, uint64, int) {
	for i < len(b) && nd <= maxMantissa {
		k, v := jsonscan.DigitWord(b, i)
		m, nd, i = m*pow10u[k]+v, nd+k, i+k
		if k < 8 {
			break
		}
	}
	return i, m, nd
}

// pow10u are the powers of ten mantissa scales by.
var pow10u = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8}

// exponent reads the signed exponent of a number from b[i] on, up to three
// digits, and returns where it ends.
func exponent(b []byte, i int) (int, int, bool) {
	sign := 1
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		if b[i] == '-' {
			sign = -1
		}
		i++
	}
	e, digits := 0, i
	for ; i < len(b) && b[i]-'0' <= 9; i++ {
		if i-digits == 3 {
			return i, 0, false
		}
		e = e*10 + int(b[i]-'0')
	}
	return i, sign * e, i > digits
}

// exactFloat is strconv.ParseFloat(b, 64) for the short decimals some
// engines write (-0.125, -1.5e-05): when the significant digits make an
// integer below 2^53 and the power of ten is at most 22, both are exact
// float64s and one multiplication or division rounds the value correctly,
// as ParseFloat does. Anything else (or anything that is not a JSON number)
// reports false. FuzzExactFloat holds it to ParseFloat.
func exactFloat(b []byte) (float64, bool) {
	m, exp, neg, ok := decimal(b)
	if !ok {
		return 0, false
	}
	f, exact := scaled(m, exp)
	if !exact {
		return 0, false
	}
	if neg {
		f = -f
	}
	return f, true
}

// scaled returns m × 10^exp, correctly rounded when exact reports true;
// otherwise within four units in the last place of the exact value (at
// most four roundings), or 0 when exp is outside [-66, 22].
func scaled(m uint64, exp int) (f float64, exact bool) {
	if m == 0 {
		return 0, true
	}
	f = float64(m) // rounded once when m >= 2^53
	switch {
	case exp > 22 || exp < -66:
		return 0, false
	case exp >= 0:
		f *= pow10[exp]
	case exp >= -22:
		f /= pow10[-exp]
	case exp >= -44:
		return f / 1e22 / pow10[-exp-22], false
	default:
		return f / 1e22 / 1e22 / pow10[-exp-44], false
	}
	return f, m < 1<<53
}

// float32Of is float32(strconv.ParseFloat(b, 64)), the float32 an engine's
// logprob was, for a JSON number b, or false where it cannot be sure. Past
// exactFloat's digits and powers, m × 10^exp is computed in float64 with
// at most four roundings, so within four units in the last place of the
// decimal, as ParseFloat's double is within half of one; both then round to
// the same float32 unless a float32 rounding boundary (a double whose low
// 29 mantissa bits are 1<<28) lies between them, which it does not when
// the computed double's low bits are far from that. A float32 widened to
// a double has those bits zero. FuzzFloat32Of holds it to ParseFloat.
func float32Of(b []byte) (float32, bool) {
	m, exp, neg, ok := decimal(b)
	if !ok {
		return 0, false
	}
	f, exact := scaled(m, exp)
	if !exact {
		bits := math.Float64bits(f)
		// Normal float32s only: far from its subnormals and its overflow.
		if e := int(bits>>52) & 0x7ff; e < 1023-120 || e > 1023+120 {
			return 0, false
		}
		const half, margin = 1 << 28, 64
		if low := bits & (1<<29 - 1); low > half-margin && low < half+margin {
			return 0, false
		}
	}
	if neg {
		f = -f
	}
	return float32(f), true
}
