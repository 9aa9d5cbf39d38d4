//go:build !collector

package main

import (
	_ "embed"
	"time"

	"github.com/cardhour/cardhour/api"
	"github.com/cardhour/cardhour/internal/signin"
)

// The demo's built-in sign-in: one click signs a newcomer in as a person of
// the simulated lab, through the same role mapping and sessions a site's
// identity provider uses. Demo only: there is no password.

//go:embed demodata/signin.yaml
var demoMapping []byte

// demoPeople are the sign-in page's one-click people.
var demoPeople = []api.DemoPerson{
	{Label: "Li Hua 李华 · student, cv-lab", Identity: signin.Identity{Provider: "demo", ID: "2022110315", Name: "Li Hua 李华"}},
	{Label: "Zhao Lei 赵磊 · student, ai101", Identity: signin.Identity{Provider: "demo", ID: "2025010104", Name: "Zhao Lei 赵磊", Groups: []string{"course-ai101"}}},
	{Label: "Prof. Zhang Wei 张伟 · lead, cv-lab", Identity: signin.Identity{Provider: "demo", ID: "t0042", Name: "Prof. Zhang Wei 张伟"}},
	{Label: "Dr. Wang Fang 王芳 · lead, ai101 and dl-course", Identity: signin.Identity{Provider: "demo", ID: "t0100", Name: "Dr. Wang Fang 王芳"}},
	{Label: "Chen Jing 陈静 · finance", Identity: signin.Identity{Provider: "demo", ID: "f0007", Name: "Chen Jing 陈静"}},
}

// demoSignIn is the demo's sign-in over its state store. The store runs on
// the simulated clock, speed times faster than the wall's: a session's
// limits are stretched alike, so that it lasts as long as a real one.
func demoSignIn(speed float64) func(api.SignInStore) (*api.SignIn, error) {
	return func(store api.SignInStore) (*api.SignIn, error) {
		m, err := signin.ParseMapping("demodata/signin.yaml", demoMapping)
		if err != nil {
			return nil, err
		}
		// Capped far below time.Duration's range at the fastest speeds.
		stretch := func(d time.Duration) time.Duration {
			return time.Duration(min(float64(d)*max(speed, 1), float64(100*365*24*time.Hour)))
		}
		return &api.SignIn{Store: store, Mapping: m, Demo: demoPeople,
			Idle: stretch(api.DefaultSessionIdle), TTL: stretch(api.DefaultSessionTTL)}, nil
	}
}
