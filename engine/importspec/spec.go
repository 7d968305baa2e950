// Package importspec is the warehouse import model: one declaration of
// what to read and how to map it, loaded from YAML files (and later the app
// API's JSON, which uses the same field names, taken from the public
// Warehouse Connectors API). Validation happens in two steps: Validate
// without connecting (`tributary validate`), CheckSchema against the
// source's real schema (`tributary preview` and every sync).
package importspec

import (
	"maps"
	"time"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/internal/config"
)

// Import types (public API enum values).
const (
	EventStream = "event_stream"
	People      = "people"
	Groups      = "groups"
	LookupTable = "lookup_table"
)

// Sync modes.
const (
	TimeBased = "time_based" // append: rows past the watermark
	FullSync  = "full_sync"
	OneTime   = "one_time"
	Mirror    = "mirror" // inserts, updates and deletes (mirror.go)
)

// Import is one warehouse import.
type Import struct {
	ID         string `yaml:"id" json:"id"`
	ProjectID  int64  `yaml:"project_id" json:"project_id"`
	ImportType string `yaml:"import_type" json:"import_type"`
	SyncMode   string `yaml:"sync_mode" json:"sync_mode"`
	// Source is an inline connection: `kind` plus that kind's fields
	// (import files only; the operator writes them).
	Source map[string]string `yaml:"source,omitempty" json:"source,omitempty"`
	// Connection names one of the operator's connections (the server
	// config's `connections:`) instead of Source; in a file also written
	// `source: {connection: ID}`. Imports created through the app API
	// can only name one.
	Connection  string           `yaml:"warehouse_source_id,omitempty" json:"warehouse_source_id,omitempty"`
	TableParams connectors.Table `yaml:"table_params" json:"table_params"`

	EventName                string            `yaml:"event_name,omitempty" json:"event_name,omitempty"`
	EventColumnName          string            `yaml:"event_column_name,omitempty" json:"event_column_name,omitempty"`
	TimeColumnName           string            `yaml:"time_column_name,omitempty" json:"time_column_name,omitempty"`
	UserColumnName           string            `yaml:"user_column_name,omitempty" json:"user_column_name,omitempty"`
	DeviceColumnName         string            `yaml:"device_column_name,omitempty" json:"device_column_name,omitempty"`
	DistinctIDColumnName     string            `yaml:"distinct_id_column_name,omitempty" json:"distinct_id_column_name,omitempty"`
	InsertIDColumnName       string            `yaml:"insert_id_column_name,omitempty" json:"insert_id_column_name,omitempty"`
	InsertTimeColumnName     string            `yaml:"insert_time_column_name,omitempty" json:"insert_time_column_name,omitempty"`
	JSONPropertiesColumnName string            `yaml:"json_properties_column_name,omitempty" json:"json_properties_column_name,omitempty"`
	PropertyMappings         map[string]string `yaml:"property_mappings,omitempty" json:"property_mappings,omitempty"`
	ExcludeColumns           []string          `yaml:"exclude_columns,omitempty" json:"exclude_columns,omitempty"`
	GroupKey                 string            `yaml:"group_key,omitempty" json:"group_key,omitempty"`
	GroupIDColumn            string            `yaml:"group_id_column,omitempty" json:"group_id_column,omitempty"`
	LookupTableID            string            `yaml:"lookup_table_id,omitempty" json:"lookup_table_id,omitempty"`
	PropertyKeyColumnName    string            `yaml:"property_key_column_name,omitempty" json:"property_key_column_name,omitempty"`
	// MigratedFrom names the analytics tool whose history the table holds
	// (e.g. amplitude); such imports need a Simplified ID Merge project
	// (spec §1).
	MigratedFrom string `yaml:"migrated_from,omitempty" json:"migrated_from,omitempty"`
	// Schedule: a cron expression, @every <duration>, @hourly, @daily,
	// @weekly, or api (manual syncs only).
	Schedule string `yaml:"schedule,omitempty" json:"schedule,omitempty"`
	Paused   bool   `yaml:"paused,omitempty" json:"paused,omitempty"`
	// Lookback re-reads rows whose insert time is up to this long before
	// the committed watermark (time_based only, e.g. "2h"), to catch rows
	// that arrive late with an older insert time; dedup absorbs re-reads.
	Lookback      string `yaml:"lookback,omitempty" json:"lookback,omitempty"`
	MirrorOptions `yaml:",inline"`
	// History makes a people or groups import a History table (history.go).
	History *HistoryOptions `yaml:"history,omitempty" json:"history,omitempty"`

	file string
	// conn is Connection resolved when the import was loaded; never
	// encoded, as it may hold secrets.
	conn *connectors.Config
}

// File is where the import was declared ("" for the API).
func (im *Import) File() string { return im.file }

// SourceConfig is the connection in the connectors package's terms: the
// named connection, or the inline source.
func (im *Import) SourceConfig() connectors.Config {
	if im.conn != nil {
		return connectors.Config{Kind: im.conn.Kind, Fields: maps.Clone(im.conn.Fields)}
	}
	c := connectors.Config{Kind: im.Source["kind"], Fields: map[string]string{}}
	for k, v := range im.Source {
		if k != "kind" {
			c.Fields[k] = v
		}
	}
	return c
}

// SourceKind is the kind of the import's source (duckdb, postgres, …).
func (im *Import) SourceKind() string {
	if im.conn != nil {
		return im.conn.Kind
	}
	return im.Source["kind"]
}

// Event returns the static event name: event_name, or when neither it nor
// event_column_name is set, the table's name (the spec's recommendation).
func (im *Import) Event() string {
	if im.EventName != "" || im.EventColumnName != "" {
		return im.EventName
	}
	return tableBaseName(im.TableParams.Name)
}

func tableBaseName(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' || name[i] == '/' {
			return name[i+1:]
		}
	}
	return name
}

// LookbackDuration is Lookback parsed (0 when unset; Validate has
// refused an unparsable one).
func (im *Import) LookbackDuration() time.Duration {
	d, _ := time.ParseDuration(im.Lookback)
	return d
}

// Project is what validation needs to know about the target project.
type Project struct {
	ID int64
	// Mode is the project's ID management, the configuration's own enum
	// (identity.Mode is the same type); unset means the default,
	// Simplified.
	Mode config.IDManagement
}

// Simplified reports whether the project uses Simplified ID Merge.
func (p Project) Simplified() bool { return p.Mode != config.IDOriginal }
