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

// Validate checks everything that needs no connection. project resolves
// project_id (nil skips the project checks, for files checked alone).
func (im *Import) Validate(reg *connectors.Registry, project func(int64) (Project, bool)) error {
	v := &validator{im: im}
	v.basics(reg)
	v.byType()
	v.schedule()
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
	case im.SyncMode == Mirror:
		v.add("sync_mode", "", "mirror is reserved and not supported yet; use time_based, full_sync or one_time")
	case !oneOf(im.SyncMode, TimeBased, FullSync, OneTime):
		v.add("sync_mode", "", fmt.Sprintf("%q: must be one of time_based, full_sync, one_time", im.SyncMode))
	}
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
			v.add("sync_mode", "", "lookup tables are replaced whole: use full_sync or one_time")
		}
	}
}

func (v *validator) idMode(p Project) {
	im := v.im
	if p.Simplified {
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

func (v *validator) schedule() {
	s := v.im.Schedule
	if s == "" || s == "api" {
		return
	}
	if _, err := cronParser.Parse(s); err != nil {
		v.add("schedule", "", fmt.Sprintf("%q: %v (use a cron expression, @every 15m, @hourly, @daily, @weekly or api)", s, err))
	}
}

// ParseSchedule returns the cron schedule, or nil for manual-only imports.
func ParseSchedule(s string) (cron.Schedule, error) {
	if s == "" || s == "api" {
		return nil, nil
	}
	return cronParser.Parse(s)
}
