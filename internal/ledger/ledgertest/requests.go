package ledgertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
)

// testExemptionRequests: a student's request is stored pending; a grant
// creates the exemption asked for (in force, by the granter) and records
// it; a refusal keeps its reason; a decided request is not decided again;
// filters and the audit log.
func testExemptionRequests(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	friday := t0.Add(72 * time.Hour)
	r := get(s.RequestExemption(ctx, "student:s1", ledger.NewExemptionRequest{Project: "nlp", User: "s1", InstanceID: "gpu-7",
		Until: friday, Reason: "training over the weekend"}))(t)
	if r.ID == 0 || r.Status != ledger.RequestPending || r.RequestedBy != "student:s1" || !r.Until.Equal(friday) || !r.CreatedAt.Equal(t0) {
		t.Fatalf("request: %+v", r)
	}
	all := get(s.RequestExemption(ctx, "student:s2", ledger.NewExemptionRequest{Project: "nlp", User: "s2", Until: friday, Reason: "exam week"}))(t)
	other := get(s.RequestExemption(ctx, "student:s3", ledger.NewExemptionRequest{Project: "cv", User: "s3", Until: friday, Reason: "demo"}))(t)
	list := func(f ledger.ExemptionRequestFilter) []int64 {
		page, _ := get2(s.ExemptionRequests(ctx, f))(t)
		var ids []int64
		for _, p := range page {
			ids = append(ids, p.ID)
		}
		return ids
	}
	if got := list(ledger.ExemptionRequestFilter{Project: "nlp", Status: ledger.RequestPending}); !slices.Equal(got, []int64{all.ID, r.ID}) {
		t.Fatalf("pending in nlp: %v", got)
	}
	if got := list(ledger.ExemptionRequestFilter{User: "s3"}); !slices.Equal(got, []int64{other.ID}) {
		t.Fatalf("of s3: %v", got)
	}

	clock.Advance(time.Minute)
	gr := get3(s.GrantExemptionRequest(ctx, "lead:nlp", r.ID, "ok for the weekend"))(t)
	ex := get(s.Exemption(ctx, gr.ExemptionID))(t)
	if gr.Status != ledger.RequestGranted || gr.DecidedBy != "lead:nlp" || !gr.DecidedAt.Equal(t0.Add(time.Minute)) || gr.Answer != "ok for the weekend" {
		t.Fatalf("granted: %+v", gr)
	}
	if ex.Project != "nlp" || ex.User != "s1" || ex.InstanceID != "gpu-7" || !ex.Until.Equal(friday) || ex.GrantedBy != "lead:nlp" ||
		!strings.HasPrefix(ex.Reason, "training over the weekend") || !ex.ActiveAt(t0.Add(2*time.Minute)) {
		t.Fatalf("the exemption granted: %+v", ex)
	}
	_, _, err := s.GrantExemptionRequest(ctx, "lead:nlp", r.ID, "")
	wantErr(t, err, ledger.ErrInvalidTransition, "granting twice")
	_, err = s.RefuseExemptionRequest(ctx, "lead:nlp", r.ID, "no")
	wantErr(t, err, ledger.ErrInvalidTransition, "refusing a granted request")
	if n, _ := get2(s.Exemptions(ctx, ledger.ExemptionFilter{Project: "nlp"}))(t); len(n) != 1 {
		t.Fatalf("exemptions after a second grant: %d, want 1", len(n))
	}

	_, err = s.RefuseExemptionRequest(ctx, "lead:nlp", all.ID, " ")
	wantErr(t, err, ledger.ErrInvalidArgument, "a refusal without a reason")
	rf := get(s.RefuseExemptionRequest(ctx, "lead:nlp", all.ID, "the course needs the cards"))(t)
	if rf.Status != ledger.RequestRefused || rf.Answer != "the course needs the cards" || rf.ExemptionID != 0 {
		t.Fatalf("refused: %+v", rf)
	}
	if one := get(s.ExemptionRequest(ctx, all.ID))(t); one.Status != ledger.RequestRefused || one.DecidedBy != "lead:nlp" || one.Reason != "exam week" {
		t.Fatalf("read back: %+v", one)
	}
	if got := list(ledger.ExemptionRequestFilter{UpdatedSince: t0.Add(time.Minute)}); !slices.Equal(got, []int64{all.ID, r.ID}) {
		t.Fatalf("changed since the decisions: %v", got)
	}
	_, err = s.ExemptionRequest(ctx, 999)
	wantErr(t, err, ledger.ErrNotFound, "no such request")
	_, err = s.RequestExemption(ctx, "student:s1", ledger.NewExemptionRequest{Project: "nlp", Until: t0, Reason: ""})
	wantErr(t, err, ledger.ErrInvalidArgument, "a request without user, reason, in the past")
	if err == nil || !strings.Contains(err.Error(), "user is required") || !strings.Contains(err.Error(), "want a time after now") {
		t.Fatalf("request errors: %v", err)
	}
	_, _, err = s.ExemptionRequests(ctx, ledger.ExemptionRequestFilter{Status: "maybe"})
	wantErr(t, err, ledger.ErrInvalidArgument, "an unknown status")
	if got := auditActions(t, s, ledger.AuditFilter{Object: fmt.Sprintf("exemption_request/%d", r.ID)}); !slices.Equal(got,
		[]string{"exemption_request.granted", "exemption_request.create"}) {
		t.Fatalf("audit of the request: %v", got)
	}
	if got := auditActions(t, s, ledger.AuditFilter{Object: fmt.Sprintf("exemption/%d", ex.ID)}); !slices.Equal(got, []string{"exemption.grant"}) {
		t.Fatalf("audit of the exemption: %v", got)
	}
}
