package run

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
)

// QuarantineStore is what a replay needs: the quarantined rows, their
// removal once imported, and the ledger.
type QuarantineStore interface {
	LedgerStore
	Quarantined(ctx context.Context, project int64, importID string, after *[16]byte, limit int) ([]store.QuarantineRow, error)
	Unquarantine(ctx context.Context, project int64, importID string, hashes [][16]byte) error
}

// ErrNoQuarantine: the store keeps no quarantine.
var ErrNoQuarantine = errors.New("the store keeps no quarantine")

// replayPage is how many quarantined rows a replay takes at a time.
const replayPage = 500

// replay runs an import's quarantined rows through the import's current
// mapping and validation, as a run reading them from the source would:
// those that pass are written (deduplicated by their $insert_id as
// always) and leave the quarantine; those refused again stay, with the
// new reason. The ledger records each under the replay's run. The source
// is asked only for its schema (the primary key the $insert_id derives
// from), not for rows.
func (r *Runner) replay(ctx context.Context, im *importspec.Import, project importspec.Project, opt Options, st *Stats) error {
	// A lookup table is replaced whole by each run: a replay's rows alone
	// would replace it.
	if im.ImportType == importspec.LookupTable {
		return fmt.Errorf("import %s: %w: replay of %s", im.ID, ErrNotSupported, im.ImportType)
	}
	qs, ok := r.Store.(QuarantineStore)
	if !ok {
		return fmt.Errorf("import %s: %w", im.ID, ErrNoQuarantine)
	}
	src, err := r.Registry.Open(ctx, im.SourceConfig())
	if err != nil {
		return fmt.Errorf("import %s: connect: %w", im.ID, err)
	}
	defer src.Close()
	schema, err := src.Discover(ctx, im.TableParams)
	if err != nil {
		return fmt.Errorf("import %s: discover: %w", im.ID, err)
	}
	p := &pass{r: r, im: im, project: project, opt: opt, st: st,
		ledger: newLedger(r.Store, im.ProjectID, im.ID, opt.RunID, st.Started.UnixMilli())}
	if p.ledger == nil {
		return fmt.Errorf("import %s: %w", im.ID, ErrNoQuarantine)
	}
	p.ledger.again = [][16]byte{}
	var after *[16]byte
	for {
		page, err := qs.Quarantined(ctx, im.ProjectID, im.ID, after, replayPage)
		if err != nil {
			return fmt.Errorf("import %s: read quarantine: %w", im.ID, err)
		}
		if len(page) == 0 {
			break
		}
		after = &page[len(page)-1].Hash
		if err := p.replayPage(ctx, schema, page); err != nil {
			return fmt.Errorf("import %s: replay: %w", im.ID, err)
		}
		slices.SortFunc(p.ledger.again, func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
		var done [][16]byte
		for _, q := range page {
			if _, again := slices.BinarySearchFunc(p.ledger.again, q.Hash, func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) }); !again {
				done = append(done, q.Hash)
			}
		}
		if err := qs.Unquarantine(context.WithoutCancel(ctx), im.ProjectID, im.ID, done); err != nil {
			return fmt.Errorf("import %s: unquarantine: %w", im.ID, err)
		}
		p.ledger.again = p.ledger.again[:0]
		if len(page) < replayPage {
			break
		}
	}
	r.log().Info("replay finished", "import", im.ID, "run", opt.RunID, "rows", st.RowsRead,
		"imported", st.Imported, "duplicates", st.Duplicates, "failed", st.Failed)
	return nil
}

// replayPage runs one page of quarantined rows through batchers, a new
// one whenever the rows' Arrow schema changes (the mapper is built for
// one schema).
func (p *pass) replayPage(ctx context.Context, schema *connectors.Schema, page []store.QuarantineRow) error {
	var recs []arrow.RecordBatch
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	for _, q := range page {
		rec, err := DecodeRow(q.Row)
		if err != nil {
			// Unreadable: refuse it again so it stays, with the reason.
			p.ledger.again = append(p.ledger.again, q.Hash)
			p.r.log().Warn("replay: unreadable quarantined row", "import", p.im.ID, "key", q.Key, "err", err)
			continue
		}
		recs = append(recs, rec)
	}
	for start := 0; start < len(recs); {
		end := start + 1
		for end < len(recs) && recs[end].Schema().Equal(recs[start].Schema()) {
			end++
		}
		b := &batcher{p: p, schema: schema, base: p.st.RowsRead}
		err := b.read(ctx, recordSource(recs[start:end]), connectors.ReadRequest{})
		if lerr := p.ledger.flush(ctx, true); lerr != nil && err == nil {
			err = lerr
		}
		if err != nil {
			return err
		}
		start = end
	}
	return nil
}

// recordSource reads records held in memory (a replay's rows) the way a
// source's Read hands batches over.
type recordSource []arrow.RecordBatch

func (rs recordSource) Read(ctx context.Context, _ connectors.ReadRequest, fn func(arrow.RecordBatch) error) error {
	for _, rec := range rs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return nil
}
