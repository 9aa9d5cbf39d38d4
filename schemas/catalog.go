package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // billing periods must resolve on hosts without a zoneinfo database (see loadZone)

	"github.com/shopspring/decimal"
	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/internal/yamlwalk"
)

// Rounding is how a session's uncovered time becomes billed seconds.
type Rounding string

// Rounding modes.
const (
	RoundSecond Rounding = "second"
	RoundHour   Rounding = "hour"
)

// Term is the length of a reservation.
type Term string

// Reservation terms.
const (
	TermMonth   Term = "month"
	TermQuarter Term = "quarter"
	TermYear    Term = "year"
)

// Months returns the number of calendar months a term lasts.
func (t Term) Months() int {
	switch t {
	case TermQuarter:
		return 3
	case TermYear:
		return 12
	}
	return 1
}

// Reservation payment schedules.
const (
	BillingUpfront = "upfront"
	BillingMonthly = "monthly"
)

// Catalog is a validated price catalog: currency, billing time zone, SKUs with
// their prices and the projects with their reservations.
type Catalog struct {
	Currency  string
	Timezone  string
	Location  *time.Location
	Defaults  Defaults
	Discounts map[Term]decimal.Decimal // month, quarter, year: fraction off
	SKUs      []SKU
	Projects  []Project
	Terms     []AcademicTerm // for budgets per term; sorted by start, never overlapping

	skuByID    map[string]int
	skuByModel map[[2]string]int
	projByID   map[string]int
	shares     *shareSKUs // the SKUs priced by share, and those derived from them
}

// Defaults apply to every project unless the project overrides them.
type Defaults struct {
	Rounding       Rounding
	GapToleranceMS int64
	MinBilledS     int64
	Idle           IdlePolicy
}

// IdlePolicy decides when a held instance counts as idle and what happens then.
type IdlePolicy struct {
	Threshold    float64       // util below this is idle
	WarnAfter    time.Duration // idle streak longer than this raises a warning
	RemindAfter  time.Duration // idle streak longer than this raises a reminder (0: none); between warn_after and release_after
	ReleaseAfter time.Duration // idle streak longer than this triggers release
	AutoRelease  bool          // whether release is carried out: Release == ReleaseOn
	Release      ReleaseMode   // off | dry-run | on
	QuietHours   *QuietHours   // no warning or reminder is sent inside them (nil: none)
}

// ReleaseMode says what happens to a held instance idle past release_after.
type ReleaseMode string

// Release modes: off (warn only), dry-run (record what would have been
// done, release nothing) and on (release).
const (
	ReleaseOff    ReleaseMode = "off"
	ReleaseDryRun ReleaseMode = "dry-run"
	ReleaseOn     ReleaseMode = "on"
)

// QuietHours is a daily window of the catalog's time zone in which no idle
// warning or reminder is sent; those falling due inside it are sent at its
// end. Releases are not deferred. The window may wrap midnight
// (22:00-08:00). Minutes after midnight; Start != End.
type QuietHours struct {
	Start, End int
}

// String formats q as in the catalog ("22:00-08:00").
func (q QuietHours) String() string {
	return fmt.Sprintf("%02d:%02d-%02d:%02d", q.Start/60, q.Start%60, q.End/60, q.End%60)
}

// Contains reports whether t falls inside the window, read in loc.
func (q QuietHours) Contains(t time.Time, loc *time.Location) bool {
	lt := t.In(loc)
	m := lt.Hour()*60 + lt.Minute()
	if q.Start < q.End {
		return m >= q.Start && m < q.End
	}
	return m >= q.Start || m < q.End
}

// NextEnd returns the first end of the window at or after t, in loc (on a
// day whose clock skips that minute, the first instant after it).
func (q QuietHours) NextEnd(t time.Time, loc *time.Location) time.Time {
	lt := t.In(loc)
	for d := 0; d < 3; d++ {
		y, mo, day := lt.Date()
		e := time.Date(y, mo, day+d, q.End/60, q.End%60, 0, 0, loc)
		if !e.Before(t) {
			return e
		}
	}
	return t
}

// AcademicTerm is a named stretch of calendar days (a semester) for budgets
// counted per term: [Start, End) in the catalog's time zone, End exclusive
// (the day after the last day).
type AcademicTerm struct {
	ID         string
	Start, End time.Time
}

// TermAt returns the term that contains t, if any.
func (c *Catalog) TermAt(t time.Time) (AcademicTerm, bool) {
	for _, tm := range c.Terms {
		if !t.Before(tm.Start) && t.Before(tm.End) {
			return tm, true
		}
	}
	return AcademicTerm{}, false
}

// DefaultIdlePolicy is the policy of billing-semantics §6.
var DefaultIdlePolicy = IdlePolicy{Threshold: 0.05, WarnAfter: 30 * time.Minute, ReleaseAfter: 60 * time.Minute, Release: ReleaseOff}

// SKU is one priced kind of GPU instance.
type SKU struct {
	ID           string
	GPUModel     string
	Profile      string
	HourlyPrice  decimal.Decimal
	MonthlyPrice decimal.Decimal
	HasMonthly   bool
	Discounts    map[Term]decimal.Decimal // per-SKU overrides (subset of terms)
	// ShareOf, on a SKU priced by share, is the id of the whole card's SKU whose
	// prices it takes in proportion to a share (rule 11 of docs/billing.md);
	// ShareBy is what it measures the share by. Such a SKU has no profile and
	// no price of its own: ResolveSKU derives a SKU for each share profile.
	ShareOf string
	ShareBy ShareBasis
	// Share is, on a SKU derived for a share profile, the share's fraction of
	// the card its prices were taken from (zero on every other SKU).
	Share decimal.Decimal
}

// Project is a lab, course or customer that holds instances and gets invoices.
type Project struct {
	ID           string
	Name         string
	Funding      string
	Rounding     Rounding // empty: Defaults.Rounding
	Idle         *IdlePolicy
	Reservations []Reservation
}

// Reservation gives a project Quantity instances of a SKU for a term.
type Reservation struct {
	SKU        string
	Quantity   int64
	Term       Term
	StartYear  int
	StartMonth time.Month
	Billing    string // upfront | monthly
}

// StartIndex returns the reservation's first month as year*12+month-1.
func (r Reservation) StartIndex() int { return r.StartYear*12 + int(r.StartMonth) - 1 }

// ActiveIn reports whether the reservation covers the month with index y*12+m-1.
func (r Reservation) ActiveIn(monthIndex int) bool {
	s := r.StartIndex()
	return monthIndex >= s && monthIndex < s+r.Term.Months()
}

// SKUByID returns the SKU with that id: one of the catalog's, or one derived
// for a share profile ("a100-share[1/20]", see ResolveSKU).
func (c *Catalog) SKUByID(id string) (*SKU, bool) {
	i, ok := c.skuByID[id]
	if !ok {
		return c.derivedByID(id)
	}
	return &c.SKUs[i], true
}

// ResolveSKU finds the SKU priced for (gpu_model, profile): the one the
// catalog lists for that pair, else, for a share profile (ParseShareProfile),
// the SKU derived from the model's SKU priced by share, if it has one and the
// profile states the share on its basis.
func (c *Catalog) ResolveSKU(gpuModel, profile string) (*SKU, bool) {
	i, ok := c.skuByModel[[2]string{gpuModel, profile}]
	if !ok {
		return c.derivedFor(gpuModel, profile)
	}
	return &c.SKUs[i], true
}

// Project returns the catalog entry of a project, if it has one.
func (c *Catalog) Project(id string) (*Project, bool) {
	i, ok := c.projByID[id]
	if !ok {
		return nil, false
	}
	return &c.Projects[i], true
}

// RoundingFor returns the rounding mode in force for a project.
func (c *Catalog) RoundingFor(project string) Rounding {
	if p, ok := c.Project(project); ok && p.Rounding != "" {
		return p.Rounding
	}
	return c.Defaults.Rounding
}

// IdlePolicyFor returns the idle policy in force for a project.
func (c *Catalog) IdlePolicyFor(project string) IdlePolicy {
	if p, ok := c.Project(project); ok && p.Idle != nil {
		return *p.Idle
	}
	return c.Defaults.Idle
}

// Discount returns the fraction off for a term on a SKU: the SKU's override if
// it has one, else the catalog's.
func (c *Catalog) Discount(sku *SKU, term Term) decimal.Decimal {
	if d, ok := sku.Discounts[term]; ok {
		return d
	}
	return c.Discounts[term]
}

// LoadCatalog reads and validates a catalog file.
func LoadCatalog(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read catalog: %w", err)
	}
	return ParseCatalog(data, path)
}

// ParseCatalog validates a catalog document. Every problem is reported at once,
// each prefixed with name:line and the path of the field.
func ParseCatalog(data []byte, name string) (*Catalog, error) {
	if name == "" {
		name = "catalog"
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("catalog %s is empty (it holds no YAML document; a catalog starts with currency: and timezone:)", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(root.Content) == 0 || yamlwalk.IsNull(root.Content[0]) {
		return nil, fmt.Errorf("catalog %s is empty (its YAML document holds nothing; a catalog starts with currency: and timezone:)", name)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		line := next.Line
		if err != nil {
			return nil, fmt.Errorf("%s: after the first YAML document: %w", name, err)
		}
		return nil, fmt.Errorf("%s:%d: a second YAML document (after ---): a catalog is one document", name, line)
	}
	doc := root.Content[0]
	v := &catalogValidator{name: name}
	if v.notACatalog(doc) {
		return nil, errors.Join(v.errs...)
	}
	var raw rawCatalog
	v.strict(doc, "", &raw)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	c := v.build(doc, &raw)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	return c, nil
}

// ---- raw YAML shape ----

type scalar struct {
	Value string
	Line  int
	Set   bool
	Kind  yaml.Kind
}

func (s *scalar) UnmarshalYAML(n *yaml.Node) error {
	s.Line, s.Set, s.Kind = n.Line, true, n.Kind
	if n.Kind == yaml.ScalarNode {
		s.Value = n.Value
	}
	return nil
}

type rawCatalog struct {
	Currency  scalar      `yaml:"currency"`
	Timezone  scalar      `yaml:"timezone"`
	Defaults  yaml.Node   `yaml:"defaults"`
	Discounts yaml.Node   `yaml:"discounts"`
	SKUs      []yaml.Node `yaml:"skus"`
	Projects  []yaml.Node `yaml:"projects"`
	Terms     []yaml.Node `yaml:"terms"`
}

type rawTerm struct {
	ID    scalar `yaml:"id"`
	Start scalar `yaml:"start"`
	End   scalar `yaml:"end"`
}

type rawDefaults struct {
	Rounding      scalar    `yaml:"rounding"`
	GapToleranceS scalar    `yaml:"gap_tolerance_s"`
	MinBilledS    scalar    `yaml:"min_billed_s"`
	Idle          yaml.Node `yaml:"idle"`
}

type rawDiscounts struct {
	Month   scalar `yaml:"month"`
	Quarter scalar `yaml:"quarter"`
	Year    scalar `yaml:"year"`
}

type rawIdle struct {
	Threshold    scalar `yaml:"threshold"`
	WarnAfter    scalar `yaml:"warn_after"`
	RemindAfter  scalar `yaml:"remind_after"`
	ReleaseAfter scalar `yaml:"release_after"`
	AutoRelease  scalar `yaml:"auto_release"`
	Release      scalar `yaml:"release"`
	QuietHours   scalar `yaml:"quiet_hours"`
}

type rawSKU struct {
	ID           scalar    `yaml:"id"`
	GPUModel     scalar    `yaml:"gpu_model"`
	Profile      scalar    `yaml:"profile"`
	HourlyPrice  scalar    `yaml:"hourly_price"`
	MonthlyPrice scalar    `yaml:"monthly_price"`
	Discounts    yaml.Node `yaml:"discounts"`
	ShareOf      scalar    `yaml:"share_of"`
	Share        scalar    `yaml:"share"`
}

type rawProject struct {
	ID           scalar      `yaml:"id"`
	Name         scalar      `yaml:"name"`
	Funding      scalar      `yaml:"funding"`
	Rounding     scalar      `yaml:"rounding"`
	Idle         yaml.Node   `yaml:"idle"`
	Reservations []yaml.Node `yaml:"reservations"`
}

type rawReservation struct {
	SKU      scalar `yaml:"sku"`
	Quantity scalar `yaml:"quantity"`
	Term     scalar `yaml:"term"`
	Start    scalar `yaml:"start"`
	Billing  scalar `yaml:"billing"`
}

// ---- validation ----

type catalogValidator struct {
	name       string
	errs       []error
	shareLines []shareLine // the SKUs priced by share, for linkShareSKUs
}

func (v *catalogValidator) errf(line int, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	v.errs = append(v.errs, fmt.Errorf("%s:%d: %s", v.name, line, msg))
}

// notACatalog reports (and records) a document that is a mapping without a
// single catalog field: another kind of file (a fleet, a Kubernetes manifest)
// given as the catalog, described once rather than field by field.
func (v *catalogValidator) notACatalog(doc *yaml.Node) bool {
	if doc.Kind != yaml.MappingNode || len(doc.Content) == 0 {
		return false
	}
	allowed := yamlFields(reflect.TypeOf(rawCatalog{}))
	var keys []string
	key := func(k *yaml.Node) { keys = append(keys, k.Value) }
	// A key given twice is reported to the second callback: listed as written.
	yamlwalk.Mapping(doc, "", nil, func(k *yaml.Node, _, _ string, _ ...any) { key(k) },
		func(k, _ *yaml.Node, _ string) { key(k) })
	if slices.ContainsFunc(keys, func(k string) bool { return slices.Contains(allowed, k) }) {
		return false
	}
	v.errf(doc.Content[0].Line, "", "this is not a price catalog: its fields (%s) are none of a catalog's (%s)",
		strings.Join(keys, ", "), strings.Join(allowed, ", "))
	return true
}

// yamlFields returns the yaml keys a raw struct accepts.
func yamlFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

// strict decodes a mapping node into dst after checking that it has only known
// keys. Unknown keys are errors (with their line), as in Prometheus' UnmarshalStrict.
func (v *catalogValidator) strict(n *yaml.Node, path string, dst any) bool {
	if n.Kind != yaml.MappingNode {
		v.errf(n.Line, path, "expected a mapping (key: value lines)")
		return false
	}
	t := reflect.TypeOf(dst).Elem()
	ok := true
	report := func(at *yaml.Node, path, format string, args ...any) {
		v.errf(at.Line, path, format, args...)
		ok = false
	}
	yamlwalk.Mapping(n, path, yamlFields(t), report, func(k, val *yaml.Node, fpath string) {
		// A list field must hold a list: checked here, in catalog terms,
		// rather than left to the YAML decoder (whose message names Go types).
		if f, _ := fieldByTag(t, k.Value); f.Type.Kind() == reflect.Slice && val.Kind != yaml.SequenceNode && !yamlwalk.IsNull(val) {
			report(val, fpath, "must be a list (lines starting with '- '), not %s", yamlKind(val))
		}
	})
	if !ok {
		return false
	}
	if err := n.Decode(dst); err != nil {
		// Not expected after the checks above; never show the decoder's Go types.
		v.errf(n.Line, path, "cannot be read: %s", yamlDecodeError(err))
		return false
	}
	return true
}

// fieldByTag returns the field of struct type t whose yaml key is key.
func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0] == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// yamlKind names the kind of a YAML value for an error message.
func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping (key: value lines)"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("the single value %q", n.Value)
}

var goTypeInError = regexp.MustCompile(` into \S+`)

// yamlDecodeError is a YAML decoding error on one line, without Go type names.
func yamlDecodeError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n")
	msg = goTypeInError.ReplaceAllString(msg, "")
	return strings.Join(strings.Fields(msg), " ")
}

func (v *catalogValidator) str(s scalar, path string, required bool) string {
	if !s.Set {
		if required {
			v.errs = append(v.errs, fmt.Errorf("%s: %s: required field is missing", v.name, path))
		}
		return ""
	}
	if s.Kind != yaml.ScalarNode {
		v.errf(s.Line, path, "must be a single value, not a list or mapping")
		return ""
	}
	if required && strings.TrimSpace(s.Value) == "" {
		v.errf(s.Line, path, "must not be empty")
	}
	return s.Value
}

func (v *catalogValidator) missing(line int, path string) {
	v.errf(line, path, "required field is missing")
}

func (v *catalogValidator) money(s scalar, path string, lineOfParent int, required bool) (decimal.Decimal, bool) {
	if !s.Set {
		if required {
			v.missing(lineOfParent, path)
		}
		return decimal.Zero, false
	}
	d, err := decimal.NewFromString(strings.TrimSpace(s.Value))
	if err != nil || s.Kind != yaml.ScalarNode || strings.ContainsAny(s.Value, "eE") {
		v.errf(s.Line, path, "%q is not a decimal amount (write it as a string, e.g. \"1.80\")", s.Value)
		return decimal.Zero, false
	}
	if d.Sign() < 0 {
		v.errf(s.Line, path, "%q must not be negative", s.Value)
		return decimal.Zero, false
	}
	return d, true
}

func (v *catalogValidator) fraction(s scalar, path string) (decimal.Decimal, bool) {
	d, err := decimal.NewFromString(strings.TrimSpace(s.Value))
	if err != nil || s.Kind != yaml.ScalarNode {
		v.errf(s.Line, path, "%q is not a decimal fraction (e.g. \"0.05\" for 5 %% off)", s.Value)
		return decimal.Zero, false
	}
	if d.Sign() < 0 || d.GreaterThanOrEqual(decimal.NewFromInt(1)) {
		v.errf(s.Line, path, "%q must be in [0, 1)", s.Value)
		return decimal.Zero, false
	}
	return d, true
}

func (v *catalogValidator) seconds(s scalar, path string, def int64) int64 {
	if !s.Set {
		return def
	}
	d, err := decimal.NewFromString(strings.TrimSpace(s.Value))
	if err != nil || d.Sign() < 0 || s.Kind != yaml.ScalarNode {
		v.errf(s.Line, path, "%q must be a number of seconds >= 0", s.Value)
		return def
	}
	ms := d.Shift(3)
	if !ms.IsInteger() {
		v.errf(s.Line, path, "%q has more than millisecond precision", s.Value)
		return def
	}
	if ms.GreaterThan(decimal.NewFromInt(maxIntMS)) {
		v.errf(s.Line, path, "%q is too large", s.Value)
		return def
	}
	return ms.IntPart()
}

func (v *catalogValidator) wholeSeconds(s scalar, path string) int64 {
	if !s.Set {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s.Value), 10, 64)
	if err != nil || n < 0 || n > maxIntMS/1000 {
		v.errf(s.Line, path, "%q must be a whole number of seconds >= 0", s.Value)
		return 0
	}
	return n
}

func (v *catalogValidator) rounding(s scalar, path string) Rounding {
	if !s.Set {
		return ""
	}
	switch r := Rounding(s.Value); r {
	case RoundSecond, RoundHour:
		return r
	}
	v.errf(s.Line, path, "%q is not a rounding mode (second | hour)", s.Value)
	return ""
}

func (v *catalogValidator) duration(s scalar, path string, def time.Duration) time.Duration {
	if !s.Set {
		return def
	}
	if n, err := strconv.ParseInt(s.Value, 10, 64); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	d, err := time.ParseDuration(s.Value)
	if err != nil || d < 0 {
		v.errf(s.Line, path, "%q is not a duration (e.g. 30m, 1h, or seconds)", s.Value)
		return def
	}
	return d
}

func (v *catalogValidator) idle(n *yaml.Node, path string, base IdlePolicy) *IdlePolicy {
	var r rawIdle
	if !v.strict(n, path, &r) {
		return nil
	}
	p := base
	if r.Threshold.Set {
		f, err := strconv.ParseFloat(r.Threshold.Value, 64)
		if err != nil || f < 0 || f > 1 {
			v.errf(r.Threshold.Line, path+".threshold", "%q must be a number in [0,1]", r.Threshold.Value)
		} else {
			p.Threshold = f
		}
	}
	p.WarnAfter = v.duration(r.WarnAfter, path+".warn_after", base.WarnAfter)
	p.RemindAfter = v.duration(r.RemindAfter, path+".remind_after", base.RemindAfter)
	p.ReleaseAfter = v.duration(r.ReleaseAfter, path+".release_after", base.ReleaseAfter)
	if r.AutoRelease.Set {
		b, err := strconv.ParseBool(r.AutoRelease.Value)
		if err != nil {
			v.errf(r.AutoRelease.Line, path+".auto_release", "%q must be true or false", r.AutoRelease.Value)
		}
		p.Release = ReleaseOff
		if b {
			p.Release = ReleaseOn
		}
	}
	if r.Release.Set {
		switch m := ReleaseMode(r.Release.Value); m {
		case ReleaseOff, ReleaseDryRun, ReleaseOn:
			if r.AutoRelease.Set && p.Release != m {
				v.errf(r.Release.Line, path+".release", "%q contradicts auto_release: %s at line %d (give one of them; auto_release: true is release: on)",
					r.Release.Value, r.AutoRelease.Value, r.AutoRelease.Line)
			}
			p.Release = m
		default:
			v.errf(r.Release.Line, path+".release", "%q is not a release mode (off | dry-run | on)", r.Release.Value)
		}
	}
	if p.Release == "" {
		p.Release = ReleaseOff
	}
	p.AutoRelease = p.Release == ReleaseOn
	if r.QuietHours.Set {
		switch q, msg := parseQuietHours(r.QuietHours.Value); {
		case r.QuietHours.Kind != yaml.ScalarNode:
			v.errf(r.QuietHours.Line, path+".quiet_hours", "must be a single value like \"22:00-08:00\" (or none)")
		case msg != "":
			v.errf(r.QuietHours.Line, path+".quiet_hours", "%q %s", r.QuietHours.Value, msg)
		default:
			p.QuietHours = q
		}
	}
	if p.ReleaseAfter > 0 && p.WarnAfter > p.ReleaseAfter {
		v.errf(n.Line, path, "warn_after (%s) must not be longer than release_after (%s)", p.WarnAfter, p.ReleaseAfter)
	}
	if p.RemindAfter > 0 {
		line := r.RemindAfter.Line
		if line == 0 {
			line = n.Line
		}
		if p.RemindAfter < p.WarnAfter {
			v.errf(line, path+".remind_after", "%s must not be shorter than warn_after (%s)", p.RemindAfter, p.WarnAfter)
		}
		if p.ReleaseAfter > 0 && p.RemindAfter > p.ReleaseAfter {
			v.errf(line, path+".remind_after", "%s must not be longer than release_after (%s)", p.RemindAfter, p.ReleaseAfter)
		}
	}
	return &p
}

var quietPattern = regexp.MustCompile(`^(\d{2}):(\d{2})-(\d{2}):(\d{2})$`)

// parseQuietHours reads "HH:MM-HH:MM" (or "none": no quiet hours); msg is
// "" on success.
func parseQuietHours(s string) (*QuietHours, string) {
	s = strings.TrimSpace(s)
	if s == "none" || s == "" {
		return nil, ""
	}
	m := quietPattern.FindStringSubmatch(s)
	if m == nil {
		return nil, "is not a daily window HH:MM-HH:MM (e.g. \"22:00-08:00\"; none for no quiet hours)"
	}
	var n [4]int
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	if n[0] > 23 || n[2] > 23 || n[1] > 59 || n[3] > 59 {
		return nil, "is not a daily window HH:MM-HH:MM (hours 00-23, minutes 00-59)"
	}
	q := &QuietHours{Start: n[0]*60 + n[1], End: n[2]*60 + n[3]}
	if q.Start == q.End {
		return nil, "starts and ends at the same time (a window of no time or of the whole day); give two different times or none"
	}
	return q, ""
}

var (
	idPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$`)
	monthPattern = regexp.MustCompile(`^(\d{4})-(\d{2})$`)
)

func (v *catalogValidator) build(_ *yaml.Node, raw *rawCatalog) *Catalog {
	c := &Catalog{
		Discounts:  map[Term]decimal.Decimal{TermMonth: decimal.Zero, TermQuarter: decimal.RequireFromString("0.05"), TermYear: decimal.RequireFromString("0.20")},
		skuByID:    map[string]int{},
		skuByModel: map[[2]string]int{},
		projByID:   map[string]int{},
		shares:     newShareSKUs(),
	}
	c.Currency = v.str(raw.Currency, "currency", true)
	if c.Currency != "" {
		if msg := checkCurrency(c.Currency); msg != "" {
			v.errf(raw.Currency.Line, "currency", "%s", msg)
		}
	}
	c.Timezone = v.str(raw.Timezone, "timezone", true)
	if c.Timezone != "" {
		loc, msg := loadZone(c.Timezone)
		if msg != "" {
			v.errf(raw.Timezone.Line, "timezone", "%s", msg)
		}
		c.Location = loc
	}
	v.defaults(raw, c)
	if raw.Discounts.Kind != 0 {
		v.discounts(&raw.Discounts, "discounts", c.Discounts)
	}
	// A catalog without SKUs is valid: all usage is then reported as unpriced.
	eachStrict(v, raw.SKUs, "skus", func(n *yaml.Node, r *rawSKU, path string) { v.sku(n, r, path, c) })
	v.linkShareSKUs(c)
	eachStrict(v, raw.Projects, "projects", func(n *yaml.Node, r *rawProject, path string) { v.project(n, r, path, c) })
	v.terms(raw.Terms, c)
	return c
}

// eachStrict decodes every node of a list (at name) strictly into an R and
// hands those that are mappings of known fields to fn, with their paths.
func eachStrict[R any](v *catalogValidator, nodes []yaml.Node, name string, fn func(n *yaml.Node, r *R, path string)) {
	for i := range nodes {
		n, path := &nodes[i], fmt.Sprintf("%s[%d]", name, i)
		var r R
		if v.strict(n, path, &r) {
			fn(n, &r, path)
		}
	}
}

// defaults reads the catalog's defaults: rounding, gap tolerance, minimum
// billed time, the idle policy.
func (v *catalogValidator) defaults(raw *rawCatalog, c *Catalog) {
	c.Defaults = Defaults{Rounding: RoundSecond, GapToleranceMS: 30_000, Idle: DefaultIdlePolicy}
	if raw.Defaults.Kind == 0 {
		return
	}
	var d rawDefaults
	if !v.strict(&raw.Defaults, "defaults", &d) {
		return
	}
	if r := v.rounding(d.Rounding, "defaults.rounding"); r != "" {
		c.Defaults.Rounding = r
	}
	c.Defaults.GapToleranceMS = v.seconds(d.GapToleranceS, "defaults.gap_tolerance_s", 30_000)
	c.Defaults.MinBilledS = v.wholeSeconds(d.MinBilledS, "defaults.min_billed_s")
	if d.Idle.Kind != 0 {
		if p := v.idle(&d.Idle, "defaults.idle", DefaultIdlePolicy); p != nil {
			c.Defaults.Idle = *p
		}
	}
}

// sku adds the SKU r (node n, at path) to c.
func (v *catalogValidator) sku(n *yaml.Node, r *rawSKU, path string, c *Catalog) {
	s := SKU{
		ID:       v.str(r.ID, path+".id", true),
		GPUModel: v.str(r.GPUModel, path+".gpu_model", true),
		Profile:  v.str(r.Profile, path+".profile", !r.ShareOf.Set && !r.Share.Set),
	}
	if r.ID.Set && s.ID != "" && !idPattern.MatchString(s.ID) {
		v.errf(r.ID.Line, path+".id", "%q: use letters, digits and . _ - : / @ +", s.ID)
	}
	if r.ShareOf.Set || r.Share.Set {
		v.shareSKU(n, r, path, &s, c)
		return
	}
	s.HourlyPrice, _ = v.money(r.HourlyPrice, path+".hourly_price", n.Line, true)
	s.MonthlyPrice, s.HasMonthly = v.money(r.MonthlyPrice, path+".monthly_price", n.Line, false)
	if r.Discounts.Kind != 0 {
		s.Discounts = map[Term]decimal.Decimal{}
		v.discounts(&r.Discounts, path+".discounts", s.Discounts)
	}
	if _, dup := c.skuByID[s.ID]; dup && s.ID != "" {
		v.errf(n.Line, path+".id", "duplicate SKU id %q", s.ID)
	}
	key := [2]string{s.GPUModel, s.Profile}
	if j, dup := c.skuByModel[key]; dup {
		v.errf(n.Line, path, "gpu_model %q with profile %q is already priced by SKU %q", s.GPUModel, s.Profile, c.SKUs[j].ID)
	}
	c.skuByID[s.ID] = len(c.SKUs)
	c.skuByModel[key] = len(c.SKUs)
	c.SKUs = append(c.SKUs, s)
}

// project adds the project r (node n, at path), with its reservations, to c.
func (v *catalogValidator) project(n *yaml.Node, r *rawProject, path string, c *Catalog) {
	p := Project{
		ID:       v.str(r.ID, path+".id", true),
		Name:     v.str(r.Name, path+".name", false),
		Funding:  v.str(r.Funding, path+".funding", false),
		Rounding: v.rounding(r.Rounding, path+".rounding"),
	}
	if r.Idle.Kind != 0 {
		p.Idle = v.idle(&r.Idle, path+".idle", c.Defaults.Idle)
	}
	if _, dup := c.projByID[p.ID]; dup && p.ID != "" {
		v.errf(n.Line, path+".id", "duplicate project id %q", p.ID)
	}
	eachStrict(v, r.Reservations, path+".reservations", func(rn *yaml.Node, rr *rawReservation, rpath string) {
		p.Reservations = append(p.Reservations, v.reservation(rn, rr, rpath, c))
	})
	c.projByID[p.ID] = len(c.Projects)
	c.Projects = append(c.Projects, p)
}

// reservation reads the reservation rr (node rn, at rpath) of a project.
func (v *catalogValidator) reservation(rn *yaml.Node, rr *rawReservation, rpath string, c *Catalog) Reservation {
	res := Reservation{SKU: v.str(rr.SKU, rpath+".sku", true), Billing: BillingUpfront}
	if res.SKU != "" {
		if sku, ok := c.SKUByID(res.SKU); !ok {
			v.errf(rr.SKU.Line, rpath+".sku", "unknown SKU %q", res.SKU)
		} else if sku.ShareSKU() {
			v.errf(rr.SKU.Line, rpath+".sku", "SKU %q is priced by share: reserve one share profile of it, e.g. %q", res.SKU, DerivedSKUID(res.SKU, "1/20"))
		} else if !sku.HasMonthly {
			v.errf(rr.SKU.Line, rpath+".sku", "SKU %q has no monthly_price, so it cannot be reserved", res.SKU)
		}
	}
	if !rr.Quantity.Set {
		v.missing(rn.Line, rpath+".quantity")
	} else if q, err := strconv.ParseInt(rr.Quantity.Value, 10, 64); err != nil || q <= 0 || q > 1_000_000 {
		v.errf(rr.Quantity.Line, rpath+".quantity", "%q must be a whole number >= 1", rr.Quantity.Value)
	} else {
		res.Quantity = q
	}
	switch t := Term(rr.Term.Value); {
	case !rr.Term.Set:
		v.missing(rn.Line, rpath+".term")
	case t == TermMonth || t == TermQuarter || t == TermYear:
		res.Term = t
	default:
		v.errf(rr.Term.Line, rpath+".term", "%q is not a term (month | quarter | year)", rr.Term.Value)
	}
	if !rr.Start.Set {
		v.missing(rn.Line, rpath+".start")
	} else if m := monthPattern.FindStringSubmatch(rr.Start.Value); m == nil {
		v.errf(rr.Start.Line, rpath+".start", "%q is not a month (YYYY-MM)", rr.Start.Value)
	} else {
		y, _ := strconv.Atoi(m[1])
		mo, _ := strconv.Atoi(m[2])
		if mo < 1 || mo > 12 || y < 1970 {
			v.errf(rr.Start.Line, rpath+".start", "%q is not a month (YYYY-MM)", rr.Start.Value)
		}
		res.StartYear, res.StartMonth = y, time.Month(mo)
	}
	if rr.Billing.Set {
		switch rr.Billing.Value {
		case BillingUpfront, BillingMonthly:
			res.Billing = rr.Billing.Value
		default:
			v.errf(rr.Billing.Line, rpath+".billing", "%q is not a payment schedule (upfront | monthly)", rr.Billing.Value)
		}
	}
	return res
}

// terms reads the academic terms: id, start and end as calendar days
// (YYYY-MM-DD, end inclusive) in the catalog's zone, never overlapping.
func (v *catalogValidator) terms(nodes []yaml.Node, c *Catalog) {
	loc := c.Location
	if loc == nil {
		loc = time.UTC // the zone's own error is reported already
	}
	lines := map[string]int{}
	day := func(s scalar, path string, line int) (time.Time, bool) {
		if !s.Set {
			v.missing(line, path)
			return time.Time{}, false
		}
		d, err := time.ParseInLocation("2006-01-02", strings.TrimSpace(s.Value), loc)
		if err != nil || s.Kind != yaml.ScalarNode {
			v.errf(s.Line, path, "%q is not a day (YYYY-MM-DD)", s.Value)
			return time.Time{}, false
		}
		return d, true
	}
	for i := range nodes {
		n := &nodes[i]
		path := fmt.Sprintf("terms[%d]", i)
		var r rawTerm
		if !v.strict(n, path, &r) {
			continue
		}
		t := AcademicTerm{ID: v.str(r.ID, path+".id", true)}
		if r.ID.Set && t.ID != "" && !idPattern.MatchString(t.ID) {
			v.errf(r.ID.Line, path+".id", "%q: use letters, digits and . _ - : / @ +", t.ID)
		}
		if first, dup := lines[t.ID]; dup && t.ID != "" {
			v.errf(n.Line, path+".id", "duplicate term id %q (first at line %d)", t.ID, first)
		}
		lines[t.ID] = n.Line
		start, ok1 := day(r.Start, path+".start", n.Line)
		last, ok2 := day(r.End, path+".end", n.Line)
		if !ok1 || !ok2 {
			continue
		}
		if last.Before(start) {
			v.errf(r.End.Line, path+".end", "%s is before start %s", r.End.Value, r.Start.Value)
			continue
		}
		y, m, d := last.Date()
		t.Start, t.End = start, time.Date(y, m, d+1, 0, 0, 0, 0, loc)
		for _, o := range c.Terms {
			if t.Start.Before(o.End) && o.Start.Before(t.End) {
				v.errf(n.Line, path, "term %q overlaps term %q", t.ID, o.ID)
			}
		}
		c.Terms = append(c.Terms, t)
	}
	slices.SortFunc(c.Terms, func(a, b AcademicTerm) int { return a.Start.Compare(b.Start) })
}

func (v *catalogValidator) discounts(n *yaml.Node, path string, into map[Term]decimal.Decimal) {
	var d rawDiscounts
	if !v.strict(n, path, &d) {
		return
	}
	for _, t := range []struct {
		s    scalar
		term Term
	}{{d.Month, TermMonth}, {d.Quarter, TermQuarter}, {d.Year, TermYear}} {
		if !t.s.Set {
			continue
		}
		if f, ok := v.fraction(t.s, path+"."+string(t.term)); ok {
			into[t.term] = f
		}
	}
}

//go:generate go run gen_tznames.go

// loadZone loads a catalog's time zone, which must be named as in the IANA
// time zone database (ianaZones). time.LoadLocation alone would also take
// "Local" (the zone of the machine that bills) and whatever files the host's
// zoneinfo directory holds ("localtime", "posix/…"), so the same catalog
// could bill differently on two machines. The zone's rules come from the
// host's zoneinfo, or the copy embedded in the binary (time/tzdata) on hosts
// without one. msg is "" on success.
func loadZone(name string) (loc *time.Location, msg string) {
	if _, ok := slices.BinarySearch(ianaZones, name); !ok {
		if strings.EqualFold(name, "Local") || name == "localtime" {
			return nil, fmt.Sprintf("%q is the zone of the machine that bills, so the same catalog would bill differently on different machines: name an IANA time zone (e.g. Asia/Shanghai, UTC)", name)
		}
		for _, z := range ianaZones {
			if strings.EqualFold(z, name) {
				return nil, fmt.Sprintf("%q is not an IANA time zone; did you mean %q?", name, z)
			}
		}
		return nil, fmt.Sprintf("%q is not an IANA time zone (e.g. Asia/Shanghai, Europe/Berlin, UTC)", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Sprintf("%q: cannot load this time zone: %v", name, err)
	}
	return loc, ""
}
