package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"
)

// The roster, the billing runs and the export runs: what the invoicing
// flow (internal/invoicing) keeps besides invoices. They are part of Store;
// this file holds their types and the checks both implementations share.

// Student is one row of a project's roster. A student ID may appear in
// several projects (courses); the natural key is (Project, User). The API
// serves it as it is (its JSON is the students list's).
type Student struct {
	Project string `json:"project"`
	User    string `json:"user"` // the student ID, as usage records name the holder
	Name    string `json:"name"`
	Email   string `json:"email,omitempty"`
	IM      string `json:"im,omitempty"` // an instant-messaging handle for alerts
	// UpdatedAt is the store's; the API serves a student without it.
	UpdatedAt time.Time `json:"-"`
}

// RosterMode says what an import does with the students already stored.
type RosterMode string

// The roster import modes.
const (
	// RosterReplace: the import is the whole roster of each of its
	// projects; stored students of those projects that it lacks are removed.
	RosterReplace RosterMode = "replace"
	// RosterMerge: students are added or updated, none removed.
	RosterMerge RosterMode = "merge"
)

// RosterImport is one import, applied all or nothing.
type RosterImport struct {
	Mode RosterMode
	// Projects are the projects the import is about: in replace mode each
	// is replaced whole (an empty import of a project empties it). Every
	// student's project must be one of them.
	Projects []string
	Students []Student
}

// RosterChange counts what an import changed.
type RosterChange struct {
	Added     int `json:"added"`
	Updated   int `json:"updated"`
	Removed   int `json:"removed"`
	Unchanged int `json:"unchanged"`
}

// StudentFilter selects roster rows; zero fields match everything.
type StudentFilter struct {
	Project string
	User    string
	Cursor  string
	Limit   int
}

// CheckRosterImport reports every problem with r at once, naming the row
// (1-based, in the order given).
func CheckRosterImport(r *RosterImport) error {
	var errs []error
	if r.Mode != RosterReplace && r.Mode != RosterMerge {
		errs = append(errs, fmt.Errorf("mode %q: want replace or merge", r.Mode))
	}
	projects := map[string]bool{}
	for _, p := range r.Projects {
		if strings.TrimSpace(p) == "" {
			errs = append(errs, errors.New("an empty project in the import's projects"))
		}
		projects[p] = true
	}
	if len(r.Projects) == 0 {
		errs = append(errs, errors.New("projects: at least one is required"))
	}
	seen := map[[2]string]int{}
	for i, s := range r.Students {
		row := i + 1
		if strings.TrimSpace(s.User) == "" {
			errs = append(errs, fmt.Errorf("student %d: user is required", row))
		}
		if !projects[s.Project] {
			errs = append(errs, fmt.Errorf("student %d (%s): project %q is not one of the import's projects %q", row, s.User, s.Project, r.Projects))
		}
		if s.Email != "" {
			if a, err := mail.ParseAddress(s.Email); err != nil || a.Address != s.Email {
				errs = append(errs, fmt.Errorf("student %d (%s): email %q is not an address", row, s.User, s.Email))
			}
		}
		k := [2]string{s.Project, s.User}
		if first, dup := seen[k]; dup {
			errs = append(errs, fmt.Errorf("student %d: %s/%s repeats student %d", row, s.Project, s.User, first))
		} else {
			seen[k] = row
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: roster import: %w", ErrInvalidArgument, errors.Join(errs...))
	}
	return nil
}

// BillingRun records one billing run of a period: who ran it, when, what it
// saw and its report (drafts, kept finalized invoices, data quality and the
// difference from finalized revisions), as the invoicing flow wrote it.
type BillingRun struct {
	ID             int64
	Period         string // YYYY-MM
	Actor          string
	CatalogVersion int64
	DataCutoff     time.Time
	Report         json.RawMessage // nil in lists
	CreatedAt      time.Time
}

// BillingRunFilter selects billing runs; zero fields match everything.
type BillingRunFilter struct {
	Period string
	Cursor string
	Limit  int
}

// CheckBillingRun reports every problem with r at once.
func CheckBillingRun(r *BillingRun) error {
	var errs []error
	if !periodRE.MatchString(r.Period) {
		errs = append(errs, fmt.Errorf("period %q: want YYYY-MM", r.Period))
	}
	if r.CatalogVersion <= 0 {
		errs = append(errs, fmt.Errorf("catalog version %d: want a stored version (1 or more)", r.CatalogVersion))
	}
	if r.DataCutoff.IsZero() {
		errs = append(errs, errors.New("data cut-off is required"))
	}
	if !json.Valid(r.Report) {
		errs = append(errs, errors.New("report is not valid JSON"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: billing run: %w", ErrInvalidArgument, errors.Join(errs...))
	}
	return nil
}

// ExportKey is an export run's natural key: one period sent to one target
// (a directory, a webhook), unique in the store.
type ExportKey struct {
	Period string // YYYY-MM
	Target string // e.g. "dir", "webhook"
}

// ExportStatus is where an export run is.
type ExportStatus string

// Export run statuses: pending (recorded before the action: an outbox),
// done (never repeated), failed (retried by the next attempt).
const (
	ExportPending ExportStatus = "pending"
	ExportDone    ExportStatus = "done"
	ExportFailed  ExportStatus = "failed"
)

// ExportFile is one file an export wrote or sent.
type ExportFile struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// ExportRun is the record of exporting one period to one target.
type ExportRun struct {
	ID int64
	ExportKey
	Status    ExportStatus
	Files     []ExportFile
	Attempts  int
	LastError string
	CreatedAt time.Time
	UpdatedAt time.Time
	DoneAt    time.Time // zero unless done
}

// ExportRunFilter selects export runs; zero fields match everything.
type ExportRunFilter struct {
	Period string
	Target string
	Status ExportStatus
	Cursor string
	Limit  int
}

// CheckExportKey rejects a bad period or an empty target.
func CheckExportKey(k ExportKey) error {
	var errs []error
	if !periodRE.MatchString(k.Period) {
		errs = append(errs, fmt.Errorf("period %q: want YYYY-MM", k.Period))
	}
	if strings.TrimSpace(k.Target) == "" {
		errs = append(errs, errors.New("target is required"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: export %s/%s: %w", ErrInvalidArgument, k.Period, k.Target, errors.Join(errs...))
	}
	return nil
}
