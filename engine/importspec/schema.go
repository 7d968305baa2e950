package importspec

import (
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// CheckSchema validates the import against the source's real schema: every
// named column exists and has a usable type.
func (im *Import) CheckSchema(s *connectors.Schema) error {
	v := &validator{im: im}
	col := func(key, name string) (connectors.Column, bool) {
		if name == "" {
			return connectors.Column{}, false
		}
		c, ok := s.Column(name)
		if !ok {
			v.add(key, name, "no such column in "+im.TableParams.String())
		}
		return c, ok
	}
	if c, ok := col("time_column_name", im.TimeColumnName); ok {
		if !timeType(c.Type) {
			v.add("time_column_name", c.Name, fmt.Sprintf("is %s; the time column must be a timestamp, date, integer epoch or ISO-8601 string", typeName(c)))
		}
		if im.ImportType == EventStream && im.SyncMode == FullSync && c.Nullable {
			v.add("time_column_name", c.Name, "is nullable; a full_sync events import needs a NOT NULL time column (spec §2.5)")
		}
	}
	if c, ok := col("insert_time_column_name", im.InsertTimeColumnName); ok && !insertTimeType(c.Type) {
		v.add("insert_time_column_name", c.Name, fmt.Sprintf("is %s; the insert-time column must be a timestamp, date or integer", typeName(c)))
	} else if ok && im.Lookback != "" && integer(c.Type) {
		v.add("lookback", c.Name, fmt.Sprintf("needs a timestamp or date insert-time column; %s is %s (its unit is unknown)", c.Name, typeName(c)))
	}
	if c, ok := col("json_properties_column_name", im.JSONPropertiesColumnName); ok && !jsonType(c.Type) {
		v.add("json_properties_column_name", c.Name, fmt.Sprintf("is %s; it must hold JSON objects (JSON, text, STRUCT or MAP)", typeName(c)))
	}
	for _, kv := range [][2]string{
		{"event_column_name", im.EventColumnName}, {"user_column_name", im.UserColumnName},
		{"device_column_name", im.DeviceColumnName}, {"distinct_id_column_name", im.DistinctIDColumnName},
		{"insert_id_column_name", im.InsertIDColumnName}, {"group_id_column", im.GroupIDColumn},
		{"property_key_column_name", im.PropertyKeyColumnName},
	} {
		if c, ok := col(kv[0], kv[1]); ok && !scalarType(c.Type) {
			v.add(kv[0], c.Name, fmt.Sprintf("is %s; it must be a string or number", typeName(c)))
		}
	}
	cols := make([]string, 0, len(im.PropertyMappings))
	for c := range im.PropertyMappings {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	for _, c := range cols {
		col("property_mappings."+c, c)
	}
	for i, c := range im.ExcludeColumns {
		col(fmt.Sprintf("exclude_columns[%d]", i), c)
	}
	for i, c := range im.KeyColumns {
		col(fmt.Sprintf("key_columns[%d]", i), c)
	}
	v.checkHistorySchema(s)
	return v.errs.Err()
}

func typeName(c connectors.Column) string {
	if c.SourceType != "" {
		return c.SourceType
	}
	return c.Type.String()
}

func integer(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	case arrow.DECIMAL128, arrow.DECIMAL256:
		return t.(arrow.DecimalType).GetScale() == 0
	}
	return false
}

func stringType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return true
	case arrow.EXTENSION:
		return stringType(t.(arrow.ExtensionType).StorageType())
	case arrow.DICTIONARY:
		return stringType(t.(*arrow.DictionaryType).ValueType)
	}
	return false
}

func insertTimeType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
		return true
	}
	return integer(t)
}

func timeType(t arrow.DataType) bool { return insertTimeType(t) || stringType(t) }

func jsonType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRUCT, arrow.MAP, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return stringType(t)
}

func scalarType(t arrow.DataType) bool {
	return stringType(t) || integer(t)
}
