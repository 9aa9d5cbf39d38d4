package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A refused roster file is a 422 whose details are the invoice flow's
// roster problems (invoicing.RosterError) by line and field, with no copy
// of them in between; a good file answers the flow's result.
func TestRosterProblemsAreServedByLineAndField(t *testing.T) {
	f := newFixture(t)
	r := f.do("admin", http.MethodPost, "/api/v1/projects/ai101/roster", "student_id,name\n,Nobody\ns-dave,Dave\n,Nemo\n", "text/csv")
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
	m := r.json(t)
	require.Equal(t, []any{
		map[string]any{"message": "student_id is required", "location": "body", "line": float64(2), "field": "student_id"},
		map[string]any{"message": "student_id is required", "location": "body", "line": float64(4), "field": "student_id"},
	}, m["errors"])

	r = f.do("admin", http.MethodPost, "/api/v1/projects/ai101/roster", "student_id,name\ns-dave,Dave\n", "text/csv")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.JSONEq(t, `{"rows":1,"projects":["ai101"],"added":1,"updated":0,"removed":0,"unchanged":0}`, string(r.Body))
}
