package notify

import (
	"bytes"
	_ "embed"
	"encoding/json"

	"github.com/cardhour/cardhour/billing"
)

// text is one sentence by language (Langs), with {name} placeholders the
// renderer fills from the message's facts (see vars).
type text map[string]string

// texts are every sentence the renderer writes, read from texts.json: the
// renderer decides which sentences a message has, the file says them, in
// every language side by side. A new language is one more key in each
// sentence (and in Langs and NormalizeLang).
type texts struct {
	// The instance in a subject ({inst}, {node}), and its holder ({project},
	// {user}; HolderUser when the facts name a user).
	Where         text `json:"where"`
	WhereOnNode   text `json:"whereOnNode"`
	HolderProject text `json:"holderProject"`
	HolderUser    text `json:"holderUser"`
	// Who is the instance with its holder ({holder}, {inst}), as the
	// openings say it: {who}, or {Who} at the start of a sentence.
	Who text `json:"who"`

	// By idle kind: the subject ({where}) and the opening lines ({who},
	// {Who}, {idle}, {at}).
	Subject map[billing.AlertKind]text   `json:"subject"`
	Opening map[billing.AlertKind][]text `json:"opening"`

	// The instance block: {inst}, {kind} (KindMIG or KindWhole, from
	// {model} and {profile}), {node}, {gpu}, {held}, {idle} and the time
	// held and idle ({heldFor}, {idleFor}: HeldFor and IdleFor of {dur},
	// made of Days, Hours and Minutes of {n}), {cost}.
	Instance     text `json:"instance"`
	InstanceKind text `json:"instanceKind"`
	KindMIG      text `json:"kindMIG"`
	KindWhole    text `json:"kindWhole"`
	Node         text `json:"node"`
	GPU          text `json:"gpu"`
	HeldSince    text `json:"heldSince"`
	IdleSince    text `json:"idleSince"`
	CostSoFar    text `json:"costSoFar"`
	HeldFor      text `json:"heldFor"`
	IdleFor      text `json:"idleFor"`
	Days         text `json:"days"`
	Hours        text `json:"hours"`
	Minutes      text `json:"minutes"`

	// After the block: what the release did ({outcome}, by kind), what
	// comes next ({next}), how to ask for an exemption ({hint}, or
	// DefaultHint), and the zone the times are in ({zone}).
	Outcome            map[billing.AlertKind]text `json:"outcome"`
	ReleaseYourself    text                       `json:"releaseYourself"`
	NextRetry          text                       `json:"nextRetry"`
	NextRelease        text                       `json:"nextRelease"`
	NextReminder       text                       `json:"nextReminder"`
	NextNone           text                       `json:"nextNone"`
	ExemptAfterRelease text                       `json:"exemptAfterRelease"`
	Exempt             text                       `json:"exempt"`
	DefaultHint        text                       `json:"defaultHint"`
	Zone               text                       `json:"zone"`

	// Budget messages: the subject and the budget named ({project},
	// {user}, {percent}), the headline ({scope}, {period}, {percent},
	// {share}), the rows ({limit}, {used}: money, or CardHours of {n}),
	// what comes next and how to ask for more.
	BudgetSubject        text `json:"budgetSubject"`
	BudgetSubjectStudent text `json:"budgetSubjectStudent"`
	BudgetScope          text `json:"budgetScope"`
	BudgetScopeStudent   text `json:"budgetScopeStudent"`
	BudgetHeadline       text `json:"budgetHeadline"`
	BudgetProject        text `json:"budgetProject"`
	BudgetStudent        text `json:"budgetStudent"`
	BudgetPeriod         text `json:"budgetPeriod"`
	BudgetLimit          text `json:"budgetLimit"`
	BudgetUsed           text `json:"budgetUsed"`
	BudgetAsOf           text `json:"budgetAsOf"`
	CardHours            text `json:"cardHours"`
	BudgetNextStudent    text `json:"budgetNextStudent"`
	BudgetNextProject    text `json:"budgetNextProject"`
	BudgetNextNone       text `json:"budgetNextNone"`
	BudgetAsk            text `json:"budgetAsk"`

	// An idle message's link to the exemption request form ({link}).
	ExemptLink text `json:"exemptLink"`

	// Exemption request messages (their subjects and openings are by kind
	// above): what is asked for ({target}: TargetInstance of {inst} or
	// TargetAll of {user}; {until}, {reason}, {request}: its number), the
	// decision ({decision}: DecisionGranted or DecisionRefused, {decidedBy},
	// {answer}) and the dashboard's page ({link}).
	TargetInstance    text `json:"targetInstance"`
	TargetAll         text `json:"targetAll"`
	DecisionGranted   text `json:"decisionGranted"`
	DecisionRefused   text `json:"decisionRefused"`
	RequestProject    text `json:"requestProject"`
	RequestStudent    text `json:"requestStudent"`
	RequestUntil      text `json:"requestUntil"`
	RequestReason     text `json:"requestReason"`
	RequestDecide     text `json:"requestDecide"`
	RequestDecideLink text `json:"requestDecideLink"`
	YourReason        text `json:"yourReason"`
	GrantedNote       text `json:"grantedNote"`
	GrantedNext       text `json:"grantedNext"`
	RefusedReason     text `json:"refusedReason"`
	RefusedNext       text `json:"refusedNext"`
	DecidedLink       text `json:"decidedLink"`
}

//go:embed texts.json
var textsJSON []byte

// words are the texts; the file is part of the binary, so a broken one is
// a build that no test passes.
var words = func() texts {
	var t texts
	dec := json.NewDecoder(bytes.NewReader(textsJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		panic("notify: texts.json: " + err.Error())
	}
	return t
}()
