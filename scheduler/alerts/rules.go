package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/scheduler"
)

// Rule names, as kept in the store's rule states.
const (
	ruleRun       = "run"
	ruleRefused   = "refused"
	ruleVolume    = "volume"
	ruleFreshness = "freshness"
	ruleSchema    = "schema"
)

// Rule states.
const (
	stateOK       = "ok"
	stateFailing  = "failing"
	stateOver     = "over"
	stateHeld     = "held"     // volume: the run was stopped and the import paused
	stateAccepted = "accepted" // volume: out of band, let through (resumed, or notify)
	stateStale    = "stale"
)

// Store is what the rules need of the store.
type Store interface {
	Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error)
	RuleStates(ctx context.Context, project int64, importID string) ([]store.RuleState, error)
	RaiseAlerts(ctx context.Context, alerts []store.Alert, states []store.RuleState) error
	ImportDocs(ctx context.Context) ([]store.ImportDoc, error)
}

// Pauser pauses an import with a reason (*scheduler.Catalog).
type Pauser interface {
	Pause(ctx context.Context, project int64, id, reason string) error
}

// Monitor applies the projects' rules to runs (scheduler.Monitor).
type Monitor struct {
	st       Store
	pause    Pauser
	projects map[int64]*config.Project
	log      *slog.Logger
	now      func() time.Time
	wake     func()
}

// MonitorOptions configure NewMonitor.
type MonitorOptions struct {
	Store    Store
	Pauser   Pauser
	Projects []config.Project
	Log      *slog.Logger
	Now      func() time.Time // the scheduler's clock
	// Wake is called after alerts were raised outside a run's end (the
	// deliverer's Wake); nil: none.
	Wake func()
}

// NewMonitor builds the rules of every project that has alerts.
func NewMonitor(o MonitorOptions) *Monitor {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Wake == nil {
		o.Wake = func() {}
	}
	m := &Monitor{st: o.Store, pause: o.Pauser, projects: map[int64]*config.Project{}, log: o.Log, now: o.Now, wake: o.Wake}
	for i := range o.Projects {
		m.projects[o.Projects[i].ID] = &o.Projects[i]
	}
	return m
}

// watch is one run's view of the rules.
type watch struct {
	m       *Monitor
	im      *importspec.Import
	project *config.Project
	rules   config.AlertRules
	run     store.Run

	states  map[string]store.RuleState // as stored at the start
	loaded  bool
	alerts  []store.Alert
	changed map[string]store.RuleState
	// volumeDone: the preflight judged the volume (on the source's count).
	volumeDone bool
}

// Watch implements scheduler.Monitor.
func (m *Monitor) Watch(ctx context.Context, im *importspec.Import, r store.Run) scheduler.RunWatch {
	w := &watch{m: m, im: im, run: r, project: m.projects[im.ProjectID], changed: map[string]store.RuleState{}}
	if w.project != nil && w.project.Alerts != nil {
		w.rules = w.project.Alerts.RulesFor(im.ID)
	}
	return w
}

func (w *watch) load(ctx context.Context) {
	if w.loaded {
		return
	}
	w.loaded = true
	w.states = map[string]store.RuleState{}
	sts, err := w.m.st.RuleStates(ctx, w.im.ProjectID, w.im.ID)
	if err != nil {
		// Without its memory a rule would re-alert: better to say so and
		// judge against nothing than to stop the run.
		w.m.log.Warn("alerts: reading rule states", "import", w.im.ID, "err", err)
	}
	for _, s := range sts {
		w.states[s.Rule] = s
	}
}

func (w *watch) state(rule string) store.RuleState {
	if s, ok := w.changed[rule]; ok {
		return s
	}
	return w.states[rule]
}

func (w *watch) set(rule, state string, detail any) {
	var raw []byte
	if detail != nil {
		raw, _ = json.Marshal(detail)
	}
	w.changed[rule] = store.RuleState{Project: w.im.ProjectID, Import: w.im.ID, Rule: rule, State: state, Detail: raw,
		UpdatedMs: w.m.now().UnixMilli()}
}

// raise queues an alert for each of the project's destinations.
func (w *watch) raise(p Payload) {
	w.alerts = append(w.alerts, w.m.build(w.project, w.im.ID, w.run.ID, p)...)
}

func (m *Monitor) build(project *config.Project, importID, runID string, p Payload) []store.Alert {
	if project == nil || project.Alerts == nil || len(project.Alerts.Destinations) == 0 {
		return nil
	}
	now := m.now()
	p.Project, p.ProjectName, p.Import, p.RunID = project.ID, project.Name, importID, runID
	if p.ID == "" {
		p.ID = fmt.Sprintf("%d.%s.%s.%s", project.ID, importID, runID, p.Kind)
	}
	p.Links = links(project.Alerts.BaseURL, project.ID, importID, runID)
	body := p.encode(now)
	out := make([]store.Alert, 0, len(project.Alerts.Destinations))
	for _, d := range project.Alerts.Destinations {
		out = append(out, store.Alert{ID: p.ID, Destination: d.Name, Project: project.ID, Import: importID, Kind: p.Kind,
			Body: body, CreatedMs: now.UnixMilli(), NextMs: now.UnixMilli()})
	}
	return out
}

func on(b *bool) bool { return b == nil || *b }

// Preflight implements scheduler.RunWatch: the schema and, when the
// source can count, the volume are judged before the run writes.
func (w *watch) Preflight(ctx context.Context, plan run.Plan) error {
	if w.project == nil || w.project.Alerts == nil {
		return nil
	}
	w.load(ctx)
	if on(w.rules.SchemaChanged) && plan.Schema != nil {
		w.checkSchema(plan)
	}
	v := w.rules.Volume
	if v == nil || v.Action == config.ActionOff || plan.SourceRows == nil {
		return nil
	}
	n := plan.SourceRows(ctx)
	if n < 0 {
		return nil // judged on the rows read, after the run
	}
	w.volumeDone = true
	return w.checkVolume(ctx, n, true)
}

type column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

func (w *watch) checkSchema(plan run.Plan) {
	cols := make([]column, 0, len(plan.Schema.Columns))
	for _, c := range plan.Schema.Columns {
		t := c.SourceType
		if t == "" && c.Type != nil {
			t = c.Type.String()
		}
		cols = append(cols, column{c.Name, t})
	}
	prev := w.state(ruleSchema)
	w.set(ruleSchema, stateOK, map[string]any{"columns": cols})
	if prev.State == "" {
		return // the first run only records the schema
	}
	var old struct {
		Columns []column `json:"columns"`
	}
	if json.Unmarshal(prev.Detail, &old) != nil {
		return
	}
	added, dropped, retyped := []string{}, []string{}, []string{}
	oldBy := map[string]string{}
	for _, c := range old.Columns {
		oldBy[c.Name] = c.Type
	}
	newBy := map[string]bool{}
	for _, c := range cols {
		newBy[c.Name] = true
		t, ok := oldBy[c.Name]
		switch {
		case !ok:
			added = append(added, c.Name)
		case t != c.Type:
			retyped = append(retyped, fmt.Sprintf("%s (%s → %s)", c.Name, t, c.Type))
		}
	}
	for _, c := range old.Columns {
		if !newBy[c.Name] {
			dropped = append(dropped, c.Name)
		}
	}
	if len(added)+len(dropped)+len(retyped) == 0 {
		return
	}
	var parts []string
	for _, p := range []struct {
		what string
		cols []string
	}{{"added", added}, {"dropped", dropped}, {"retyped", retyped}} {
		if len(p.cols) > 0 {
			parts = append(parts, p.what+": "+strings.Join(p.cols, ", "))
		}
	}
	w.raise(Payload{Kind: KindSchemaChanged, Message: "The source table's columns changed since the last run — " + strings.Join(parts, "; ") + ".",
		Details: map[string]any{"added": added, "dropped": dropped, "retyped": retyped}})
}

// checkVolume judges rows against the band around the median of the
// last 30 successful runs' rows read (a Mirror import's: table rows, see
// volumes). before: the run has not written yet, so action pause can
// still stop it.
func (w *watch) checkVolume(ctx context.Context, rows int64, before bool) error {
	v := w.rules.Volume
	runs, err := w.m.st.Runs(ctx, store.RunFilter{Project: w.im.ProjectID, Import: w.im.ID, Limit: 200})
	if err != nil {
		w.m.log.Warn("alerts: reading run history", "import", w.im.ID, "err", err)
		return nil
	}
	vols, rows, ok := w.volumes(ctx, runs, rows, before) // volume_mirror.go
	if !ok || len(vols) < v.MinRuns {
		return nil
	}
	slices.Sort(vols)
	median := float64(vols[len(vols)/2])
	if len(vols)%2 == 0 {
		median = float64(vols[len(vols)/2-1]+vols[len(vols)/2]) / 2
	}
	if median == 0 {
		return nil // no band around nothing
	}
	lo, hi := v.Lower*median, v.Upper*median
	prev := w.state(ruleVolume).State
	detail := map[string]any{"rows": rows, "median": median, "lower": lo, "upper": hi, "runs": len(vols)}
	if float64(rows) >= lo && float64(rows) <= hi {
		if prev != "" && prev != stateOK {
			w.set(ruleVolume, stateOK, detail)
			w.raise(Payload{Kind: KindResolved, Message: fmt.Sprintf("Volume back in band: %d rows (median %.0f).", rows, median),
				Details: map[string]any{"rule": ruleVolume, "rows": rows, "median": median}})
		}
		return nil
	}
	switch prev {
	case stateHeld:
		// Held before. Another process's catalog may not know of the
		// pause yet: the stored document says whether it was resumed.
		if before && v.Action == config.ActionPause && w.m.stillPaused(ctx, w.im) {
			return fmt.Errorf("volume anomaly: the import is paused by the volume rule")
		}
		// Resumed by hand: the operator accepted the new volume.
		w.set(ruleVolume, stateAccepted, detail)
		return nil
	case stateAccepted:
		// Notified already: once per state change.
		return nil
	}
	what := "fewer"
	if float64(rows) > hi {
		what = "more"
	}
	msg := fmt.Sprintf("Volume anomaly: the run would read %d rows, %s than the band %.0f–%.0f around the median %.0f of the last %d successful runs.",
		rows, what, lo, hi, median, len(vols))
	if !before {
		msg = strings.Replace(msg, "would read", "read", 1)
	}
	p := Payload{Kind: KindVolume, Action: config.ActionNotify, Details: detail}
	if v.Action == config.ActionPause && before {
		reason := fmt.Sprintf("paused by the volume rule before run %s: %d rows against a median of %.0f (band %.0f–%.0f); PATCH paused:false to resume and accept it",
			w.run.ID, rows, median, lo, hi)
		if err := w.m.pause.Pause(ctx, w.im.ProjectID, w.im.ID, reason); err != nil {
			// Not paused: still stop this run (nothing is written) and say so.
			w.m.log.Error("alerts: pausing the import", "import", w.im.ID, "err", err)
		}
		p.Action, p.Reason = config.ActionPause, reason
		p.Message = msg + " The run stopped before importing or deleting anything and the import is paused."
		w.set(ruleVolume, stateHeld, detail)
		w.raise(p)
		return fmt.Errorf("volume anomaly: %d rows against a median of %.0f (band %.0f–%.0f); import paused", rows, median, lo, hi)
	}
	if v.Action == config.ActionPause {
		msg += " The source could not count its rows before the run, so it was not paused."
	}
	p.Message = msg
	w.set(ruleVolume, stateAccepted, detail)
	w.raise(p)
	return nil
}

// stillPaused reports whether the store's document of im says paused.
func (m *Monitor) stillPaused(ctx context.Context, im *importspec.Import) bool {
	docs, err := m.st.ImportDocs(ctx)
	if err != nil {
		m.log.Warn("alerts: reading import documents", "import", im.ID, "err", err)
		return true // hold rather than import what may be a truncated table
	}
	for _, d := range docs {
		if d.Project == im.ProjectID && d.ID == im.ID {
			var doc struct {
				Paused *bool `json:"paused"`
			}
			return json.Unmarshal(d.Doc, &doc) == nil && doc.Paused != nil && *doc.Paused
		}
	}
	return false
}

// End implements scheduler.RunWatch.
func (w *watch) End(ctx context.Context, r store.Run, st run.Stats) store.RunEnd {
	end := store.RunEnd{Run: r}
	if w.project == nil || w.project.Alerts == nil {
		return end
	}
	w.run = r
	w.load(ctx)
	counts := &Counts{RowsRead: r.RowsRead, Imported: r.Imported, Duplicate: r.Duplicate, Refused: r.Failed}
	prevRun := w.state(ruleRun).State
	if on(w.rules.Failed) {
		switch {
		case r.Status == store.RunFailed && prevRun != stateFailing:
			w.set(ruleRun, stateFailing, nil)
			w.raise(Payload{Kind: KindRunFailed, Status: r.Status, Reason: r.Reason, Counts: counts,
				Message: fmt.Sprintf("Run %s failed after %d retries: %s", r.ID, st.Retries, r.Reason),
				Details: map[string]any{"retries": st.Retries}})
		case r.Status == store.RunSucceeded && prevRun == stateFailing:
			w.set(ruleRun, stateOK, nil)
			w.raise(Payload{Kind: KindRunRecovered, Status: r.Status, Counts: counts,
				Message: fmt.Sprintf("Run %s succeeded after failed runs: %d rows read, %d imported.", r.ID, r.RowsRead, r.Imported)})
		}
	}
	if r.Status == store.RunSucceeded || r.Status == store.RunFailed {
		w.checkRefused(r, counts)
	}
	if r.Status == store.RunSucceeded {
		if v := w.rules.Volume; v != nil && v.Action != config.ActionOff && !w.volumeDone && r.Trigger != "replay" {
			_ = w.checkVolume(ctx, r.RowsRead, false)
		}
		w.noteFresh(r, counts)
	}
	for _, s := range w.changed {
		end.States = append(end.States, s)
	}
	slices.SortFunc(end.States, func(a, b store.RuleState) int { return strings.Compare(a.Rule, b.Rule) })
	end.Alerts = w.alerts
	return end
}

func (w *watch) checkRefused(r store.Run, counts *Counts) {
	f := w.rules.Refused
	if f == nil {
		return
	}
	over := (f.MaxRows > 0 && r.Failed > f.MaxRows) ||
		(f.MaxRatio > 0 && r.RowsRead > 0 && float64(r.Failed)/float64(r.RowsRead) > f.MaxRatio)
	prev := w.state(ruleRefused).State
	switch {
	case over && prev != stateOver:
		w.set(ruleRefused, stateOver, nil)
		var sample []json.RawMessage
		failures, _ := scheduler.SplitFailures(r.Failures) // the column may hold retries too
		_ = json.Unmarshal(failures, &sample)
		if len(sample) > 5 {
			sample = sample[:5]
		}
		w.raise(Payload{Kind: KindRowsRefused, Status: r.Status, Counts: counts,
			Message: fmt.Sprintf("Run %s refused %d of %d rows (limit: %s).", r.ID, r.Failed, r.RowsRead, refusedLimit(f)),
			Details: map[string]any{"max_rows": f.MaxRows, "max_ratio": f.MaxRatio, "first_failures": sample}})
	case !over && prev == stateOver && r.Status == store.RunSucceeded:
		w.set(ruleRefused, stateOK, nil)
		w.raise(Payload{Kind: KindResolved, Status: r.Status, Counts: counts,
			Message: fmt.Sprintf("Refused rows back under the limit: %d of %d.", r.Failed, r.RowsRead),
			Details: map[string]any{"rule": ruleRefused}})
	}
}

func refusedLimit(f *config.RefusedRule) string {
	var parts []string
	if f.MaxRows > 0 {
		parts = append(parts, fmt.Sprintf("%d rows", f.MaxRows))
	}
	if f.MaxRatio > 0 {
		parts = append(parts, fmt.Sprintf("%.4g%% of the rows read", f.MaxRatio*100))
	}
	return strings.Join(parts, " or ")
}

// freshDetail is the freshness state's memory: when rows last arrived.
type freshDetail struct {
	LastNewMs int64 `json:"last_new_ms"`
}

// noteFresh records when the import last brought new rows (kept whether
// or not the freshness rule is on: the watermark-age metric reads it).
func (w *watch) noteFresh(r store.Run, counts *Counts) {
	prev := w.state(ruleFreshness)
	var d freshDetail
	_ = json.Unmarshal(prev.Detail, &d)
	switch {
	case r.Imported > 0:
		d.LastNewMs = r.EndedMs
	case prev.State == "":
		d.LastNewMs = r.StartedMs // counted from the first run seen
	default:
		return
	}
	w.set(ruleFreshness, stateOK, d)
	if prev.State == stateStale {
		w.raise(Payload{Kind: KindResolved, Status: r.Status, Counts: counts,
			Message: fmt.Sprintf("New rows again: run %s imported %d.", r.ID, r.Imported),
			Details: map[string]any{"rule": ruleFreshness}})
	}
}

// CheckFreshness raises a stale alert for every import whose rows last
// arrived longer ago than its freshness.max_age. Several processes may
// check at once: the alert's id is the same, so it is stored once.
func (m *Monitor) CheckFreshness(ctx context.Context, imports []*importspec.Import) error {
	now := m.now()
	raised := false
	for _, im := range imports {
		p := m.projects[im.ProjectID]
		if p == nil || p.Alerts == nil || im.Paused {
			continue
		}
		f := p.Alerts.RulesFor(im.ID).Freshness
		if f == nil {
			continue
		}
		sts, err := m.st.RuleStates(ctx, im.ProjectID, im.ID)
		if err != nil {
			return err
		}
		for _, s := range sts {
			if s.Rule != ruleFreshness || s.State != stateOK {
				continue
			}
			var d freshDetail
			if json.Unmarshal(s.Detail, &d) != nil || d.LastNewMs == 0 {
				continue
			}
			age := now.Sub(time.UnixMilli(d.LastNewMs))
			if age <= time.Duration(f.MaxAge) {
				continue
			}
			last := time.UnixMilli(d.LastNewMs).UTC().Format(time.RFC3339)
			alerts := m.build(p, im.ID, "", Payload{ID: fmt.Sprintf("%d.%s.stale.%d", im.ProjectID, im.ID, d.LastNewMs),
				Kind: KindStale, Message: fmt.Sprintf("No new rows since %s (%s ago; the limit is %s).", last, age.Round(time.Minute), time.Duration(f.MaxAge)),
				Details: map[string]any{"last_new_rows_at": last, "max_age": time.Duration(f.MaxAge).String()}})
			s.State, s.UpdatedMs = stateStale, now.UnixMilli()
			if err := m.st.RaiseAlerts(ctx, alerts, []store.RuleState{s}); err != nil {
				return err
			}
			raised = true
		}
	}
	if raised {
		m.wake()
	}
	return nil
}

// RunFreshness checks every interval until ctx ends.
func (m *Monitor) RunFreshness(ctx context.Context, every time.Duration, imports func() []*importspec.Import) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.CheckFreshness(ctx, imports()); err != nil && ctx.Err() == nil {
			m.log.Warn("alerts: freshness check", "err", err)
		}
	}
}
