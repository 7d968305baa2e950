package importspec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// HistoryOptions makes a people or groups import a History table (SCD-2):
// one row per profile per version, each version valid from its start
// time until the next version's start. Mirror only, and no list or
// object columns, as Mixpanel's History tables.
type HistoryOptions struct {
	// StartTimeColumnName holds when each version starts (timestamp,
	// date, integer epoch or ISO-8601 string).
	StartTimeColumnName string `yaml:"start_time_column_name" json:"start_time_column_name"`
}

// IsHistory reports whether the import reads a History table.
func (im *Import) IsHistory() bool { return im.History != nil }

// history checks the history options (before connecting).
func (v *validator) history() {
	im := v.im
	if im.History == nil {
		return
	}
	if im.ImportType != People && im.ImportType != Groups {
		v.add("history", "", "applies to people and groups imports only")
	}
	if !im.IsMirror() {
		v.add("history", "", "needs sync_mode mirror (mirror_mode): versions are inserted, updated and deleted")
	}
	if im.History.StartTimeColumnName == "" {
		v.add("history.start_time_column_name", "", "is required (the column holding when each version starts)")
	}
	if im.JSONPropertiesColumnName != "" {
		v.add("json_properties_column_name", im.JSONPropertiesColumnName, "is not supported by History tables (no object columns)")
	}
}

// checkHistorySchema refuses a History table's start column when it is
// missing or not a time, and any list or object column it would import.
func (v *validator) checkHistorySchema(s *connectors.Schema) {
	im := v.im
	if im.History == nil || im.History.StartTimeColumnName == "" {
		return
	}
	name := im.History.StartTimeColumnName
	if c, ok := s.Column(name); !ok {
		v.add("history.start_time_column_name", name, "no such column in "+im.TableParams.String())
	} else if !timeType(c.Type) {
		v.add("history.start_time_column_name", name, fmt.Sprintf("is %s; the start time must be a timestamp, date, integer epoch or ISO-8601 string", typeName(c)))
	}
	for _, c := range s.Columns {
		if slices.Contains(im.ExcludeColumns, c.Name) || !nested(c) {
			continue
		}
		v.add("table_params", c.Name, fmt.Sprintf("column %s is %s; History tables take no list or object columns (exclude it with exclude_columns or flatten it in SQL)",
			c.Name, typeName(c)))
	}
}

// nested reports a list, struct, map or JSON column.
func nested(c connectors.Column) bool {
	switch c.Type.ID() {
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW, arrow.STRUCT, arrow.MAP:
		return true
	}
	switch strings.ToUpper(c.SourceType) {
	case "JSON", "JSONB", "VARIANT", "OBJECT", "ARRAY", "SUPER":
		return true
	}
	return false
}

// ForHistory returns the import as a History run maps it: the start
// column plays the time column's part, so it is read as a time and never
// becomes a property. im itself is unchanged.
func (im *Import) ForHistory() *Import {
	if im.History == nil {
		return im
	}
	c := *im
	c.TimeColumnName = im.History.StartTimeColumnName
	return &c
}
