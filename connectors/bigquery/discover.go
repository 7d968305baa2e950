package bigquery

import (
	"context"
	"fmt"
	"strings"

	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"

	"github.com/tributary-dev/tributary/connectors"
)

// tableRef is a fully qualified table.
type tableRef struct{ project, dataset, table string }

func (r tableRef) String() string { return r.project + "." + r.dataset + "." + r.table }

// sql renders the reference for a query's FROM clause.
func (r tableRef) sql() string {
	return quoteIdent(r.project) + "." + quoteIdent(r.dataset) + "." + quoteIdent(r.table)
}

// path is the resource name the Storage Read API expects.
func (r tableRef) path() string {
	return "projects/" + r.project + "/datasets/" + r.dataset + "/tables/" + r.table
}

// ref resolves a table name: table, dataset.table or project.dataset.table
// (also `…` quoted, or the legacy project:dataset.table).
func (s *Source) ref(name string) (tableRef, error) {
	n := strings.ReplaceAll(strings.TrimSpace(name), "`", "")
	if i := strings.IndexByte(n, ':'); i > 0 {
		n = n[:i] + "." + n[i+1:]
	}
	parts := strings.Split(n, ".")
	for _, p := range parts {
		if p == "" {
			return tableRef{}, connectors.Permanent(fmt.Errorf("%w: table %q: want table, dataset.table or project.dataset.table", connectors.ErrBadRequest, name))
		}
	}
	switch len(parts) {
	case 1:
		if s.dataset == "" {
			return tableRef{}, connectors.Permanent(fmt.Errorf("%w: table %q has no dataset: qualify it (dataset.table) or set source.dataset", connectors.ErrBadRequest, name))
		}
		return tableRef{s.project, s.dataset, parts[0]}, nil
	case 2:
		return tableRef{s.project, parts[0], parts[1]}, nil
	case 3:
		return tableRef{parts[0], parts[1], parts[2]}, nil
	}
	return tableRef{}, connectors.Permanent(fmt.Errorf("%w: table %q: want table, dataset.table or project.dataset.table", connectors.ErrBadRequest, name))
}

func (s *Source) handle(r tableRef) *bq.Table {
	return s.rest.DatasetInProject(r.project, r.dataset).Table(r.table)
}

// Discover describes a table from its metadata (REQUIRED columns are NOT
// NULL; the primary key is the table's unenforced PRIMARY KEY constraint),
// or a query from a dry run.
func (s *Source) Discover(ctx context.Context, t connectors.Table) (*connectors.Schema, error) {
	if (t.Name == "") == (t.Query == "") {
		return nil, fmt.Errorf("%w: exactly one of table or query", connectors.ErrBadRequest)
	}
	op := "discover " + t.String()
	if t.Query != "" {
		sql := cleanQuery(t.Query)
		if err := s.checkQuery(ctx, op, sql); err != nil {
			return nil, err
		}
		schema, err := s.querySchema(ctx, sql)
		if err != nil {
			return nil, classify(ctx, op, err)
		}
		cols, _, err := columns(schema)
		if err != nil {
			return nil, connectors.Permanent(fmt.Errorf("bigquery source: %s: %w", op, err))
		}
		for i := range cols {
			cols[i].Nullable = true // a query's columns stay nullable, as for the other sources
		}
		return &connectors.Schema{Columns: cols}, nil
	}
	r, err := s.ref(t.Name)
	if err != nil {
		return nil, err
	}
	md, err := s.handle(r).Metadata(ctx)
	if err != nil {
		return nil, classify(ctx, op, err)
	}
	cols, _, err := columns(md.Schema)
	if err != nil {
		return nil, connectors.Permanent(fmt.Errorf("bigquery source: %s: %w", op, err))
	}
	out := &connectors.Schema{Columns: cols}
	if tc := md.TableConstraints; tc != nil && tc.PrimaryKey != nil {
		out.PrimaryKey = append(out.PrimaryKey, tc.PrimaryKey.Columns...)
	}
	return out, nil
}

// querySchema is a query's result schema. A dry run is free and reads no
// data; when the service's dry run reports no schema (the emulator), the
// query runs with LIMIT 0 instead.
func (s *Source) querySchema(ctx context.Context, sql string) (bq.Schema, error) {
	qs, err := s.dryRun(ctx, sql)
	if err != nil {
		return nil, err
	}
	if qs != nil && len(qs.Schema) > 0 {
		return qs.Schema, nil
	}
	q := s.rest.Query("SELECT * FROM (" + sql + "\n) LIMIT 0")
	q.Location = s.location
	it, err := q.Read(ctx)
	if err != nil {
		return nil, err
	}
	var row []bq.Value
	if err := it.Next(&row); err != nil && err != iterator.Done {
		return nil, err
	}
	return it.Schema, nil
}
