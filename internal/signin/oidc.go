package signin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCConfig is how to reach an OpenID provider and read a person from its
// ID token.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL; its discovery document is read
	// at start.
	Issuer                 string
	ClientID, ClientSecret string
	// RedirectURL is our callback, exactly as registered.
	RedirectURL string
	// Scopes asked (default openid, profile, email, and groups when
	// GroupsClaim is set); openid is always asked.
	Scopes []string
	// UserClaim is the claim that is the person's ID (default
	// preferred_username); GroupsClaim lists their groups (default groups).
	UserClaim, GroupsClaim string
	// HTTPClient for discovery, the keys and the token endpoint (nil:
	// http.DefaultClient).
	HTTPClient *http.Client
}

// OIDC is an OpenID Connect relying party: the authorization code flow
// with PKCE (S256) and a nonce.
type OIDC struct {
	cfg        OIDCConfig
	provider   *oidc.Provider
	verifier   *oidc.IDTokenVerifier
	oauth      oauth2.Config
	endSession string
	client     *http.Client
}

// NewOIDC reads the provider's discovery document; an unreachable or
// inconsistent issuer is an error naming it.
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	var errs []error
	if cfg.Issuer == "" {
		errs = append(errs, errors.New("issuer is required"))
	}
	if cfg.ClientID == "" {
		errs = append(errs, errors.New("client ID is required"))
	}
	if u, err := url.Parse(cfg.RedirectURL); err != nil || !u.IsAbs() {
		errs = append(errs, fmt.Errorf("redirect URL %q: want our callback's absolute URL", cfg.RedirectURL))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("oidc: %w", err)
	}
	scopes := cfg.Scopes
	if len(scopes) == 0 {
		scopes = []string{oidc.ScopeOpenID, "profile", "email"}
		if cfg.GroupsClaim != "" {
			scopes = append(scopes, "groups")
		}
	} else if !slices.Contains(scopes, oidc.ScopeOpenID) {
		scopes = append([]string{oidc.ScopeOpenID}, scopes...)
	}
	defaults(&cfg.UserClaim, "preferred_username")
	defaults(&cfg.GroupsClaim, "groups")
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, cfg.HTTPClient), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: the issuer %s: %w", cfg.Issuer, err)
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := provider.Claims(&extra); err != nil {
		return nil, fmt.Errorf("oidc: the issuer %s's discovery document: %w", cfg.Issuer, err)
	}
	return &OIDC{
		cfg:      cfg,
		provider: provider,
		verifier: provider.Verifier(&oidc.Config{ClientID: cfg.ClientID}),
		oauth: oauth2.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL,
			Endpoint: provider.Endpoint(), Scopes: scopes,
		},
		endSession: extra.EndSession,
		client:     cfg.HTTPClient,
	}, nil
}

// NewVerifier is a new PKCE code verifier (kept with the login attempt).
func NewVerifier() string { return oauth2.GenerateVerifier() }

// AuthURL is where the browser goes to sign in, carrying state, the nonce
// and the S256 challenge of verifier.
func (o *OIDC) AuthURL(state, nonce, verifier string) string {
	return o.oauth.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
}

// Exchange trades the code the browser brought back for an ID token,
// verifies it (signature, issuer, audience, expiry, nonce) and reads the
// person from it: Identity{Provider: "oidc"}, and the raw ID token (the
// logout hint).
func (o *OIDC) Exchange(ctx context.Context, code, verifier, nonce string) (Identity, string, error) {
	if code == "" {
		return Identity{}, "", Refused("bad_token", "no authorization code came back", nil)
	}
	ctx = oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, o.client), o.client)
	tok, err := o.oauth.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			return Identity{}, "", Refused("bad_token", "the provider did not accept the authorization code", err)
		}
		return Identity{}, "", Refused("provider_unavailable", "the provider's token endpoint could not be asked", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, "", Refused("bad_token", "the provider's answer holds no ID token", nil)
	}
	idt, err := o.verifier.Verify(ctx, raw)
	if err != nil {
		return Identity{}, "", verifyRefusal(err)
	}
	if nonce == "" || idt.Nonce != nonce {
		return Identity{}, "", Refused("bad_token", "the ID token's nonce is not this sign-in's", nil)
	}
	id, err := o.identity(idt)
	if err != nil {
		return Identity{}, "", err
	}
	return id, raw, nil
}

// verifyRefusal names why go-oidc refused an ID token.
func verifyRefusal(err error) error {
	var expired *oidc.TokenExpiredError
	msg := err.Error()
	switch {
	case errors.As(err, &expired):
		return Refused("bad_token", "the ID token has expired", err)
	case strings.Contains(msg, "fetching keys"):
		return Refused("provider_unavailable", "the provider's signing keys could not be fetched", err)
	case strings.Contains(msg, "issued by a different provider"):
		return Refused("unknown_issuer", "the ID token was issued by another provider", err)
	case strings.Contains(msg, "expected audience"):
		return Refused("wrong_audience", "the ID token is for another client", err)
	}
	return Refused("bad_token", "the ID token is not valid (signature or format)", err)
}

// identity reads the claims of a verified ID token.
func (o *OIDC) identity(idt *oidc.IDToken) (Identity, error) {
	var raw json.RawMessage
	if err := idt.Claims(&raw); err != nil {
		return Identity{}, Refused("bad_token", "the ID token's claims are not JSON", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil {
		return Identity{}, Refused("bad_token", "the ID token's claims are not a JSON object", err)
	}
	id := Identity{Provider: "oidc", Attributes: map[string][]string{}}
	switch v := claims[o.cfg.UserClaim].(type) {
	case string:
		id.ID = v
	case json.Number:
		id.ID = v.String()
	}
	if strings.TrimSpace(id.ID) == "" {
		return Identity{}, Refused("missing_claim", "the ID token has no "+o.cfg.UserClaim+" (the configured ID claim)", nil)
	}
	id.Groups = claimStrings(claims[o.cfg.GroupsClaim])
	id.Name = first(claimStrings(claims["name"]))
	id.Email = first(claimStrings(claims["email"]))
	for k, v := range claims {
		if k == o.cfg.UserClaim || k == o.cfg.GroupsClaim {
			continue
		}
		if vs := claimStrings(v); len(vs) > 0 {
			id.Attributes[k] = vs
		}
	}
	return id, nil
}

// claimStrings is a claim as strings: a string, number or boolean, or a
// list of them; nothing for anything else.
func claimStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case json.Number:
		return []string{v.String()}
	case bool:
		return []string{fmt.Sprint(v)}
	case []any:
		var out []string
		for _, x := range v {
			if s := claimStrings(x); len(s) == 1 {
				out = append(out, s[0])
			}
		}
		return out
	}
	return nil
}

// EndSessionURL is the provider's RP-initiated logout URL ("" when its
// discovery document names no end_session_endpoint).
func (o *OIDC) EndSessionURL(idTokenHint, postLogoutRedirect string) string {
	if o.endSession == "" {
		return ""
	}
	u, err := url.Parse(o.endSession)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("client_id", o.cfg.ClientID)
	if idTokenHint != "" {
		q.Set("id_token_hint", idTokenHint)
	}
	if postLogoutRedirect != "" {
		q.Set("post_logout_redirect_uri", postLogoutRedirect)
	}
	u.RawQuery = q.Encode()
	return u.String()
}
