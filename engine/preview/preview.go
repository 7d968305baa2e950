// Package preview is `tributary preview`: read a sample through an import's
// source, map it, and report what a sync would write, column by column,
// with every problem found. It writes nothing anywhere.
package preview

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/store"
)

// Column is one line of the column report.
type Column struct {
	mapping.ColumnPlan
	SourceType string
	Nullable   bool
	Nulls      int64  // in the sample
	Example    string // first non-null value as JSON
}

// Report is what a preview found.
type Report struct {
	Rows      int64
	Records   [][]byte
	Columns   []Column
	RowErrors []mapping.RowError
	// ConfigErr is set when the import is invalid (static or against the
	// schema); the preview then maps nothing.
	ConfigErr error
}

// Options for Run.
type Options struct {
	Registry *connectors.Registry
	Import   *importspec.Import
	Project  importspec.Project
	Limit    int64
	Now      time.Time
}

// Run connects, discovers, validates and maps up to Limit rows. A nil
// error with a non-nil ConfigErr means the preview ran and the config is
// invalid; an error means the preview itself could not run.
func Run(ctx context.Context, opt Options) (*Report, error) {
	im := opt.Import
	rep := &Report{}
	if err := im.Validate(opt.Registry, func(int64) (importspec.Project, bool) { return opt.Project, true }); err != nil {
		rep.ConfigErr = err
		return rep, nil
	}
	src, err := opt.Registry.Open(ctx, im.SourceConfig())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer src.Close()
	schema, err := src.Discover(ctx, im.TableParams)
	if err != nil {
		if connectors.IsPermanent(err) {
			rep.ConfigErr = &importspec.Error{File: im.File(), Key: "table_params", Msg: err.Error()}
			return rep, nil
		}
		return nil, fmt.Errorf("discover %s: %w", im.TableParams, err)
	}
	if err := im.CheckSchema(schema); err != nil {
		rep.ConfigErr = err
		return rep, nil
	}
	for _, c := range schema.Columns {
		rep.Columns = append(rep.Columns, Column{SourceType: c.SourceType, Nullable: c.Nullable,
			ColumnPlan: mapping.ColumnPlan{Column: c.Name, Type: c.Type}})
	}
	limit := opt.Limit
	if limit <= 0 {
		limit = 20
	}
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	var m *mapping.Mapper
	var out mapping.Records
	var v mapping.Validator
	err = src.Read(ctx, connectors.ReadRequest{Table: im.TableParams, Limit: limit}, func(rec arrow.RecordBatch) error {
		if m == nil {
			var err error
			m, err = mapping.New(mapping.Options{Import: im, Project: opt.Project, RunID: "preview", Schema: schema}, rec.Schema())
			if err != nil {
				return err
			}
			for i, p := range m.Plan() {
				if i < len(rep.Columns) {
					rep.Columns[i].ColumnPlan = p
				}
			}
		}
		rep.observe(rec)
		out.Reset()
		m.Map(rec, &out)
		if im.ImportType == importspec.EventStream {
			var b store.Batch
			rep.RowErrors = append(rep.RowErrors, v.Events(im.ProjectID, now, &out, rep.Rows, &b)...)
		} else {
			for _, e := range out.Errs {
				e.Row += rep.Rows
				rep.RowErrors = append(rep.RowErrors, e)
			}
		}
		for i := 0; i < out.Len(); i++ {
			rep.Records = append(rep.Records, append([]byte(nil), out.Record(i)...))
		}
		rep.Rows += rec.NumRows()
		return nil
	})
	if err != nil {
		if connectors.IsPermanent(err) {
			rep.ConfigErr = &importspec.Error{File: im.File(), Key: "table_params", Msg: err.Error()}
			return rep, nil
		}
		return nil, fmt.Errorf("read %s: %w", im.TableParams, err)
	}
	return rep, nil
}

func (r *Report) observe(rec arrow.RecordBatch) {
	for c := 0; c < int(rec.NumCols()) && c < len(r.Columns); c++ {
		arr := rec.Column(c)
		r.Columns[c].Nulls += int64(arr.NullN())
		if r.Columns[c].Example != "" {
			continue
		}
		for i := 0; i < arr.Len(); i++ {
			if !arr.IsNull(i) {
				ex := string(mapping.AppendValue(nil, arr, i))
				if len(ex) > 60 {
					ex = strings.ToValidUTF8(ex[:57], "") + "..."
				}
				r.Columns[c].Example = ex
				break
			}
		}
	}
}
