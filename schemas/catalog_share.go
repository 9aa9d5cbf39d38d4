package schemas

import (
	"strings"
	"sync"

	"github.com/shopspring/decimal"
	"gopkg.in/yaml.v3"
)

// shareSKUs are a catalog's SKUs priced by share: at most one per GPU model,
// and the SKUs derived from them for the share profiles seen so far (a
// catalog is shared by goroutines, so the derived ones are kept under a lock).
type shareSKUs struct {
	byModel map[string]int // GPU model → index in Catalog.SKUs

	mu      sync.Mutex
	derived map[string]*SKU // derived id → SKU
}

func newShareSKUs() *shareSKUs {
	return &shareSKUs{byModel: map[string]int{}, derived: map[string]*SKU{}}
}

// DerivedSKUID is the id of the SKU that share SKU id derives for profile:
// "a100-share[1/20]". Catalog ids cannot hold brackets, so it names no SKU
// of the catalog.
func DerivedSKUID(id, profile string) string { return id + "[" + profile + "]" }

// derivedFor is the SKU derived for (model, profile) from the model's SKU
// priced by share.
func (c *Catalog) derivedFor(model, profile string) (*SKU, bool) {
	if c.shares == nil {
		return nil, false
	}
	i, ok := c.shares.byModel[model]
	if !ok {
		return nil, false
	}
	return c.derive(&c.SKUs[i], profile)
}

// derivedByID is the SKU of a derived id (DerivedSKUID).
func (c *Catalog) derivedByID(id string) (*SKU, bool) {
	base, profile, ok := strings.Cut(id, "[")
	if !ok || c.shares == nil || !strings.HasSuffix(profile, "]") {
		return nil, false
	}
	i, ok := c.skuByID[base]
	if !ok || c.SKUs[i].ShareOf == "" {
		return nil, false
	}
	return c.derive(&c.SKUs[i], strings.TrimSuffix(profile, "]"))
}

// derive prices profile under the share SKU s: the whole card's hourly and
// monthly prices times the share's fraction on s's basis, exactly (a share
// profile's fractions are finite decimals), with s's discounts where it has
// them, else the card's.
func (c *Catalog) derive(s *SKU, profile string) (*SKU, bool) {
	id := DerivedSKUID(s.ID, profile)
	c.shares.mu.Lock()
	defer c.shares.mu.Unlock()
	if d, ok := c.shares.derived[id]; ok {
		return d, true
	}
	share, ok := ParseShareProfile(profile)
	if !ok {
		return nil, false
	}
	f, ok := share.By(s.ShareBy)
	card, found := c.skuByID[s.ShareOf]
	if !ok || !found {
		return nil, false
	}
	whole := &c.SKUs[card]
	d := &SKU{
		ID: id, GPUModel: s.GPUModel, Profile: profile,
		HourlyPrice: tidy(whole.HourlyPrice.Mul(f)), MonthlyPrice: tidy(whole.MonthlyPrice.Mul(f)), HasMonthly: whole.HasMonthly,
		Discounts: s.Discounts, ShareOf: s.ShareOf, ShareBy: s.ShareBy, Share: f,
	}
	if d.Discounts == nil {
		d.Discounts = whole.Discounts
	}
	c.shares.derived[id] = d
	return d, true
}

// ShareSKU reports whether sku is a catalog's SKU priced by share (not one
// derived from it): it has no price of its own and is not billed as such.
func (s *SKU) ShareSKU() bool { return s.ShareOf != "" && s.Share.IsZero() }

// shareSKU reads a SKU priced by share: share_of and share, no profile and
// no price of its own (they come from share_of, linked by linkShareSKUs once
// every SKU is read).
func (v *catalogValidator) shareSKU(n *yaml.Node, r *rawSKU, path string, s *SKU, c *Catalog) {
	s.ShareOf = v.str(r.ShareOf, path+".share_of", true)
	if r.Share.Set {
		switch b := ShareBasis(r.Share.Value); b {
		case ShareByMemory, ShareByCores, ShareByMax:
			s.ShareBy = b
		default:
			v.errf(r.Share.Line, path+".share", "%q is not a share basis (memory | cores | max)", r.Share.Value)
		}
	} else {
		v.missing(n.Line, path+".share")
	}
	for _, f := range []struct {
		sc   scalar
		name string
	}{{r.Profile, "profile"}, {r.HourlyPrice, "hourly_price"}, {r.MonthlyPrice, "monthly_price"}} {
		if f.sc.Set {
			v.errf(f.sc.Line, path+"."+f.name, "a SKU priced by share (share_of) has no %s of its own: its prices are share_of's times the share, and it prices every share profile of its gpu_model (docs/billing.md, rule 11)", f.name)
		}
	}
	if r.Discounts.Kind != 0 {
		s.Discounts = map[Term]decimal.Decimal{}
		v.discounts(&r.Discounts, path+".discounts", s.Discounts)
	}
	if _, dup := c.skuByID[s.ID]; dup && s.ID != "" {
		v.errf(n.Line, path+".id", "duplicate SKU id %q", s.ID)
	}
	if j, dup := c.shares.byModel[s.GPUModel]; dup && s.GPUModel != "" {
		v.errf(n.Line, path+".gpu_model", "gpu_model %q already has a SKU priced by share (%q): one per model", s.GPUModel, c.SKUs[j].ID)
	}
	c.skuByID[s.ID] = len(c.SKUs)
	c.shares.byModel[s.GPUModel] = len(c.SKUs)
	c.SKUs = append(c.SKUs, *s)
	v.shareLines = append(v.shareLines, shareLine{index: len(c.SKUs) - 1, line: r.ShareOf.Line, path: path})
}

// shareLine is where a SKU priced by share was read, to check its share_of
// once every SKU is known.
type shareLine struct {
	index int
	line  int
	path  string
}

// linkShareSKUs checks every share_of: it names a SKU of the same GPU model
// that has an hourly price of its own.
func (v *catalogValidator) linkShareSKUs(c *Catalog) {
	for _, sl := range v.shareLines {
		s := &c.SKUs[sl.index]
		if s.ShareOf == "" {
			continue
		}
		j, ok := c.skuByID[s.ShareOf]
		switch {
		case !ok:
			v.errf(sl.line, sl.path+".share_of", "unknown SKU %q", s.ShareOf)
		case c.SKUs[j].ShareOf != "":
			v.errf(sl.line, sl.path+".share_of", "SKU %q is itself priced by share: name the whole card's SKU", s.ShareOf)
		case c.SKUs[j].GPUModel != s.GPUModel:
			v.errf(sl.line, sl.path+".share_of", "SKU %q prices gpu_model %q, not %q", s.ShareOf, c.SKUs[j].GPUModel, s.GPUModel)
		default:
			s.HasMonthly = c.SKUs[j].HasMonthly
		}
	}
}

// tidy drops the trailing zeros a product carries beyond the cents (5.00 ×
// 0.1 is 0.500, shown 0.50); the value is unchanged, never rounded.
func tidy(d decimal.Decimal) decimal.Decimal {
	for d.Exponent() < -2 {
		shorter := d.Truncate(-d.Exponent() - 1)
		if !shorter.Equal(d) {
			break
		}
		d = shorter
	}
	return d
}
