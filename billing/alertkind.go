package billing

import "slices"

// AlertKind is what an alert tells a person: the one list of the kinds the
// watcher records, the state store keeps, the notifier renders and the
// metrics count.
type AlertKind string

const (
	// AlertIdleWarning: an instance has been idle for warn_after.
	AlertIdleWarning AlertKind = "idle_warning"
	// AlertIdleReminder: it is still idle, release comes next.
	AlertIdleReminder AlertKind = "idle_reminder"
	// AlertIdleRelease: the instance was released (told only when it was).
	AlertIdleRelease AlertKind = "idle_release"
	// AlertIdleReleaseDryRun: the policy would have released it (release
	// mode dry-run); nothing was done.
	AlertIdleReleaseDryRun AlertKind = "idle_release_dry_run"
	// AlertIdleReleaseFailed: the release was attempted and failed; the
	// instance is still held and billed.
	AlertIdleReleaseFailed AlertKind = "idle_release_failed"
	// AlertBudgetThreshold: a budget crossed one of its thresholds.
	AlertBudgetThreshold AlertKind = "budget_threshold"
	// AlertExemptionRequested: a student asked for an exemption; told to
	// the project's leads and the admins.
	AlertExemptionRequested AlertKind = "exemption_requested"
	// AlertExemptionDecided: a lead granted or refused a student's
	// exemption request; told to the student.
	AlertExemptionDecided AlertKind = "exemption_decided"
)

// AlertKinds lists every kind, in a fixed order.
var AlertKinds = []AlertKind{AlertIdleWarning, AlertIdleReminder, AlertIdleRelease, AlertIdleReleaseDryRun,
	AlertIdleReleaseFailed, AlertBudgetThreshold, AlertExemptionRequested, AlertExemptionDecided}

// Valid reports whether k is one of AlertKinds.
func (k AlertKind) Valid() bool { return slices.Contains(AlertKinds, k) }
