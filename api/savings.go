package api

import (
	"context"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
)

// usageWithSavings is Usage's report for q with what the releases saved
// over its range: the done releases of the state store that q's scope
// selects (reads.AddSavings filters them further and clips them).
func (s *Server) usageWithSavings(ctx context.Context, u Usage, q reads.UsageQuery) (*reads.UsageReport, error) {
	rep, err := u.Usage(ctx, q)
	if err != nil {
		return nil, err
	}
	rels, err := s.doneReleases(ctx, q)
	if err != nil {
		return nil, err
	}
	return u.Savings(ctx, q, rep, rels)
}

// doneReleases lists the releases carried out that can have saved time in
// q's range (finished at most reads.SavingsHorizon before it starts), of
// q's project or user when it names one.
func (s *Server) doneReleases(ctx context.Context, q reads.UsageQuery) ([]reads.Released, error) {
	f := ledger.ReleaseFilter{Status: billing.ReleaseDone, UpdatedSince: q.From.Add(-reads.SavingsHorizon), Limit: ledger.MaxLimit}
	if len(q.Projects) == 1 {
		f.Project = q.Projects[0]
	}
	if len(q.Users) == 1 {
		f.User = q.Users[0]
	}
	var out []reads.Released
	for {
		page, next, err := s.cfg.Ledger.Releases(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			if r.DryRun || !r.UpdatedAt.Before(q.To) {
				continue
			}
			out = append(out, reads.Released{InstanceID: r.InstanceID, Node: r.Node, Project: r.Project, User: r.User, At: r.UpdatedAt})
		}
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}
