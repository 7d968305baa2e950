package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tributary-dev/tributary/engine/importspec"
)

// ErrInvalid wraps every refusal of a create or patch request: the
// message names the field and what is wrong.
var ErrInvalid = errors.New("invalid import")

// ErrExists refuses to create an import whose id is taken.
var ErrExists = errors.New("import already exists")

// Public run_every values (nanoseconds) and the schedules they mean.
var runEvery = map[int64]string{0: "api", 3_600_000_000_000: "@hourly", 86_400_000_000_000: "@daily", 604_800_000_000_000: "@weekly"}

// RunEvery is the public API's run_every for a schedule, or false when the
// schedule is a cron expression it cannot express.
func RunEvery(schedule string) (int64, bool) {
	if schedule == "" {
		schedule = "api"
	}
	for ns, s := range runEvery {
		if s == schedule {
			return ns, true
		}
	}
	return 0, false
}

func scheduleOf(raw json.RawMessage) (string, error) {
	var ns int64
	if err := json.Unmarshal(raw, &ns); err != nil {
		return "", fmt.Errorf("%w: run_every: must be an integer number of nanoseconds", ErrInvalid)
	}
	s, ok := runEvery[ns]
	if !ok {
		return "", fmt.Errorf("%w: run_every: %d is not one of 0 (API only), 3600000000000 (hourly), 86400000000000 (daily), 604800000000000 (weekly)", ErrInvalid, ns)
	}
	return s, nil
}

// Create declares an import of importType in project from an app API
// body: the import file's fields as JSON, plus the public API's run_every.
// Without an id the import gets the next free number.
func (c *Catalog) Create(ctx context.Context, project int64, importType string, body []byte, creator string) (Entry, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return Entry{}, fmt.Errorf("%w: the body must be a JSON object", ErrInvalid)
	}
	if raw, ok := fields["run_every"]; ok {
		if _, both := fields["schedule"]; both {
			return Entry{}, fmt.Errorf("%w: give run_every or schedule, not both", ErrInvalid)
		}
		s, err := scheduleOf(raw)
		if err != nil {
			return Entry{}, err
		}
		fields["schedule"], _ = json.Marshal(s)
		delete(fields, "run_every")
	}
	if raw, ok := fields["import_type"]; ok {
		var t string
		if json.Unmarshal(raw, &t) != nil || t != importType {
			return Entry{}, fmt.Errorf("%w: import_type: %s does not match the route (%s)", ErrInvalid, raw, importType)
		}
	}
	if raw, ok := fields["project_id"]; ok {
		var p int64
		if json.Unmarshal(raw, &p) != nil || p != project {
			return Entry{}, fmt.Errorf("%w: project_id: %s does not match the route (%d)", ErrInvalid, raw, project)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := ""
	if raw, ok := fields["id"]; ok {
		if err := json.Unmarshal(raw, &id); err != nil || id == "" {
			return Entry{}, fmt.Errorf("%w: id: must be a non-empty string", ErrInvalid)
		}
	} else {
		id = c.nextID(project)
	}
	k := key{project, id}
	if _, taken := c.entries[k]; taken || c.leftOut[k] {
		return Entry{}, fmt.Errorf("import %s in project %d: %w", id, project, ErrExists)
	}
	fields["id"], _ = json.Marshal(id)
	fields["project_id"], _ = json.Marshal(project)
	fields["import_type"], _ = json.Marshal(importType)
	spec, err := json.Marshal(fields)
	if err != nil {
		return Entry{}, err
	}
	im, err := c.loader().ParseAPI("import "+id, spec)
	if err == nil {
		err = im.Check(c.rules())
	}
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return c.save(ctx, k, doc{Origin: OriginAPI, Spec: spec, CreatedMs: c.now().UnixMilli(), Creator: creator})
}

// nextID is one more than the largest numeric id of the project.
func (c *Catalog) nextID(project int64) string {
	var max int64
	for k := range c.entries {
		if n, err := strconv.ParseInt(k.id, 10, 64); err == nil && k.project == project && n > max {
			max = n
		}
	}
	for k := range c.leftOut {
		if n, err := strconv.ParseInt(k.id, 10, 64); err == nil && k.project == project && n > max {
			max = n
		}
	}
	return strconv.FormatInt(max+1, 10)
}

// Patch changes whether an import is paused and its schedule.
func (c *Catalog) Patch(ctx context.Context, project int64, id string, paused *bool, schedule *string) (Entry, error) {
	if schedule != nil {
		if err := importspec.CheckSchedule(*schedule, c.floor); err != nil {
			return Entry{}, fmt.Errorf("%w: schedule: %w", ErrInvalid, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := key{project, id}
	d, err := c.docOf(k)
	if err != nil {
		return Entry{}, err
	}
	if paused != nil {
		d.Paused = paused
		if !*paused {
			d.PausedReason = ""
		}
	}
	if schedule != nil {
		d.Schedule = schedule
	}
	return c.save(ctx, k, d)
}

// Delete removes an import; one declared in a file is hidden until its
// file is removed (it would come back at the next start otherwise).
func (c *Catalog) Delete(ctx context.Context, project int64, id string) (Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := key{project, id}
	d, err := c.docOf(k)
	if err != nil {
		return Entry{}, err
	}
	d.Deleted = true
	return c.save(ctx, k, d)
}

// docOf returns the stored document of a live import, or a fresh one for
// a file import the API has not changed yet; the caller holds c.mu.
func (c *Catalog) docOf(k key) (doc, error) {
	e, ok := c.entries[k]
	if !ok || e.Deleted {
		return doc{}, fmt.Errorf("import %s in project %d: %w", k.id, k.project, ErrNotFound)
	}
	if d, ok := c.docs[k]; ok {
		return d, nil
	}
	return doc{Origin: e.Origin}, nil
}
