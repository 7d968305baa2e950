package bigquery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	bq "cloud.google.com/go/bigquery"
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// plan is one Storage Read session to open and how to present its rows.
type plan struct {
	table       tableRef
	fields      []string // selected fields; nil reads all
	restriction string
	streams     int   // 1 keeps a query job's ORDER BY
	limit       int64 // rows to stop after; 0 reads all
	want        []arrow.Field
	cleanup     func()
}

// Read streams req's rows as Arrow record batches (see the package doc for
// when a query job runs first).
func (s *Source) Read(ctx context.Context, req connectors.ReadRequest, fn func(arrow.RecordBatch) error) error {
	if err := req.Validate(); err != nil {
		return err
	}
	p, err := s.plan(ctx, req)
	if err != nil {
		return err
	}
	defer p.cleanup()
	return s.readSession(ctx, "read "+req.Table.String(), p, fn)
}

func (s *Source) plan(ctx context.Context, req connectors.ReadRequest) (*plan, error) {
	op := "read " + req.Table.String()
	p := &plan{streams: s.streams, cleanup: func() {}}
	if req.Table.Query != "" {
		sql := cleanQuery(req.Table.Query)
		if err := s.checkQuery(ctx, op, sql); err != nil {
			return nil, err
		}
		// Typed watermark literals need the query's column types: a
		// dry run (free) tells them.
		var types map[string]string
		if req.After != nil {
			schema, err := s.querySchema(ctx, sql)
			if err != nil {
				return nil, classify(ctx, op, err)
			}
			if _, types, err = columns(schema); err != nil {
				return nil, connectors.Permanent(fmt.Errorf("bigquery source: %s: %w", op, err))
			}
		}
		// Always wrapped, even for a plain read: in a subquery only a
		// SELECT parses (see checkQuery).
		var err error
		if sql, err = selectSQL("(\n"+sql+"\n) AS q", req, types); err != nil {
			return nil, err
		}
		return s.planQuery(ctx, op, p, sql, req, nil)
	}
	r, err := s.ref(req.Table.Name)
	if err != nil {
		return nil, err
	}
	md, err := s.handle(r).Metadata(ctx)
	if err != nil {
		return nil, classify(ctx, op, err)
	}
	cols, types, err := columns(md.Schema)
	if err != nil {
		return nil, connectors.Permanent(fmt.Errorf("bigquery source: %s: %w", op, err))
	}
	want, err := select_(cols, req.Columns)
	if err != nil {
		return nil, connectors.Permanent(fmt.Errorf("bigquery source: %s: %w", op, err))
	}
	// The Storage Read API reads tables, snapshots and materialised views;
	// a logical view or an external table is read through a query.
	direct := md.Type != bq.ViewTable && md.Type != bq.ExternalTable
	if len(req.OrderBy) > 0 || !direct {
		sql, err := selectSQL(r.sql(), req, types)
		if err != nil {
			return nil, err
		}
		return s.planQuery(ctx, op, p, sql, req, want)
	}
	p.table, p.fields, p.want, p.limit = r, req.Columns, want, req.Limit
	if p.restriction, err = predicate(req.After, types); err != nil {
		return nil, err
	}
	if req.Limit > 0 {
		p.streams = 1 // a preview: no point in starting streams it will not read
	}
	return p, nil
}

// planQuery materialises sql and plans the read of its result table. want
// is the column list when known from a source table (its NUMERIC(P,S)
// scales survive), else the result table's own schema is used.
func (s *Source) planQuery(ctx context.Context, op string, p *plan, sql string, req connectors.ReadRequest, want []arrow.Field) (*plan, error) {
	dest, cleanup, err := s.materialise(ctx, sql)
	if err != nil {
		return nil, classify(ctx, op, err)
	}
	p.table, p.cleanup = dest, cleanup
	if len(req.OrderBy) > 0 {
		p.streams = 1 // a single stream keeps the job's ORDER BY
	}
	if want == nil {
		md, err := s.handle(dest).Metadata(ctx)
		if err != nil {
			cleanup()
			return nil, classify(ctx, op, err)
		}
		cols, _, err := columns(md.Schema)
		if err != nil {
			cleanup()
			return nil, connectors.Permanent(fmt.Errorf("bigquery source: %s: %w", op, err))
		}
		want, _ = select_(cols, nil)
	}
	p.want = want
	return p, nil
}

// select_ returns the Arrow fields of names (all columns when empty).
func select_(cols []connectors.Column, names []string) ([]arrow.Field, error) {
	if len(names) == 0 {
		out := make([]arrow.Field, len(cols))
		for i, c := range cols {
			out[i] = arrow.Field{Name: c.Name, Type: c.Type, Nullable: true}
		}
		return out, nil
	}
	out := make([]arrow.Field, len(names))
	for i, n := range names {
		found := false
		for _, c := range cols {
			if c.Name == n {
				out[i], found = arrow.Field{Name: c.Name, Type: c.Type, Nullable: true}, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: column %q", connectors.ErrNotFound, n)
		}
	}
	return out, nil
}

// materialise runs sql as a query job and returns its result table: a
// table in staging_dataset (deleted by cleanup) when configured, else the
// anonymous table BigQuery writes every query result to.
func (s *Source) materialise(ctx context.Context, sql string) (tableRef, func(), error) {
	q := s.rest.Query(sql)
	q.Location = s.location
	noop := func() {}
	var dest *tableRef
	if s.staging != "" {
		var b [8]byte
		rand.Read(b[:])
		dest = &tableRef{s.project, s.staging, "tributary_read_" + hex.EncodeToString(b[:])}
		q.Dst = s.handle(*dest)
		q.WriteDisposition = bq.WriteTruncate
		q.CreateDisposition = bq.CreateIfNeeded
	}
	job, err := q.Run(ctx)
	if err != nil {
		return tableRef{}, noop, err
	}
	st, err := job.Wait(ctx)
	if err == nil {
		err = st.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			// Stop the job: nobody will read its result.
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = job.Cancel(cctx)
		}
		return tableRef{}, noop, err
	}
	if dest != nil {
		d := *dest
		return d, func() { s.dropStaging(d) }, nil
	}
	// The finished job's resource names the anonymous result table; the
	// one returned at insertion may not have it yet.
	if job, err = s.rest.JobFromProject(ctx, job.ProjectID(), job.ID(), job.Location()); err != nil {
		return tableRef{}, noop, err
	}
	cfg, err := job.Config()
	if err != nil {
		return tableRef{}, noop, err
	}
	qc, ok := cfg.(*bq.QueryConfig)
	if !ok || qc.Dst == nil {
		return tableRef{}, noop, connectors.Permanent(errors.New("the query job reported no result table; set source.staging_dataset"))
	}
	return tableRef{qc.Dst.ProjectID, qc.Dst.DatasetID, qc.Dst.TableID}, noop, nil
}

// dropStaging deletes a staging table; a failure is logged, not returned,
// because the rows were read already.
func (s *Source) dropStaging(r tableRef) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.handle(r).Delete(ctx); err != nil {
		s.log.Warn("cannot delete staging table; delete it by hand", "table", r.String(), "err", err)
	}
}
