package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/ledger"
)

// The students list serves the roster's own rows (ledger.Student): the
// body is byte for byte what the API's former copy served, without the
// store's update time.
func TestStudentsServeTheRosterRows(t *testing.T) {
	f := newFixture(t)
	f.flow.stud = []ledger.Student{
		{Project: "ai101", User: "s-alice", Name: "Alice Zhang", Email: "alice@example.edu", IM: "dingtalk:0412", UpdatedAt: now.Add(-time.Hour)},
		{Project: "ai101", User: "s-bob", Name: "Bob Li", UpdatedAt: now},
	}
	r := f.do("admin", http.MethodGet, "/api/v1/projects/ai101/students", "", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, `{"items":[{"project":"ai101","user":"s-alice","name":"Alice Zhang","email":"alice@example.edu","im":"dingtalk:0412"},`+
		`{"project":"ai101","user":"s-bob","name":"Bob Li"}],"next_cursor":""}`+"\n", string(r.Body))

	r = f.do("admin", http.MethodGet, "/api/v1/projects/nlp-lab/students", "", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, `{"items":[],"next_cursor":""}`+"\n", string(r.Body))
}
