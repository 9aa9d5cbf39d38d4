package schemas

// The stored row format: what ingest writes and billing reads back. Both
// packages use these types (billing and ingest alias them), so neither has to
// import the other.

// Key identifies one billing session stream: who holds which instance as what.
type Key struct {
	Project    string
	User       string
	InstanceID string
	GPUModel   string
	Profile    string
}

// KeyOf returns the key of a sample.
func KeyOf(s *Sample) Key {
	return Key{Project: s.Project, User: s.User, InstanceID: s.InstanceID, GPUModel: s.GPUModel, Profile: s.Profile}
}

// Run is an occupancy interval of one key: the union of touching or overlapping
// samples [StartMS, EndMS). Runs never bridge gaps and never cross a UTC month
// boundary (they are cut there so that a row lies in its start's partition).
type Run struct {
	Key            Key
	StartMS, EndMS int64
}

// IdleRun is an interval of idle-candidate samples of one key that touch or
// overlap and fall in one utilisation class (IdleClassOf): Class 0 is util null
// with no process (idle under every catalog); classes 1… are known utilisations
// in [IdleClassBounds()[c-2], IdleClassBounds()[c-1]), and [MinUtil, MaxUtil] holds
// the util of every sample of the run (ingest widens it to a grid, inside the
// class: ingest.UtilRange). Under a threshold T the run is
// idle entirely when MaxUtil < T, not at all when MinUtil >= T, and otherwise
// (only possible when T is not a class bound) its raw samples decide.
type IdleRun struct {
	Run
	Class            uint8
	MinUtil, MaxUtil float64
}

// RawPoint is a raw held sample with known utilisation, as the exact idle
// fallback reads it.
type RawPoint struct {
	Key            Key
	StartMS, EndMS int64
	Util           float64
}

// IdleClasses is the number of known-utilisation idle classes (1…IdleClasses).
const IdleClasses = 5

// IdleClassBounds returns the exclusive upper bounds of the known-utilisation
// idle classes: class 1 is util in [0, 0.05), class 2 [0.05, 0.10), … class 5
// [0.50, 1). A threshold equal to one of them (the default 0.05 is) never cuts
// through a run, so a month close reads idle runs only. Any other threshold is
// still exact: runs it cuts through are decided from their raw samples.
//
// There is deliberately no bound at 0.01: whole cards and H100 instances left
// idle report 0, 1 or 2 % from one sample to the next, and a bound there would
// cut their idle stretches into runs of one or two samples.
//
// The bounds are fixed: stored runs carry their class, and the migrations that
// classified older rows in SQL (SQLite, ClickHouse 0005) spell the same numbers,
// which tests compare with these.
func IdleClassBounds() [IdleClasses]float64 {
	return [IdleClasses]float64{0.05, 0.10, 0.20, 0.50, 1}
}

// IdleClassNull is the class of held samples with util null and no process.
const IdleClassNull = 0

// IdleClassOf returns the idle class of a held sample, or ok=false when the
// sample cannot be idle under any catalog (util null with processes, util >= 1).
func IdleClassOf(s *Sample) (class uint8, ok bool) {
	if !s.UtilKnown {
		return IdleClassNull, s.Processes == 0
	}
	for i, b := range IdleClassBounds() {
		if s.Util < b {
			return uint8(i + 1), true
		}
	}
	return 0, false
}
