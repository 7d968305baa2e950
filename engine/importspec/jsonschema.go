package importspec

import (
	"encoding/json"

	"github.com/tributary-dev/tributary/connectors"
)

// field documents one key of an import file; the JSON Schema editors use
// is generated from this table and the registry's source kinds.
type field struct {
	name, typ, doc string
	enum           []string
}

var fields = []field{
	{"id", "string", "Unique id of the import; tagged on events as $warehouse_import_id.", nil},
	{"project_id", "integer", "Project (from the server config) the data goes to.", nil},
	{"import_type", "string", "What rows become.", []string{EventStream, People, Groups, LookupTable}},
	{"sync_mode", "string", "time_based appends rows past the insert-time watermark; full_sync re-reads the table; one_time runs once; mirror (mirror_mode) applies the table's inserts, updates and deletes.", []string{TimeBased, FullSync, OneTime, Mirror, MirrorMode}},
	{"event_name", "string", "Static event name (default: the table name).", nil},
	{"event_column_name", "string", "Column holding the event name.", nil},
	{"time_column_name", "string", "Event time: timestamp, date, integer epoch (s, ms, µs) or ISO-8601 string.", nil},
	{"user_column_name", "string", "$user_id (Simplified ID Merge), or the profile key of a people import.", nil},
	{"device_column_name", "string", "$device_id (Simplified ID Merge).", nil},
	{"distinct_id_column_name", "string", "distinct_id (Original ID Merge projects).", nil},
	{"insert_id_column_name", "string", "$insert_id; without it one is derived from event, user, time and the row's key.", nil},
	{"insert_time_column_name", "string", "When the row was loaded; required for time_based.", nil},
	{"json_properties_column_name", "string", "JSON column whose keys become properties (table columns win on a clash).", nil},
	{"property_mappings", "object", "Column → property name.", nil},
	{"exclude_columns", "array", "Columns that never become properties.", nil},
	{"group_key", "string", "Group key of a groups import (e.g. company_id).", nil},
	{"group_id_column", "string", "Column holding the group id.", nil},
	{"lookup_table_id", "string", "Lookup table a lookup_table import replaces.", nil},
	{"property_key_column_name", "string", "Key column of a lookup_table import.", nil},
	{"migrated_from", "string", "Tool whose history the table holds (needs a Simplified ID Merge project).", nil},
	{"schedule", "string", "Cron expression (5 fields), @every 15m, @hourly, @daily, @weekly, or api (manual only); never more often than the server's min_schedule_interval (default 1m).", nil},
	{"paused", "boolean", "Paused imports never run.", nil},
	{"key_columns", "array", "mirror only: columns that identify a row when the table has no primary key; without either, identical rows collapse into one.", nil},
	{"delete_profiles", "boolean", "mirror people/groups only: a deleted row deletes the whole profile instead of unsetting the import's properties.", nil},
	{"max_deletes", "integer", "mirror only: a run that would delete more rows fails before applying anything (0: no limit).", nil},
	{"max_change_ratio", "number", "mirror only: a run whose changes exceed this fraction of the table fails before applying anything (0: no limit).", nil},
	{"history", "object", "mirror people/groups only: {start_time_column_name: COL} reads an SCD-2 History table, one row per profile version; no list or object columns.", nil},
	{"lookback", "string", "time_based only: re-read rows whose insert time is this long (e.g. 2h) before the watermark, to catch late rows; dedup absorbs re-reads.", nil},
}

// JSONSchema returns the JSON Schema (draft 2020-12) of an import file.
func JSONSchema(reg *connectors.Registry) ([]byte, error) {
	props := map[string]any{}
	for _, f := range fields {
		p := map[string]any{"type": f.typ, "description": f.doc}
		if f.enum != nil {
			p["enum"] = f.enum
		}
		switch f.typ {
		case "object":
			p["additionalProperties"] = map[string]any{"type": "string"}
		case "array":
			p["items"] = map[string]any{"type": "string"}
		}
		props[f.name] = p
	}
	props["table_params"] = map[string]any{
		"description": "A table (schema-qualified, or a Parquet/CSV path or glob for duckdb) or a SQL query.",
		"type":        "object", "additionalProperties": false,
		"properties": map[string]any{"table": map[string]any{"type": "string"}, "query": map[string]any{"type": "string"}},
		"oneOf":      []any{map[string]any{"required": []string{"table"}}, map[string]any{"required": []string{"query"}}},
	}
	var kinds []any
	for _, k := range reg.Kinds() {
		kp := map[string]any{"kind": map[string]any{"const": k.Name}}
		req := []string{"kind"}
		for _, f := range k.Fields {
			d := map[string]any{"type": "string", "description": f.Doc}
			if f.Secret {
				d["pattern"] = `^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`
				d["description"] = f.Doc + " Secret: give it as ${ENV_VAR}."
			}
			kp[f.Name] = d
			if f.Required {
				req = append(req, f.Name)
			}
		}
		kinds = append(kinds, map[string]any{"description": k.Doc, "type": "object",
			"properties": kp, "required": req, "additionalProperties": false})
	}
	kinds = append(kinds, map[string]any{"description": "A connection the operator declared in the server config (connections:).",
		"type": "object", "properties": map[string]any{"connection": map[string]any{"type": "string"}},
		"required": []string{"connection"}, "additionalProperties": false})
	props["source"] = map[string]any{"description": "The source: {connection: ID} naming a connection of the server config, or an inline connection: kind plus that kind's fields.", "oneOf": kinds}
	props["warehouse_source_id"] = map[string]any{"type": []string{"string", "integer"},
		"description": "Id of a connection the operator declared in the server config (connections:), instead of source."}
	schema := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  "https://github.com/tributary-dev/tributary/docs/import.schema.json",
		"title":                "Tributary warehouse import",
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"id", "project_id", "import_type", "sync_mode", "table_params"},
		"oneOf":                []any{map[string]any{"required": []string{"source"}}, map[string]any{"required": []string{"warehouse_source_id"}}},
		"properties":           props,
	}
	b, err := json.MarshalIndent(schema, "", "  ")
	return append(b, '\n'), err
}
