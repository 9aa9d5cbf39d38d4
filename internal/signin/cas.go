package signin

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// CASConfig is how to reach a CAS 3.0 server.
type CASConfig struct {
	// URL is the CAS server's base, e.g. https://cas.example.edu.cn/cas.
	URL string
	// ServiceURL is our callback, exactly as registered with CAS; the
	// sign-in's state is added to it as the query parameter "state".
	ServiceURL string
	// UserAttribute names the attribute that is the person's ID ("": the
	// cas:user itself).
	UserAttribute string
	// GroupsAttribute names the attribute listing the person's groups
	// ("": none).
	GroupsAttribute string
	// HTTPClient for serviceValidate (nil: http.DefaultClient).
	HTTPClient *http.Client
}

// CAS signs people in through CAS 3.0: the browser goes to LoginURL, comes
// back to the service URL with a ticket, and Validate asks the server's
// /p3/serviceValidate whether the ticket is good for our service URL.
type CAS struct {
	cfg     CASConfig
	base    string
	service *url.URL
}

// casNS is the CAS protocol's XML namespace.
const casNS = "http://www.yale.edu/tp/cas"

// maxCASResponse bounds what is read of a serviceValidate answer.
const maxCASResponse = 1 << 20

// NewCAS checks cfg (every problem at once).
func NewCAS(cfg CASConfig) (*CAS, error) {
	var errs []error
	base, err := url.Parse(cfg.URL)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		errs = append(errs, fmt.Errorf("url %q: want the CAS server's base, e.g. https://cas.example.edu.cn/cas", cfg.URL))
	}
	service, err := url.Parse(cfg.ServiceURL)
	if err != nil || (service.Scheme != "https" && service.Scheme != "http") || service.Host == "" {
		errs = append(errs, fmt.Errorf("service url %q: want our callback's absolute URL", cfg.ServiceURL))
	} else if service.Query().Has("state") {
		errs = append(errs, fmt.Errorf("service url %q: the state parameter is added at each sign-in", cfg.ServiceURL))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cas: %w", err)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	return &CAS{cfg: cfg, base: strings.TrimSuffix(cfg.URL, "/"), service: service}, nil
}

// serviceFor is the service URL of the sign-in with that state.
func (c *CAS) serviceFor(state string) string {
	u := *c.service
	q := u.Query()
	q.Set("state", state)
	u.RawQuery = q.Encode()
	return u.String()
}

// LoginURL is where the browser goes to sign in: <URL>/login?service=...
func (c *CAS) LoginURL(state string) string {
	return c.base + "/login?" + url.Values{"service": {c.serviceFor(state)}}.Encode()
}

// casResponse is a CAS 3.0 serviceValidate answer.
type casResponse struct {
	XMLName xml.Name    `xml:"http://www.yale.edu/tp/cas serviceResponse"`
	Success *casSuccess `xml:"http://www.yale.edu/tp/cas authenticationSuccess"`
	Failure *casFailure `xml:"http://www.yale.edu/tp/cas authenticationFailure"`
}

type casSuccess struct {
	User       string `xml:"http://www.yale.edu/tp/cas user"`
	Attributes struct {
		Any []struct {
			XMLName xml.Name
			Value   string `xml:",chardata"`
		} `xml:",any"`
	} `xml:"http://www.yale.edu/tp/cas attributes"`
}

type casFailure struct {
	Code    string `xml:"code,attr"`
	Message string `xml:",chardata"`
}

// Validate asks the CAS server whether ticket is good for the service URL
// of the sign-in with that state, and returns Identity{Provider: "cas"}.
func (c *CAS) Validate(ctx context.Context, ticket, state string) (Identity, error) {
	if ticket == "" {
		return Identity{}, Refused("bad_ticket", "no ticket came back from CAS", nil)
	}
	q := url.Values{"service": {c.serviceFor(state)}, "ticket": {ticket}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/p3/serviceValidate?"+q.Encode(), nil)
	if err != nil {
		return Identity{}, Refused("provider_unavailable", "the CAS request could not be made", err)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return Identity{}, Refused("provider_unavailable", "CAS could not be reached", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCASResponse))
	if err != nil {
		return Identity{}, Refused("provider_unavailable", "CAS's answer could not be read", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Identity{}, Refused("provider_unavailable", fmt.Sprintf("CAS answered %s", resp.Status), nil)
	}
	return c.parse(body)
}

// parse reads a serviceValidate answer.
func (c *CAS) parse(body []byte) (Identity, error) {
	var r casResponse
	if err := xml.Unmarshal(body, &r); err != nil {
		return Identity{}, Refused("provider_unavailable", "CAS's answer is not a CAS 3.0 service response", err)
	}
	switch {
	case r.Failure != nil:
		return Identity{}, casRefusal(r.Failure)
	case r.Success == nil:
		return Identity{}, Refused("provider_unavailable", "CAS's answer is neither a success nor a failure", nil)
	}
	s := r.Success
	id := Identity{Provider: "cas", Attributes: map[string][]string{}}
	user := strings.TrimSpace(s.User)
	if user == "" {
		return Identity{}, Refused("provider_unavailable", "CAS's success names no user", nil)
	}
	for _, a := range s.Attributes.Any {
		if a.XMLName.Space == casNS {
			id.Attributes[a.XMLName.Local] = append(id.Attributes[a.XMLName.Local], strings.TrimSpace(a.Value))
		}
	}
	id.ID = user
	if c.cfg.UserAttribute != "" {
		if id.ID = first(id.Attributes[c.cfg.UserAttribute]); id.ID == "" {
			return Identity{}, Refused("missing_claim", "CAS gave no attribute "+c.cfg.UserAttribute+" (the configured ID)", nil)
		}
	}
	if c.cfg.GroupsAttribute != "" {
		id.Groups = id.Attributes[c.cfg.GroupsAttribute]
	}
	id.Name = firstOf(id.Attributes, "displayName", "cn", "name")
	id.Email = firstOf(id.Attributes, "mail", "email")
	return id, nil
}

func casRefusal(f *casFailure) error {
	err := fmt.Errorf("CAS %s: %s", f.Code, strings.TrimSpace(f.Message))
	switch f.Code {
	case "INVALID_SERVICE":
		return Refused("wrong_service", "the CAS ticket was issued for another service", err)
	case "INTERNAL_ERROR":
		return Refused("provider_unavailable", "CAS failed to validate the ticket", err)
	}
	// INVALID_TICKET, INVALID_TICKET_SPEC, INVALID_REQUEST,
	// UNAUTHORIZED_SERVICE_PROXY, INVALID_PROXY_CALLBACK and the rest.
	return Refused("bad_ticket", "CAS did not accept the ticket", err)
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

func firstOf(attrs map[string][]string, names ...string) string {
	for _, n := range names {
		if v := first(attrs[n]); v != "" {
			return v
		}
	}
	return ""
}
