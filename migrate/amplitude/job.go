package amplitude

import (
	"time"
)

// State is where a job is in its life. Jobs go queued → exporting →
// loading → succeeded, or to failed from any of them. A job stopped by a
// shutdown keeps its state and resumes from it.
type State string

const (
	// Queued: accepted, waiting for a free runner slot.
	Queued State = "queued"
	// Exporting: fetching hours from Amplitude and writing their events,
	// hour range by hour range (events are streamed, never staged whole).
	Exporting State = "exporting"
	// Loading: every hour is done; user profiles are being written, each
	// user's $set from its latest event.
	Loading State = "loading"
	// Succeeded and Failed are final.
	Succeeded State = "succeeded"
	Failed    State = "failed"
)

// Final reports whether the job will not change any more.
func (s State) Final() bool { return s == Succeeded || s == Failed }

// MaxFailures is how many failed events a job keeps for its report.
const MaxFailures = 100

// Failure is one exported event that was not migrated.
type Failure struct {
	Location
	InsertID string `json:"insert_id,omitempty"`
	Field    string `json:"field"`
	Message  string `json:"message"`
}

// Job is a migration as it is persisted. Credentials are never part of
// it: at most their sealed form (see Config.CredentialKey).
type Job struct {
	ID        string    `json:"job_id"`
	ProjectID int64     `json:"project_id"`
	Start     time.Time `json:"start"` // first hour, UTC
	End       time.Time `json:"end"`   // last hour, inclusive
	Region    string    `json:"region"`
	State     State     `json:"state"`
	Error     string    `json:"error,omitempty"`

	HoursDone  int `json:"hours_done"`
	HoursTotal int `json:"hours_total"`

	Counts

	CreatedAt  time.Time `json:"created_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`

	// NeedsCredentials: the job was interrupted and its credentials were
	// only in memory; POST the same request again to resume it.
	NeedsCredentials bool `json:"needs_credentials,omitempty"`
	// Sealed holds the credentials encrypted with the server's key, for
	// resuming after a restart; dropped once the job is final.
	Sealed string `json:"sealed_credentials,omitempty"`
	// KeyFingerprint matches a new request to this job (see fingerprint).
	KeyFingerprint string `json:"key_fingerprint"`
	// Asked is the range as the request wrote it. One without dates, with
	// START_DATE alone or ending today resolves to other hours once the
	// clock passes the next one, and the same request posted again must
	// still find this job to resume it (it then keeps its own hours). Nil
	// in a job saved before the field existed: that one matches by hours.
	Asked *askedRange `json:"asked,omitempty"`
	// Profiles is the state of the per-user latest-event spill.
	Profiles profileState `json:"profile_runs"`
}

// askedRange is a request's START_DATE and END_DATE ("" when left out).
type askedRange struct {
	Start string `json:"start_date"`
	End   string `json:"end_date"`
}

// Counts are a job's (or a dry run's) event and profile tallies.
type Counts struct {
	// EventsExported: lines Amplitude sent for the hours done.
	EventsExported int64 `json:"events_exported"`
	// EventsImported: events now in the project, this job's copies
	// included when an earlier run (or an interrupted one) stored them.
	EventsImported int64 `json:"events_imported"`
	// EventsDuplicate: of those, how many were already stored.
	EventsDuplicate int64 `json:"events_duplicate"`
	// EventsFailed: lines that broke a rule of /import (see Failures).
	EventsFailed    int64     `json:"events_failed"`
	Failures        []Failure `json:"failures,omitempty"`
	ProfilesUpdated int64     `json:"profiles_updated"`
	ProfilesFailed  int64     `json:"profiles_failed"`
}

func (c *Counts) add(o Counts) {
	c.EventsExported += o.EventsExported
	c.EventsImported += o.EventsImported
	c.EventsDuplicate += o.EventsDuplicate
	c.EventsFailed += o.EventsFailed
	c.ProfilesUpdated += o.ProfilesUpdated
	c.ProfilesFailed += o.ProfilesFailed
	for _, f := range o.Failures {
		c.fail(f)
	}
}

// fail keeps f if the report has room; the count is the caller's.
func (c *Counts) fail(f Failure) {
	if len(c.Failures) < MaxFailures {
		c.Failures = append(c.Failures, f)
	}
}

// Status is a job as GET /amplitude/{job_id} shows it.
type Status struct {
	ID         string `json:"job_id"`
	StatusURL  string `json:"status_url"`
	ProjectID  int64  `json:"project_id"`
	StartDate  string `json:"start"` // first hour, YYYY-MM-DDTHH
	EndDate    string `json:"end"`   // last hour, inclusive
	Region     string `json:"region"`
	State      State  `json:"state"`
	Error      string `json:"error,omitempty"`
	HoursDone  int    `json:"hours_done"`
	HoursTotal int    `json:"hours_total"`
	Counts
	NeedsCredentials bool      `json:"needs_credentials,omitempty"`
	CreatedAt        time.Time `json:"created_at"`
	StartedAt        time.Time `json:"started_at,omitzero"`
	UpdatedAt        time.Time `json:"updated_at"`
	FinishedAt       time.Time `json:"finished_at,omitzero"`
	// ElapsedSeconds runs from StartedAt to FinishedAt, or to now.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

const statusLayout = "2006-01-02T15"

// status renders j; now is for the elapsed time of a running job.
func (j *Job) status(now time.Time) Status {
	s := Status{
		ID: j.ID, StatusURL: "/amplitude/" + j.ID, ProjectID: j.ProjectID,
		StartDate: j.Start.UTC().Format(statusLayout), EndDate: j.End.UTC().Format(statusLayout),
		Region: j.Region, State: j.State, Error: j.Error, HoursDone: j.HoursDone, HoursTotal: j.HoursTotal,
		Counts: j.Counts, NeedsCredentials: j.NeedsCredentials,
		CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, UpdatedAt: j.UpdatedAt, FinishedAt: j.FinishedAt,
	}
	s.Failures = append([]Failure(nil), j.Failures...)
	if !j.StartedAt.IsZero() {
		end := j.FinishedAt
		if end.IsZero() {
			end = now
		}
		s.ElapsedSeconds = end.Sub(j.StartedAt).Seconds()
	}
	return s
}

// clone copies j deeply enough that the copy can be saved or shown while
// the job goes on.
func (j *Job) clone() Job {
	c := *j
	c.Failures = append([]Failure(nil), j.Failures...)
	c.Profiles.Runs = append([]profileRun(nil), j.Profiles.Runs...)
	return c
}

// cursor is the first hour not done.
func (j *Job) cursor() time.Time { return j.Start.Add(time.Duration(j.HoursDone) * time.Hour) }
