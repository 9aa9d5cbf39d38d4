package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// What the watcher (internal/watch) recorded in the state store, scoped by
// role: admin and finance see everything; a lead its project; a student
// only the alerts, releases, exemptions and budgets about themself.
//
// Writes: acknowledging an alert (anyone who may see it); exemptions are
// granted and revoked by admin, finance and the project's lead; budgets are
// set by admin and finance, and a lead may set and delete the student
// budgets of its project (sharing out the project's ceiling) but not the
// project budget itself. Students write neither.

// AlertBody is an alert the watcher recorded.
// Not ledger.Alert: its status is computed (acked or not) and an alert
// without facts shows {}.
type AlertBody struct {
	ID          int64           `json:"id"`
	Key         string          `json:"key" doc:"natural key: the alert is recorded once under it"`
	Kind        string          `json:"kind" enum:"idle_warning,idle_reminder,idle_release,idle_release_dry_run,idle_release_failed,budget_threshold,exemption_requested,exemption_decided"`
	Project     string          `json:"project"`
	User        string          `json:"user,omitempty"`
	InstanceID  string          `json:"instance_id,omitempty"`
	StreakStart time.Time       `json:"streak_start,omitzero" doc:"idle alerts: start of the idle streak"`
	BudgetID    int64           `json:"budget_id,omitempty" doc:"budget alerts"`
	Period      string          `json:"period,omitempty" doc:"budget alerts: the month (YYYY-MM) or term"`
	Threshold   int             `json:"threshold,omitempty" doc:"budget alerts: percent of the limit"`
	Facts       json.RawMessage `json:"facts" doc:"what the message said: instance, held and idle since, cost, what comes next"`
	Status      string          `json:"status" enum:"open,acked"`
	CreatedAt   time.Time       `json:"created_at"`
	AckedBy     string          `json:"acked_by,omitempty"`
	AckedAt     time.Time       `json:"acked_at,omitzero"`
}

func alertBody(a ledger.Alert) AlertBody {
	b := AlertBody{ID: a.ID, Key: a.Key, Kind: string(a.Kind), Project: a.Project, User: a.User, InstanceID: a.InstanceID,
		StreakStart: a.StreakStart, BudgetID: a.BudgetID, Period: a.Period, Threshold: a.Threshold, Facts: a.Facts,
		Status: "open", CreatedAt: a.CreatedAt, AckedBy: a.AckedBy, AckedAt: a.AckedAt}
	if !a.AckedAt.IsZero() {
		b.Status = "acked"
	}
	if len(b.Facts) == 0 {
		b.Facts = json.RawMessage(`{}`)
	}
	return b
}

// DeliveryBody is one message of an alert to one recipient on one channel.
// Not ledger.Delivery: the next attempt is shown only while pending.
type DeliveryBody struct {
	ID            int64     `json:"id"`
	AlertID       int64     `json:"alert_id"`
	Channel       string    `json:"channel"`
	Recipient     string    `json:"recipient"`
	Status        string    `json:"status" enum:"pending,sent,failed" doc:"failed: for good (a permanent error, or retried for the whole retry horizon, watch.delivery_retry_for); an admin can re-send it"`
	Attempts      int       `json:"attempts"`
	LastError     string    `json:"last_error,omitempty" doc:"the error of the last failed attempt"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero" doc:"pending: when it is tried (again)"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	SentAt        time.Time `json:"sent_at,omitzero"`
}

func deliveryBody(d ledger.Delivery) DeliveryBody {
	b := DeliveryBody{ID: d.ID, AlertID: d.AlertID, Channel: d.Channel, Recipient: d.Recipient, Status: string(d.Status),
		Attempts: d.Attempts, LastError: d.LastError, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, SentAt: d.SentAt}
	if d.Status == ledger.DeliveryPending {
		b.NextAttemptAt = d.NextAttemptAt
	}
	return b
}

// ReleaseBody is a release the watcher recorded (before acting on it).
// Not ledger.Release: a release without evidence shows {}, not null.
type ReleaseBody struct {
	ID          int64           `json:"id"`
	Key         string          `json:"key"`
	InstanceID  string          `json:"instance_id"`
	Node        string          `json:"node,omitempty"`
	Project     string          `json:"project,omitempty"`
	User        string          `json:"user,omitempty"`
	StreakStart time.Time       `json:"streak_start"`
	DryRun      bool            `json:"dry_run"`
	Status      string          `json:"status" enum:"pending,done,dry_run,failed" doc:"done only when something was released"`
	Action      string          `json:"action,omitempty" doc:"what was (dry run: would have been) done"`
	Attempts    int             `json:"attempts"`
	LastError   string          `json:"last_error,omitempty"`
	RetryAt     time.Time       `json:"retry_at,omitzero" doc:"failed: when it is tried again; absent: failed for good"`
	Evidence    json.RawMessage `json:"evidence" doc:"the idle streak and its samples"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

func releaseBody(r ledger.Release) ReleaseBody {
	b := ReleaseBody{ID: r.ID, Key: r.Key, InstanceID: r.InstanceID, Node: r.Node, Project: r.Project, User: r.User,
		StreakStart: r.StreakStart, DryRun: r.DryRun, Status: string(r.Status), Action: r.Action, Attempts: r.Attempts,
		LastError: r.LastError, RetryAt: r.RetryAt, Evidence: r.Evidence, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if len(b.Evidence) == 0 {
		b.Evidence = json.RawMessage(`{}`)
	}
	return b
}

// ExemptionBody is an exemption from the idle policy.
// Not ledger.Exemption: active is computed from the server's clock.
type ExemptionBody struct {
	ID         int64     `json:"id"`
	Project    string    `json:"project"`
	User       string    `json:"user,omitempty" doc:"one student; absent: every student of the project"`
	InstanceID string    `json:"instance_id,omitempty" doc:"one instance; absent: every instance"`
	Until      time.Time `json:"until"`
	Reason     string    `json:"reason"`
	GrantedBy  string    `json:"granted_by"`
	CreatedAt  time.Time `json:"created_at"`
	RevokedBy  string    `json:"revoked_by,omitempty"`
	RevokedAt  time.Time `json:"revoked_at,omitzero"`
	Active     bool      `json:"active" doc:"in force now"`
}

func (s *Server) exemptionBody(e ledger.Exemption) ExemptionBody {
	return ExemptionBody{ID: e.ID, Project: e.Project, User: e.User, InstanceID: e.InstanceID, Until: e.Until, Reason: e.Reason,
		GrantedBy: e.GrantedBy, CreatedAt: e.CreatedAt, RevokedBy: e.RevokedBy, RevokedAt: e.RevokedAt, Active: e.ActiveAt(s.now())}
}

// BudgetBody is a budget (配额).
// Not ledger.Budget: the limit is shown as text with the currency's
// minor digits (LimitText), and no thresholds as [].
type BudgetBody struct {
	ID         int64             `json:"id"`
	Scope      string            `json:"scope" enum:"project,student"`
	Project    string            `json:"project"`
	User       string            `json:"user,omitempty"`
	Period     string            `json:"period" enum:"month,term"`
	Unit       string            `json:"unit" enum:"money,card_hours"`
	Limit      string            `json:"limit" doc:"decimal string: money in the catalog's currency with its minor digits (880.00), or card-hours as set"`
	Thresholds []int             `json:"thresholds" doc:"percent of the limit that alert, ascending"`
	Action     string            `json:"action" enum:"warn,release" doc:"at 100 %: warn only, or also release the held instances"`
	CreatedBy  string            `json:"created_by"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	Status     *BudgetStatusBody `json:"status,omitempty" doc:"what the watcher last measured in the budget's current period; absent when it has not measured this period yet"`
}

// BudgetStatusBody is a budget's use in its current period (billing.ProjectBudget).
type BudgetStatusBody struct {
	Period      string    `json:"period" doc:"the month (YYYY-MM) or the term's ID"`
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end" doc:"exclusive"`
	AsOf        time.Time `json:"as_of" doc:"when the watcher measured it"`
	Used        string    `json:"used" doc:"decimal string in the unit: money as the month-to-date bill charges it (for a term: the list price of the held hours), card-hours to 0.01"`
	Left        string    `json:"left" doc:"limit - used; negative when over"`
	Percent     int64     `json:"percent" doc:"used / limit x 100, rounded down"`
	Reached     bool      `json:"reached" doc:"used >= limit"`
	Forecast    string    `json:"forecast" doc:"the use at the period's end if it goes on at the average rate of the period so far (used x period / elapsed, at as_of)"`
	ReachesAt   time.Time `json:"reaches_limit_at,omitzero" doc:"when that rate reaches the limit, if before the period's end and not yet reached"`
}

// budgetBody is b as the API shows it at now.
func budgetBody(b ledger.Budget, now time.Time) BudgetBody {
	out := BudgetBody{ID: b.ID, Scope: string(b.Scope), Project: b.Project, User: b.User, Period: string(b.Period), Unit: string(b.Unit),
		Limit: b.LimitText(), Thresholds: b.Thresholds, Action: string(b.Action), CreatedBy: b.CreatedBy, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt}
	if out.Thresholds == nil {
		out.Thresholds = []int{}
	}
	if u := b.Usage; u.Period != "" && now.Before(u.End) {
		p := billing.ProjectBudget(b.Unit, b.LimitDecimal(), u.Money, u.CardMS, u.Start, u.End, u.AsOf)
		out.Status = &BudgetStatusBody{Period: u.Period, PeriodStart: u.Start, PeriodEnd: u.End, AsOf: u.AsOf,
			Used: b.Unit.Format(p.Used), Left: b.Unit.Format(p.Left), Percent: p.Percent, Reached: p.Reached,
			Forecast: b.Unit.Format(p.Forecast), ReachesAt: p.ReachesAt}
	}
	return out
}

// ---------------------------------------------------------------- scope

// userScope is the one user a request may see: a student themself (asking
// for another is 403), the other roles what they asked ("" all).
func userScope(ctx context.Context, asked string) (string, error) {
	var in []string
	if asked != "" {
		in = []string{asked}
	}
	users, err := usersScope(ctx, in)
	if err != nil || len(users) == 0 {
		return "", err
	}
	return users[0], nil
}

// subjectScope is projectScope and userScope of one request: the project
// and the user it may see of those asked.
func subjectScope(ctx context.Context, project, user string) (string, string, error) {
	p, err := projectScope(ctx, project)
	if err != nil {
		return "", "", err
	}
	u, err := userScope(ctx, user)
	return p, u, err
}

// checkSubject refuses an object of another project to a lead or student
// token, and one of another user to a student token.
func checkSubject(ctx context.Context, project, user, what string) error {
	t := principal(ctx)
	if (t.Role == ledger.RoleLead || t.Role == ledger.RoleStudent) && t.Project != "" && project != t.Project {
		return forbidden(ctx, "this token is limited to project %s", t.Project)
	}
	if t.Role == ledger.RoleStudent && user != t.User {
		return forbidden(ctx, "a student token sees only its own %s", what)
	}
	return nil
}

// checkProject refuses a project the current catalog does not name (a
// write about it would never apply). Without a catalog nothing is checked.
func (s *Server) checkProject(ctx context.Context, location, project string) error {
	_, cat, err := s.currentCatalog(ctx)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, p := range cat.Projects {
		if p.ID == project {
			return nil
		}
	}
	return invalid(ctx, location, "project %q is not in the current catalog", project)
}

// ---------------------------------------------------------------- routes

type alertListInput struct {
	Project  string    `query:"project"`
	User     string    `query:"user" doc:"a student token sees only its own (another is 403)"`
	Instance string    `query:"instance"`
	Kind     string    `query:"kind" enum:"idle_warning,idle_reminder,idle_release,idle_release_dry_run,idle_release_failed,budget_threshold,exemption_requested,exemption_decided"`
	Status   string    `query:"status" enum:"open,acked" doc:"open: nobody acknowledged it yet"`
	Since    time.Time `query:"since" doc:"recorded at or after, RFC 3339"`
	PageParams
}

// AlertRef names an alert in a path.
type AlertRef struct {
	ID int64 `path:"id" minimum:"1"`
}

// DeliveryRef names a delivery.
type DeliveryRef struct {
	ID int64 `path:"id" minimum:"1"`
}

// DeliveryBacklogBody counts the deliveries not sent.
type DeliveryBacklogBody struct {
	Pending int64 `json:"pending" doc:"due now or waiting for a retry"`
	Failed  int64 `json:"failed" doc:"failed for good; POST /api/v1/deliveries/{id}/resend sends one again"`
}

type exemptionInput struct {
	Body struct {
		Project    string    `json:"project,omitempty" doc:"required for admin and finance; a lead token: its own project"`
		User       string    `json:"user,omitempty" doc:"one student; empty: every student of the project"`
		InstanceID string    `json:"instance_id,omitempty" doc:"one instance; empty: every instance"`
		Until      time.Time `json:"until" doc:"end of the exemption, RFC 3339, in the future"`
		Reason     string    `json:"reason" minLength:"1" maxLength:"2000" pattern:"^[^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*[^\\x00-\\x20\\x7F\\x85\\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000][^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*$" doc:"free text, not only white space; no control characters but tab and line breaks"`
	}
}

type budgetInput struct {
	Body struct {
		Scope      string `json:"scope" enum:"project,student"`
		Project    string `json:"project,omitempty" doc:"required for admin and finance; a lead token: its own project"`
		User       string `json:"user,omitempty" doc:"scope student: the student"`
		Period     string `json:"period" enum:"month,term"`
		Unit       string `json:"unit" enum:"money,card_hours"`
		Limit      string `json:"limit" pattern:"^[0-9]{1,12}(\\.[0-9]{1,6})?$" doc:"decimal string, more than 0; a money limit has at most the currency's minor digits (2)"`
		Thresholds []int  `json:"thresholds,omitempty" maxItems:"20" doc:"percent, 1 to 1000 (default 50, 80, 100)"`
		Action     string `json:"action,omitempty" enum:"warn,release" doc:"at 100 % (default warn)"`
	}
}

func (s *Server) routesWatch() {
	register(s, huma.Operation{OperationID: "list-alerts", Method: http.MethodGet, Path: "/api/v1/alerts", Summary: "list alerts",
		Description: "The watcher's alerts (idle warnings, reminders, releases, budget thresholds), newest first. A lead sees its project's, a student only its own.",
		Tags:        []string{"watch"}},
		rolesAll, s.listAlerts)
	register(s, huma.Operation{OperationID: "ack-alert", Method: http.MethodPost, Path: "/api/v1/alerts/{id}/ack", Summary: "acknowledge an alert",
		Description: "Marks the alert as seen (audited). Acknowledging twice is 409 invalid-transition. It changes nothing the watcher does.", Tags: []string{"watch"}},
		rolesAll, s.ackAlert)
	s.routesDeliveries()
	register(s, huma.Operation{OperationID: "list-releases", Method: http.MethodGet, Path: "/api/v1/releases", Summary: "list releases",
		Description: "Releases of idle instances the watcher recorded, with their evidence, newest first. done means something was released; dry_run what would have been done.",
		Tags:        []string{"watch"}},
		rolesAll, s.listReleases)
	s.routesExemptions()
	s.routesBudgets()
}

// routesDeliveries are the messages of alerts: read, counted, re-sent.
func (s *Server) routesDeliveries() {
	register(s, huma.Operation{OperationID: "list-alert-deliveries", Method: http.MethodGet, Path: "/api/v1/alerts/{id}/deliveries", Summary: "list an alert's deliveries",
		Description: "Each message of the alert: channel, recipient, status (pending, sent, failed for good), attempts and the last error.", Tags: []string{"watch"}},
		rolesStaff, s.listAlertDeliveries)
	register(s, huma.Operation{OperationID: "resend-delivery", Method: http.MethodPost, Path: "/api/v1/deliveries/{id}/resend", Summary: "re-send a failed delivery",
		Description: "Makes a delivery that failed for good pending again, due at once, with a new retry horizon (audited as delivery.resend). " +
			"The leader sends it in its next delivery round. Re-sending one that is pending or sent is 409 invalid-transition.", Tags: []string{"watch"}},
		rolesAdmin, s.resendDelivery)
	register(s, huma.Operation{OperationID: "delivery-backlog", Method: http.MethodGet, Path: "/api/v1/deliveries/backlog", Summary: "count the deliveries not sent",
		Description: "Deliveries pending (due or waiting for a retry) and failed for good, over all alerts. The same counts are the gauge cardhour_watch_delivery_backlog.",
		Tags:        []string{"watch"}},
		rolesAdmin, s.deliveryBacklog)
	register(s, huma.Operation{OperationID: "list-deliveries", Method: http.MethodGet, Path: "/api/v1/deliveries", Summary: "list deliveries",
		Description: "Deliveries of every alert, newest first, by status (failed: those to re-send).", Tags: []string{"watch"}},
		rolesAdmin, s.listDeliveries)
}

func (s *Server) listAlerts(ctx context.Context, in *alertListInput) (*body[Page[AlertBody]], error) {
	project, user, err := subjectScope(ctx, in.Project, in.User)
	if err != nil {
		return nil, err
	}
	page, next, err := s.cfg.Ledger.Alerts(ctx, ledger.AlertFilter{Project: project, User: user, InstanceID: in.Instance, Kind: billing.AlertKind(in.Kind),
		Since: in.Since, Unacked: in.Status == "open", Acked: in.Status == "acked", Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return pageBody(page, next, alertBody), nil
}

// scopedAlert reads an alert the token may see.
func (s *Server) scopedAlert(ctx context.Context, id int64) (ledger.Alert, error) {
	a, err := s.cfg.Ledger.Alert(ctx, id)
	if err != nil {
		return a, err
	}
	return a, checkSubject(ctx, a.Project, a.User, "alerts")
}

func (s *Server) ackAlert(ctx context.Context, in *AlertRef) (*body[AlertBody], error) {
	if _, err := s.scopedAlert(ctx, in.ID); err != nil {
		return nil, err
	}
	a, err := s.cfg.Ledger.AckAlert(ctx, actor(ctx), in.ID)
	if err != nil {
		return nil, err
	}
	return &body[AlertBody]{alertBody(a)}, nil
}

type alertDeliveryListInput struct {
	AlertRef
	Status string `query:"status" enum:"pending,sent,failed"`
	PageParams
}

func (s *Server) listAlertDeliveries(ctx context.Context, in *alertDeliveryListInput) (*body[Page[DeliveryBody]], error) {
	a, err := s.scopedAlert(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	page, next, err := s.cfg.Ledger.Deliveries(ctx, ledger.DeliveryFilter{AlertID: a.ID, Status: ledger.DeliveryStatus(in.Status), Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return pageBody(page, next, deliveryBody), nil
}

func (s *Server) resendDelivery(ctx context.Context, in *DeliveryRef) (*body[DeliveryBody], error) {
	d, err := s.cfg.Ledger.ResendDelivery(ctx, actor(ctx), in.ID)
	if err != nil {
		return nil, err
	}
	return &body[DeliveryBody]{deliveryBody(d)}, nil
}

func (s *Server) deliveryBacklog(ctx context.Context, _ *struct{}) (*body[DeliveryBacklogBody], error) {
	c, err := s.cfg.Ledger.DeliveryBacklog(ctx)
	if err != nil {
		return nil, err
	}
	return &body[DeliveryBacklogBody]{DeliveryBacklogBody{Pending: c.Pending, Failed: c.Failed}}, nil
}

type deliveryListInput struct {
	Status string `query:"status" enum:"pending,sent,failed"`
	PageParams
}

func (s *Server) listDeliveries(ctx context.Context, in *deliveryListInput) (*body[Page[DeliveryBody]], error) {
	page, next, err := s.cfg.Ledger.Deliveries(ctx, ledger.DeliveryFilter{Status: ledger.DeliveryStatus(in.Status), Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return pageBody(page, next, deliveryBody), nil
}

type releaseListInput struct {
	Project  string `query:"project"`
	User     string `query:"user" doc:"a student token sees only its own (another is 403)"`
	Instance string `query:"instance"`
	Status   string `query:"status" enum:"pending,done,dry_run,failed"`
	PageParams
}

func (s *Server) listReleases(ctx context.Context, in *releaseListInput) (*body[Page[ReleaseBody]], error) {
	project, user, err := subjectScope(ctx, in.Project, in.User)
	if err != nil {
		return nil, err
	}
	page, next, err := s.cfg.Ledger.Releases(ctx, ledger.ReleaseFilter{Project: project, User: user, InstanceID: in.Instance,
		Status: billing.ReleaseStatus(in.Status), Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return pageBody(page, next, releaseBody), nil
}

func (s *Server) routesExemptions() {
	register(s, huma.Operation{OperationID: "list-exemptions", Method: http.MethodGet, Path: "/api/v1/exemptions", Summary: "list exemptions",
		Description: "Exemptions from the idle policy, newest first. user matches that student's and the whole project's; a student sees those that apply to it.",
		Tags:        []string{"watch"}},
		rolesAll, s.listExemptions)
	register(s, huma.Operation{OperationID: "grant-exemption", Method: http.MethodPost, Path: "/api/v1/exemptions", Summary: "grant an exemption",
		Description: "Suspends the idle policy (warnings, reminders, releases) for a project, one student or one instance until a time. " +
			"When it ends during an idle streak the streak's clock starts again at its end.", DefaultStatus: http.StatusCreated, Tags: []string{"watch"}},
		rolesStaff, s.grantExemption)
	register(s, huma.Operation{OperationID: "revoke-exemption", Method: http.MethodDelete, Path: "/api/v1/exemptions/{id}", Summary: "revoke an exemption",
		Description: "Ends the exemption now (audited); revoking twice is 409 invalid-transition.", Tags: []string{"watch"}},
		rolesStaff, s.revokeExemption)
}

type exemptionListInput struct {
	Project  string `query:"project"`
	User     string `query:"user" doc:"exemptions of this student or of the whole project; a student token: its own"`
	Instance string `query:"instance"`
	Active   bool   `query:"active" doc:"only those in force now"`
	PageParams
}

func (s *Server) listExemptions(ctx context.Context, in *exemptionListInput) (*body[Page[ExemptionBody]], error) {
	project, user, err := subjectScope(ctx, in.Project, in.User)
	if err != nil {
		return nil, err
	}
	f := ledger.ExemptionFilter{Project: project, User: user, InstanceID: in.Instance, Cursor: in.Cursor, Limit: in.Limit}
	if in.Active {
		f.ActiveAt = s.now()
	}
	page, next, err := s.cfg.Ledger.Exemptions(ctx, f)
	if err != nil {
		return nil, err
	}
	return pageBody(page, next, s.exemptionBody), nil
}

func (s *Server) grantExemption(ctx context.Context, in *exemptionInput) (*body[ExemptionBody], error) {
	project, err := projectScope(ctx, in.Body.Project)
	if err != nil {
		return nil, err
	}
	if project == "" {
		return nil, invalid(ctx, "body.project", "project is required")
	}
	if err := s.checkProject(ctx, "body.project", project); err != nil {
		return nil, err
	}
	e, err := s.cfg.Ledger.GrantExemption(ctx, actor(ctx), ledger.NewExemption{Project: project, User: in.Body.User,
		InstanceID: in.Body.InstanceID, Until: in.Body.Until, Reason: in.Body.Reason})
	if err != nil {
		return nil, err
	}
	return &body[ExemptionBody]{s.exemptionBody(e)}, nil
}

// exemptionRef names an exemption in a path.
type exemptionRef struct {
	ID int64 `path:"id" minimum:"1"`
}

func (s *Server) revokeExemption(ctx context.Context, in *exemptionRef) (*body[ExemptionBody], error) {
	e, err := s.cfg.Ledger.Exemption(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if err := checkSubject(ctx, e.Project, "", "exemptions"); err != nil {
		return nil, err
	}
	e, err = s.cfg.Ledger.RevokeExemption(ctx, actor(ctx), in.ID)
	if err != nil {
		return nil, err
	}
	return &body[ExemptionBody]{s.exemptionBody(e)}, nil
}

// checkBudgetWrite lets admin and finance write any budget and a lead the
// student budgets of its own project.
func checkBudgetWrite(ctx context.Context, scope billing.BudgetScope, project string) error {
	t := principal(ctx)
	if t.Role != ledger.RoleLead {
		return nil
	}
	if t.Project != "" && project != t.Project {
		return forbidden(ctx, "this token is limited to project %s", t.Project)
	}
	if scope != billing.BudgetStudent {
		return forbidden(ctx, "a lead sets the budgets of its students; the project's budget is set by finance")
	}
	return nil
}

func (s *Server) routesBudgets() {
	register(s, huma.Operation{OperationID: "list-budgets", Method: http.MethodGet, Path: "/api/v1/budgets", Summary: "list budgets",
		Description: "Budgets (配额) of projects and students, newest first. A lead sees its project's; a student its own student budgets.",
		Tags:        []string{"watch"}},
		rolesAll, s.listBudgets)
	register(s, huma.Operation{OperationID: "put-budget", Method: http.MethodPut, Path: "/api/v1/budgets", Summary: "set a budget",
		Description: "Creates the budget of its scope, project, user, period and unit, or replaces its limit, thresholds and action (setting what is set changes nothing). " +
			"Admin and finance set any budget; a lead the student budgets of its project.", Tags: []string{"watch"}},
		rolesStaff, s.putBudget)
	register(s, huma.Operation{OperationID: "delete-budget", Method: http.MethodDelete, Path: "/api/v1/budgets/{id}", Summary: "delete a budget",
		Description: "Removes the budget (its alerts stay). Admin and finance delete any; a lead the student budgets of its project.", Tags: []string{"watch"}},
		rolesStaff, s.deleteBudget)
}

type budgetListInput struct {
	Scope   string `query:"scope" enum:"project,student"`
	Project string `query:"project"`
	User    string `query:"user" doc:"a student token: its own"`
	PageParams
}

func (s *Server) listBudgets(ctx context.Context, in *budgetListInput) (*body[Page[BudgetBody]], error) {
	project, user, err := subjectScope(ctx, in.Project, in.User)
	if err != nil {
		return nil, err
	}
	page, next, err := s.cfg.Ledger.Budgets(ctx, ledger.BudgetFilter{Scope: billing.BudgetScope(in.Scope), Project: project, User: user,
		Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	now := s.now()
	return pageBody(page, next, func(b ledger.Budget) BudgetBody { return budgetBody(b, now) }), nil
}

func (s *Server) putBudget(ctx context.Context, in *budgetInput) (*body[BudgetBody], error) {
	project, err := projectScope(ctx, in.Body.Project)
	if err != nil {
		return nil, err
	}
	if project == "" {
		return nil, invalid(ctx, "body.project", "project is required")
	}
	if in.Body.Unit == string(billing.BudgetMoney) {
		if d, err := decimal.NewFromString(in.Body.Limit); err == nil && d.Exponent() < -billing.MoneyDigits && !d.Equal(d.Round(billing.MoneyDigits)) {
			return nil, invalid(ctx, "body.limit", "limit %q: a money limit has at most %d decimals (the currency's minor unit)", in.Body.Limit, billing.MoneyDigits)
		}
	}
	scope := billing.BudgetScope(in.Body.Scope)
	if err := checkBudgetWrite(ctx, scope, project); err != nil {
		return nil, err
	}
	if err := s.checkProject(ctx, "body.project", project); err != nil {
		return nil, err
	}
	b, err := s.cfg.Ledger.PutBudget(ctx, actor(ctx), ledger.Budget{Scope: scope, Project: project, User: in.Body.User,
		Period: billing.BudgetPeriodKind(in.Body.Period), Unit: billing.BudgetUnit(in.Body.Unit), Limit: in.Body.Limit,
		Thresholds: slices.Clone(in.Body.Thresholds), Action: billing.BudgetAction(in.Body.Action)})
	if err != nil {
		return nil, err
	}
	return &body[BudgetBody]{budgetBody(b, s.now())}, nil
}

// budgetRef names a budget in a path.
type budgetRef struct {
	ID int64 `path:"id" minimum:"1"`
}

func (s *Server) deleteBudget(ctx context.Context, in *budgetRef) (*body[BudgetBody], error) {
	b, err := s.cfg.Ledger.Budget(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if err := checkBudgetWrite(ctx, b.Scope, b.Project); err != nil {
		return nil, err
	}
	if err := s.cfg.Ledger.DeleteBudget(ctx, actor(ctx), in.ID); err != nil {
		return nil, err
	}
	return &body[BudgetBody]{budgetBody(b, s.now())}, nil
}
