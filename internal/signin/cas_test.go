package signin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/signin"
)

const casService = "https://cardhour.example.edu.cn/auth/cas/callback?lang=zh-CN"

// casServer serves the recorded answer of each ticket (testdata/cas/NAME.xml
// for ticket ST-NAME) at /cas/p3/serviceValidate, after checking that the
// service parameter is exactly the one of the sign-in with state "s1".
func casServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cas/p3/serviceValidate" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		want := "https://cardhour.example.edu.cn/auth/cas/callback?lang=zh-CN&state=s1"
		if got := q.Get("service"); got != want {
			t.Errorf("service parameter %q, want %q", got, want)
		}
		switch ticket := q.Get("ticket"); ticket {
		case "ST-unavailable":
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		default:
			b, err := os.ReadFile("testdata/cas/" + ticket[len("ST-"):] + ".xml")
			if err != nil {
				t.Errorf("ticket %q: %v", ticket, err)
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/xml;charset=UTF-8")
			_, _ = w.Write(b)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newCAS(t *testing.T, srv *httptest.Server, userAttr, groupsAttr string) *signin.CAS {
	t.Helper()
	c, err := signin.NewCAS(signin.CASConfig{
		URL: srv.URL + "/cas/", ServiceURL: casService,
		UserAttribute: userAttr, GroupsAttribute: groupsAttr, HTTPClient: srv.Client(),
	})
	require.NoError(t, err)
	return c
}

func TestCASLoginURL(t *testing.T) {
	c, err := signin.NewCAS(signin.CASConfig{URL: "https://cas.example.edu.cn/cas", ServiceURL: casService})
	require.NoError(t, err)
	u, err := url.Parse(c.LoginURL("s1"))
	require.NoError(t, err)
	require.Equal(t, "https://cas.example.edu.cn/cas/login", u.Scheme+"://"+u.Host+u.Path)
	require.Equal(t, url.Values{"service": {"https://cardhour.example.edu.cn/auth/cas/callback?lang=zh-CN&state=s1"}}, u.Query())
}

func TestCASValidateSuccessWithAttributes(t *testing.T) {
	srv := casServer(t)
	id, err := newCAS(t, srv, "studentId", "memberOf").Validate(context.Background(), "ST-success_attributes", "s1")
	require.NoError(t, err)
	require.Equal(t, "cas", id.Provider)
	require.Equal(t, "2022110315", id.ID, "the configured attribute, not the cas:user")
	require.Equal(t, "张三", id.Name)
	require.Equal(t, "zhangsan@example.edu.cn", id.Email)
	require.Equal(t, []string{"course-dl-2026", "students"}, id.Groups)
	require.Equal(t, []string{"LdapAuthenticationHandler"}, id.Attributes["authenticationMethod"])

	// Without a user attribute the cas:user is the ID.
	id, err = newCAS(t, srv, "", "").Validate(context.Background(), "ST-success_attributes", "s1")
	require.NoError(t, err)
	require.Equal(t, "zhangsan", id.ID)
	require.Empty(t, id.Groups)
}

func TestCASValidateSuccessWithoutAttributes(t *testing.T) {
	srv := casServer(t)
	id, err := newCAS(t, srv, "", "memberOf").Validate(context.Background(), "ST-success", "s1")
	require.NoError(t, err)
	require.Equal(t, signin.Identity{Provider: "cas", ID: "2022110315", Attributes: map[string][]string{}}, id)
	require.Equal(t, "cas:2022110315", id.Person())

	_, err = newCAS(t, srv, "studentId", "").Validate(context.Background(), "ST-success", "s1")
	requireRefusal(t, err, "missing_claim")
}

func TestCASValidateRefusals(t *testing.T) {
	srv := casServer(t)
	c := newCAS(t, srv, "", "")
	for ticket, code := range map[string]string{
		"ST-invalid_ticket":  "bad_ticket",
		"ST-invalid_service": "wrong_service",
		"ST-malformed":       "provider_unavailable",
		"ST-unavailable":     "provider_unavailable",
		"":                   "bad_ticket",
	} {
		_, err := c.Validate(context.Background(), ticket, "s1")
		requireRefusal(t, err, code)
	}
	_, err := c.Validate(context.Background(), "ST-invalid_ticket", "s1")
	require.ErrorContains(t, err, "CAS INVALID_TICKET: Ticket ST-1856339-aA5Yuvrxzpv8Tau1cYQ7 not recognized")

	srv.Close()
	_, err = c.Validate(context.Background(), "ST-success", "s1")
	requireRefusal(t, err, "provider_unavailable")
}

func TestNewCASChecksItsConfig(t *testing.T) {
	_, err := signin.NewCAS(signin.CASConfig{URL: "cas.example.edu.cn", ServiceURL: "/callback"})
	require.ErrorContains(t, err, `url "cas.example.edu.cn"`)
	require.ErrorContains(t, err, `service url "/callback"`)
	_, err = signin.NewCAS(signin.CASConfig{URL: "https://cas.example.edu.cn/cas", ServiceURL: "https://x.example/cb?state=1"})
	require.ErrorContains(t, err, "the state parameter is added at each sign-in")
}

// requireRefusal: err is a Refusal with that code.
func requireRefusal(t *testing.T, err error, code string) {
	t.Helper()
	require.Error(t, err)
	r := signin.AsRefusal(err)
	require.NotNil(t, r, "not a refusal: %v", err)
	require.Equal(t, code, r.Code, "%v", err)
}
