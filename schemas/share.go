package schemas

import (
	"math"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// A share of a card (a vGPU instance, a HAMi allocation, a time-sliced
// replica) is reported with a profile that states its size, so that a SKU
// priced by share (share_of) can price it and the data-quality check can add
// up the shares held on one card (docs/billing.md, rule 11):
//
//   - "1/N": one N-th of the card on every basis (memory and compute), for N
//     whose only prime factors are 2 and 5 (1/2, 1/4, 1/5, 1/8, 1/10, 1/16,
//     1/20, …), so that the share is a finite decimal;
//   - "mem=P%", "cores=P%" or "mem=P%,cores=Q%": the share of the card's
//     memory and/or compute in percent, at most two decimals, in (0, 100].
//
// A vGPU instance's profile is its vGPU type ("A16-1Q"), which is not a share
// profile: a fixed SKU prices it.

// ShareBasis is what a SKU priced by share (share_of) measures a share by.
type ShareBasis string

// Share bases.
const (
	ShareByMemory ShareBasis = "memory"
	ShareByCores  ShareBasis = "cores"
	ShareByMax    ShareBasis = "max" // the larger of the two where both are known
)

// ShareBases lists the bases a catalog accepts, in the order the docs give them.
var ShareBases = []ShareBasis{ShareByMemory, ShareByCores, ShareByMax}

// Share is the size of a share of a card as its profile states it: exact
// fractions of the card's memory and compute; a zero fraction is unknown.
type Share struct {
	Mem, Cores decimal.Decimal
}

// maxShareDenominator bounds N in "1/N".
const maxShareDenominator = 10_000

// ParseShareProfile reads a share profile (see above). It reports false for
// any other profile (a MIG profile, "full", a vGPU type).
func ParseShareProfile(p string) (Share, bool) {
	if rest, ok := strings.CutPrefix(p, "1/"); ok {
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || n < 2 || n > maxShareDenominator || strconv.FormatInt(n, 10) != rest {
			return Share{}, false
		}
		f, ok := finiteReciprocal(n)
		if !ok {
			return Share{}, false
		}
		return Share{Mem: f, Cores: f}, true
	}
	var s Share
	parts := strings.Split(p, ",")
	if len(parts) > 2 {
		return Share{}, false
	}
	for i, part := range parts {
		name, pct, ok := strings.Cut(part, "=")
		if !ok {
			return Share{}, false
		}
		f, ok := parsePercent(pct)
		if !ok {
			return Share{}, false
		}
		switch {
		case name == "mem" && i == 0:
			s.Mem = f
		case name == "cores" && s.Cores.IsZero():
			s.Cores = f
		default:
			return Share{}, false
		}
	}
	return s, true
}

// finiteReciprocal is 1/n as an exact decimal, when n's prime factors are 2
// and 5 only.
func finiteReciprocal(n int64) (decimal.Decimal, bool) {
	if n < 1 {
		return decimal.Decimal{}, false
	}
	m := n
	twos, fives := 0, 0
	for m%2 == 0 {
		m /= 2
		twos++
	}
	for m%5 == 0 {
		m /= 5
		fives++
	}
	if m != 1 {
		return decimal.Decimal{}, false
	}
	k := max(twos, fives)
	pow := int64(1)
	for range k {
		pow *= 10
	}
	return decimal.New(pow/n, -int32(k)), true
}

// parsePercent reads "P%" with at most two decimals, 0 < P <= 100, as the
// fraction P/100.
func parsePercent(s string) (decimal.Decimal, bool) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok || num == "" || strings.HasPrefix(num, "+") || strings.HasPrefix(num, "-") {
		return decimal.Decimal{}, false
	}
	if i := strings.IndexByte(num, '.'); i >= 0 && (len(num)-i-1 > 2 || len(num)-i-1 == 0 || i == 0) {
		return decimal.Decimal{}, false
	}
	d, err := decimal.NewFromString(num)
	if err != nil || !d.IsPositive() || d.GreaterThan(decimal.NewFromInt(100)) || d.String() != num {
		return decimal.Decimal{}, false
	}
	return d.Shift(-2), true
}

// By is the share's fraction on basis b, and whether the profile states it.
func (s Share) By(b ShareBasis) (decimal.Decimal, bool) {
	switch b {
	case ShareByMemory:
		return s.Mem, !s.Mem.IsZero()
	case ShareByCores:
		return s.Cores, !s.Cores.IsZero()
	case ShareByMax:
		switch {
		case s.Mem.IsZero() && s.Cores.IsZero():
			return decimal.Decimal{}, false
		case s.Mem.GreaterThan(s.Cores):
			return s.Mem, true
		default:
			return s.Cores, true
		}
	}
	return decimal.Decimal{}, false
}

// ShareProfile is the profile a collector writes for a share of mem and
// cores (fractions of the card in (0, 1], 0 when unknown): "1/N" when every
// known fraction is 1/N for an N ParseShareProfile accepts, else the
// percentages rounded to two decimals ("mem=7.5%,cores=30%"), else "share"
// when neither is known.
func ShareProfile(mem, cores float64) string {
	if n, ok := commonReciprocal(mem, cores); ok {
		return "1/" + strconv.FormatInt(n, 10)
	}
	var parts []string
	if mem > 0 {
		parts = append(parts, "mem="+percent(mem))
	}
	if cores > 0 {
		parts = append(parts, "cores="+percent(cores))
	}
	if len(parts) == 0 {
		return "share"
	}
	return strings.Join(parts, ",")
}

// commonReciprocal finds N with every non-zero fraction equal to 1/N.
func commonReciprocal(fs ...float64) (int64, bool) {
	var n int64
	for _, f := range fs {
		if f <= 0 {
			continue
		}
		r := math.Round(1 / f)
		if r < 2 || r > maxShareDenominator || math.Abs(f*r-1) > 1e-9 || (n != 0 && int64(r) != n) {
			return 0, false
		}
		n = int64(r)
	}
	if n == 0 {
		return 0, false
	}
	if _, ok := finiteReciprocal(n); !ok {
		return 0, false
	}
	return n, true
}

// percent renders a fraction in (0, 1] as a percentage with at most two
// decimals, at least 0.01%.
func percent(f float64) string {
	p := max(math.Round(min(f, 1)*10_000), 1)
	return decimal.New(int64(p), -2).String() + "%"
}
