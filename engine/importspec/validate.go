package importspec

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/tributary-dev/tributary/connectors"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// DefaultMinInterval is the default schedule floor (the server config's
// min_schedule_interval).
const DefaultMinInterval = time.Minute

// Rules are what an import is checked against besides its own fields.
type Rules struct {
	Registry *connectors.Registry
	// Projects resolves project_id (nil skips the project checks, for
	// files checked alone).
	Projects func(int64) (Project, bool)
	// MinInterval is the shortest schedule interval (0: DefaultMinInterval).
	MinInterval time.Duration
}

// Validate checks everything that needs no connection, with the default
// schedule floor.
func (im *Import) Validate(reg *connectors.Registry, project func(int64) (Project, bool)) error {
	return im.Check(Rules{Registry: reg, Projects: project})
}

// Check is Validate with every rule given.
func (im *Import) Check(r Rules) error {
	reg, project := r.Registry, r.Projects
	v := &validator{im: im}
	v.basics(reg)
	v.byType()
	if err := CheckSchedule(im.Schedule, r.MinInterval); err != nil {
		v.add("schedule", "", err.Error())
	}
	if project != nil && im.ProjectID > 0 {
		if p, ok := project(im.ProjectID); !ok {
			v.add("project_id", "", fmt.Sprintf("no project %d in the server config", im.ProjectID))
		} else {
			v.idMode(p)
		}
	}
	return v.errs.Err()
}

type validator struct {
	im   *Import
	errs Errors
}

func (v *validator) add(key, column, msg string) {
	v.errs = append(v.errs, &Error{File: v.im.file, Key: key, Column: column, Msg: msg})
}

func oneOf(s string, allowed ...string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}

func (v *validator) basics(reg *connectors.Registry) {
	im := v.im
	switch {
	case im.ID == "":
		v.add("id", "", "is required")
	case !idPattern.MatchString(im.ID):
		v.add("id", "", fmt.Sprintf("%q: use letters, digits, '_', '-' or '.' (at most 128)", im.ID))
	}
	if im.ProjectID <= 0 {
		v.add("project_id", "", "is required (a positive integer)")
	}
	if !oneOf(im.ImportType, EventStream, People, Groups, LookupTable) {
		v.add("import_type", "", fmt.Sprintf("%q: must be one of event_stream, people, groups, lookup_table", im.ImportType))
	}
	switch {
	case !oneOf(im.SyncMode, TimeBased, FullSync, OneTime, Mirror, MirrorMode):
		v.add("sync_mode", "", fmt.Sprintf("%q: must be one of time_based, full_sync, one_time, mirror (mirror_mode)", im.SyncMode))
	}
	v.mirror()
	v.history()
	if reg != nil {
		if err := reg.Validate(im.SourceConfig()); err != nil {
			var fe *connectors.FieldError
			if errors.As(err, &fe) {
				v.add(fe.Field, "", fe.Msg)
			} else {
				v.add("source", "", err.Error())
			}
		}
	}
	tp := im.TableParams
	switch {
	case tp.Name == "" && tp.Query == "":
		v.add("table_params", "", "needs table or query")
	case tp.Name != "" && tp.Query != "":
		v.add("table_params", "", "give table or query, not both")
	}
	if im.Lookback != "" {
		if d, err := time.ParseDuration(im.Lookback); err != nil || d < 0 {
			v.add("lookback", "", fmt.Sprintf("%q is not a duration (use e.g. 30m, 2h, 72h)", im.Lookback))
		} else if im.SyncMode != TimeBased {
			v.add("lookback", "", "applies to sync_mode time_based only")
		}
	}
	if im.SyncMode == TimeBased && im.InsertTimeColumnName == "" {
		v.add("insert_time_column_name", "", "is required for sync_mode time_based (rows are read past the last insert time)")
	}
	seen := map[string]string{}
	for col, prop := range im.PropertyMappings {
		switch {
		case strings.TrimSpace(prop) == "":
			v.add("property_mappings."+col, col, "maps to an empty property name")
		case seen[prop] != "":
			v.add("property_mappings."+col, col, fmt.Sprintf("property %q is also the target of column %q", prop, seen[prop]))
		}
		seen[prop] = col
	}
}

func (v *validator) byType() {
	im := v.im
	need := func(key, val, why string) {
		if val == "" {
			v.add(key, "", "is required "+why)
		}
	}
	switch im.ImportType {
	case EventStream:
		need("time_column_name", im.TimeColumnName, "for event_stream imports")
		if im.EventName != "" && im.EventColumnName != "" {
			v.add("event_name", "", "give event_name or event_column_name, not both")
		}
		if im.Event() == "" && im.EventColumnName == "" {
			v.add("event_name", "", "is required when table_params is a query (no table name to default to)")
		}
	case People:
		if im.UserColumnName == "" && im.DistinctIDColumnName == "" {
			v.add("user_column_name", "", "is required for people imports (the profile key)")
		}
	case Groups:
		need("group_key", im.GroupKey, "for groups imports")
		need("group_id_column", im.GroupIDColumn, "for groups imports")
	case LookupTable:
		need("lookup_table_id", im.LookupTableID, "for lookup_table imports")
		need("property_key_column_name", im.PropertyKeyColumnName, "for lookup_table imports")
		if im.SyncMode == TimeBased {
			v.add("sync_mode", "", "lookup tables are replaced or mirrored by key: use full_sync, mirror or one_time")
		}
	}
}

func (v *validator) idMode(p Project) {
	im := v.im
	if p.Simplified() {
		if im.DistinctIDColumnName != "" {
			v.add("distinct_id_column_name", "", "is for Original ID Merge projects; this project uses Simplified ID Merge: map user_column_name and device_column_name")
		}
		return
	}
	if im.ImportType == EventStream {
		if im.UserColumnName != "" {
			v.add("user_column_name", "", "is for Simplified ID Merge projects; this project uses Original ID Merge: map distinct_id_column_name")
		}
		if im.DeviceColumnName != "" {
			v.add("device_column_name", "", "is for Simplified ID Merge projects; this project uses Original ID Merge: map distinct_id_column_name")
		}
	}
	if im.MigratedFrom != "" {
		v.add("migrated_from", "", fmt.Sprintf("another tool's history (%s) can only be imported into a Simplified ID Merge project (spec §1); project %d uses Original ID Merge", im.MigratedFrom, p.ID))
	}
}

// cronParser accepts 5-field cron expressions and descriptors (@hourly,
// @every 15m, …), as robfig/cron's standard parser does.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// CheckSchedule refuses a schedule that does not parse or runs more
// often than floor (0: DefaultMinInterval): a schedule is how often the
// server reads the source, and manual syncs are limited to 5 an hour.
func CheckSchedule(s string, floor time.Duration) error {
	if floor <= 0 {
		floor = DefaultMinInterval
	}
	if s == "" || s == "api" {
		return nil
	}
	const help = "use a cron expression, @every 15m, @hourly, @daily, @weekly or api"
	sched, err := cronParser.Parse(s)
	if err != nil {
		return fmt.Errorf("%q: %v (%s)", s, err, help)
	}
	// robfig/cron rounds @every up to a second and drops the sign, so
	// the duration is checked as written too ("@every 0s", "-1s", "1ms").
	if i := strings.Index(s, "@every"); i >= 0 {
		if d, err := time.ParseDuration(strings.TrimSpace(s[i+len("@every"):])); err == nil && d <= 0 {
			return fmt.Errorf("%q: the interval must be positive (%s)", s, help)
		} else if err == nil && d < floor {
			return fmt.Errorf("%q runs more often than every %s, the server's min_schedule_interval", s, floor)
		}
	}
	if gap := minGap(sched, floor); gap < floor {
		return fmt.Errorf("%q runs more often than every %s (every %s at times), the server's min_schedule_interval", s, floor, gap)
	}
	return nil
}

// minGap is the shortest time between two activations of sched, or a
// gap under floor if there is one: a cron expression's over 400 days (its
// pattern repeats within a year but for 29 February). A 5-field
// expression never fires twice in a minute, so a floor of a minute or
// less needs no search.
func minGap(sched cron.Schedule, floor time.Duration) time.Duration {
	if c, ok := sched.(cron.ConstantDelaySchedule); ok {
		return c.Delay
	}
	if floor <= time.Minute {
		return time.Minute
	}
	t := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	end := t.AddDate(0, 0, 400)
	gap := time.Duration(1<<63 - 1)
	prev := sched.Next(t)
	for i := 0; i < 600_000 && !prev.IsZero() && prev.Before(end); i++ {
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		gap = min(gap, next.Sub(prev))
		if gap < floor {
			break
		}
		prev = next
	}
	return gap
}

// ParseSchedule returns the cron schedule, or nil for manual-only imports.
func ParseSchedule(s string) (cron.Schedule, error) {
	if s == "" || s == "api" {
		return nil, nil
	}
	return cronParser.Parse(s)
}
