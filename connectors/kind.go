package connectors

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
)

// Config is an import's `source:` block: a kind and its connection fields.
// Fields are flat strings (as in Sling's connection YAML) so one shape
// serves YAML files, JSON from the app API and environment interpolation.
type Config struct {
	Kind   string
	Fields map[string]string
}

// Field documents one connection field of a kind; Kind.Check validates
// against these specs, and the docs and JSON Schema are generated from them.
type Field struct {
	Name     string
	Required bool
	// Secret fields must be given as ${ENV_VAR} and are never logged.
	Secret bool
	// Path fields name a file the server reads (a key, a certificate, a
	// database); GuardPaths refuses the server's own files in them.
	Path bool
	Doc  string
}

// Kind is one source type (duckdb, postgres, snowflake, bigquery).
type Kind struct {
	Name   string
	Doc    string
	Fields []Field
	// Check validates field values beyond presence (enums, numbers); nil
	// means presence checks are enough.
	Check func(fields map[string]string) error
	Open  func(ctx context.Context, fields map[string]string) (Source, error)
}

// Options are the operator's limits on every source of a registry, from
// the server config (server builds them); kinds that need them
// are built with them (duckdb.KindWith, postgres.KindWith).
type Options struct {
	// AllowedPaths are the files and directories a file-reading source
	// may read besides its own database file; empty: none.
	AllowedPaths []string
	// ServerPaths are the server's own files, never readable by a source
	// nor inside an allowed path: any path that starts with one of them
	// (after symlinks are resolved) is refused, so "data/tributary.duckdb"
	// covers the store's write log and key files beside it.
	ServerPaths []string
	// Log gets what a source keeps out of the errors it returns, because
	// errors reach the run history a project user reads (a connection
	// failure's cause could tell an open port from a closed one).
	Log *slog.Logger
}

// Logger is o.Log, or a logger that discards.
func (o Options) Logger() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// FieldError names the offending connection field.
type FieldError struct {
	Field string // e.g. "source.path"
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Registry maps kind names to kinds. It is built once at start-up and then
// only read, so it needs no lock.
type Registry struct{ kinds map[string]Kind }

// NewRegistry returns a registry of the given kinds.
func NewRegistry(kinds ...Kind) *Registry {
	r := &Registry{kinds: make(map[string]Kind, len(kinds))}
	for _, k := range kinds {
		r.kinds[k.Name] = k
	}
	return r
}

// Kinds lists the registered kinds sorted by name.
func (r *Registry) Kinds() []Kind {
	out := make([]Kind, 0, len(r.kinds))
	for _, k := range r.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the kind named name.
func (r *Registry) Lookup(name string) (Kind, bool) {
	k, ok := r.kinds[name]
	return k, ok
}

// Validate checks c against its kind's field specs without connecting.
func (r *Registry) Validate(c Config) error {
	if c.Kind == "" {
		return &FieldError{Field: "source.kind", Msg: "is required (one of " + r.names() + ")"}
	}
	k, ok := r.kinds[c.Kind]
	if !ok {
		return &FieldError{Field: "source.kind", Msg: fmt.Sprintf("unknown kind %q (one of %s)", c.Kind, r.names())}
	}
	known := make(map[string]bool, len(k.Fields))
	for _, f := range k.Fields {
		known[f.Name] = true
		if f.Required && strings.TrimSpace(c.Fields[f.Name]) == "" {
			return &FieldError{Field: "source." + f.Name, Msg: "is required for kind " + k.Name}
		}
	}
	names := make([]string, 0, len(c.Fields))
	for n := range c.Fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !known[n] {
			return &FieldError{Field: "source." + n, Msg: "unknown field for kind " + k.Name}
		}
	}
	if k.Check != nil {
		return k.Check(c.Fields)
	}
	return nil
}

// Open validates c and connects.
func (r *Registry) Open(ctx context.Context, c Config) (Source, error) {
	if err := r.Validate(c); err != nil {
		return nil, Permanent(err)
	}
	return r.kinds[c.Kind].Open(ctx, c.Fields)
}

func (r *Registry) names() string {
	ks := r.Kinds()
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.Name
	}
	return strings.Join(names, ", ")
}
