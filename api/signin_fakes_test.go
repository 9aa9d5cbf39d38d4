package api_test

import (
	"context"
	"net/url"
	"slices"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/signin"
)

// Test doubles of the providers: the real ones are internal/signin's, tested
// there and against real servers (cmd/cardhour's sign-in tests).

// fakeMapper maps staff by ID and makes rostered people students.
type fakeMapper struct {
	staff map[string][]ledger.Grant // ID → grants
}

func (m fakeMapper) Grants(ctx context.Context, id signin.Identity, rosters signin.RosterLookup) ([]ledger.Grant, error) {
	gs := slices.Clone(m.staff[id.ID])
	projects, err := rosters(ctx, id.ID)
	if err != nil {
		return nil, err
	}
	for _, p := range projects {
		gs = append(gs, ledger.Grant{Role: ledger.RoleStudent, Project: p, User: id.ID, Via: ledger.GrantViaRoster})
	}
	return gs, nil
}

func (fakeMapper) Help() string   { return "Ask the HPC office, room 301." }
func (fakeMapper) HelpZH() string { return "请联系高性能计算办公室（301 室）。" }

// fakeOIDC vouches, at the callback, for whoever the code names ("code-ID"),
// and refuses "forged" with bad_token; it checks that the verifier and the
// nonce it was given at the start come back.
type fakeOIDC struct {
	issued map[string][2]string // state → verifier, nonce
}

func (o *fakeOIDC) AuthURL(state, nonce, verifier string) string {
	o.issued[state] = [2]string{verifier, nonce}
	return "https://idp.example.edu/authorize?" + url.Values{"state": {state}, "nonce": {nonce}}.Encode()
}

func (o *fakeOIDC) Exchange(_ context.Context, code, verifier, nonce string) (signin.Identity, string, error) {
	ok := false
	for _, vn := range o.issued {
		if vn == [2]string{verifier, nonce} {
			ok = true
		}
	}
	if !ok {
		return signin.Identity{}, "", signin.Refused("bad_token", "verifier or nonce not the ones issued", nil)
	}
	if code == "forged" {
		return signin.Identity{}, "", signin.Refused("bad_token", "the ID token's signature is not the provider's", nil)
	}
	return signin.Identity{Provider: "oidc", ID: code[len("code-"):], Name: "Person " + code}, "id-token-of-" + code, nil
}

func (o *fakeOIDC) EndSessionURL(hint, post string) string {
	return "https://idp.example.edu/logout?" + url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {post}}.Encode()
}

type fakeLDAP struct {
	passwords map[string]string
	gone      map[string]bool // people taken out of the directory since
}

func (l fakeLDAP) Lookup(_ context.Context, id string) (signin.Identity, error) {
	if l.gone[id] {
		return signin.Identity{}, signin.Refused("gone", "the directory no longer has "+id, nil)
	}
	return signin.Identity{Provider: "ldap", ID: id}, nil
}

func (l fakeLDAP) Authenticate(_ context.Context, user, password string) (signin.Identity, error) {
	if p, ok := l.passwords[user]; !ok || p != password || password == "" {
		return signin.Identity{}, signin.Refused("bad_credentials", "wrong user name or password", nil)
	}
	return signin.Identity{Provider: "ldap", ID: user}, nil
}

type fakeCAS struct{}

func (fakeCAS) LoginURL(state string) string {
	return "https://cas.example.edu/cas/login?service=" + url.QueryEscape("http://example.com/auth/cas/callback?state="+state)
}

func (fakeCAS) Validate(_ context.Context, ticket, _ string) (signin.Identity, error) {
	if ticket == "ST-other-service" {
		return signin.Identity{}, signin.Refused("wrong_service", "the ticket was issued for another service", nil)
	}
	return signin.Identity{Provider: "cas", ID: ticket[len("ST-"):]}, nil
}

// signInFor is the fixture's sign-in: staff t0042 leads ai101, f0007 is in
// finance; the roster makes s-alice a student of ai101.
func signInFor(store api.SignInStore) *api.SignIn {
	return &api.SignIn{Store: store,
		Mapping: fakeMapper{staff: map[string][]ledger.Grant{
			"t0042": {{Role: ledger.RoleLead, Project: "ai101"}},
			"f0007": {{Role: ledger.RoleFinance}},
			"root":  {{Role: ledger.RoleAdmin}},
		}},
		OIDC: &fakeOIDC{issued: map[string][2]string{}}, OIDCName: "Campus account",
		LDAP: fakeLDAP{passwords: map[string]string{"t0042": "lead-pass", "s-alice": "alice-pass"}, gone: map[string]bool{}},
		CAS:  fakeCAS{},
		Demo: []api.DemoPerson{{Label: "Alice (student)", Identity: signin.Identity{Provider: "demo", ID: "s-alice"}}},
	}
}
