package store

import "context"

// Alert is one notice for one destination, waiting in the store's outbox
// until a delivery worker hands it over. It is written in the transaction
// that ends the run it is about (EndRun), so a crash after the run cannot
// lose it, and (ID, Destination) is unique, so raising it again (a retried
// end, two processes seeing the same stale import) keeps one copy.
type Alert struct {
	ID          string // the idempotency key receivers see
	Destination string // the destination's name in the project's alerts
	Project     int64
	Import      string
	Kind        string // run_failed, run_recovered, volume_anomaly, …
	Body        []byte // the JSON payload; each destination shapes its own
	CreatedMs   int64
	Attempts    int
	NextMs      int64 // not delivered before this
	LastError   string
}

// Alert states in the outbox.
const (
	AlertPending = "pending"
	AlertSent    = "sent"
	AlertDead    = "dead" // attempts exhausted, or the destination is gone
)

// RuleState is what a monitoring rule remembers of an import between
// runs (failing or not, the last schema, when rows last arrived), so that
// it notifies once per change of state rather than once per run.
type RuleState struct {
	Project   int64
	Import    string
	Rule      string
	State     string
	Detail    []byte // rule-specific JSON; nil = {}
	UpdatedMs int64
}

// RunEnd is a run's end with what monitoring concluded from it.
type RunEnd struct {
	Run    Run
	Alerts []Alert
	States []RuleState // each replaces the stored state of its rule
}

// AlertSettle is a delivery attempt's outcome.
type AlertSettle struct {
	ID, Destination string
	Owner           string // the claim's owner: a settle by anyone else is ignored
	Status          string // AlertSent, AlertDead, or AlertPending to retry at NextMs
	NextMs          int64
	Error           string
	NowMs           int64
}

// Alerts is the alert outbox and the rules' state.
type Alerts interface {
	// EndRun saves a run's end as UpdateRun does and, in the same
	// transaction, adds its alerts (those already stored are kept as they
	// are) and replaces its rule states. ErrNotFound when the run is not
	// RUNNING: then nothing is written.
	EndRun(ctx context.Context, e RunEnd) error
	// RaiseAlerts adds alerts and replaces rule states without a run (a
	// freshness check, a pause), in one transaction.
	RaiseAlerts(ctx context.Context, alerts []Alert, states []RuleState) error
	// RuleStates returns the stored states of an import's rules.
	RuleStates(ctx context.Context, project int64, importID string) ([]RuleState, error)
	// ClaimAlerts leases up to limit pending alerts due at nowMs to owner
	// until leaseUntilMs, oldest first, skipping those another owner's
	// lease holds: among processes sharing the store each alert goes to
	// one at a time, and to another only once that lease lapses.
	ClaimAlerts(ctx context.Context, owner string, nowMs, leaseUntilMs int64, limit int) ([]Alert, error)
	// SettleAlert records a claimed alert's delivery attempt.
	SettleAlert(ctx context.Context, s AlertSettle) error
	// AlertCounts counts the outbox by project and status.
	AlertCounts(ctx context.Context) (map[int64]map[string]int64, error)
	// PruneAlerts deletes sent and dead alerts created before beforeMs.
	PruneAlerts(ctx context.Context, beforeMs int64) error
}
