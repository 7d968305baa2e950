package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/store"
)

// A Mirror sync (sync_mode: mirror) applies the table's inserts, updates
// and deletes since the last run. It reads the table, and for each batch
// of rows looks up the state the store keeps for their keys
// (store.Mirrors: key → row hash and the record the row produced),
// marking them seen by this run's generation; rows whose key is new or
// whose hash changed are recorded as pending and then written. Once the
// read is done, the keys the run did not see are the table's deletes.
// The run ends by settling the pending rows. Memory is bounded by a
// batch and the changes gathered before a flush (mirrorFlushRows):
// nothing is kept per row of the table (store.Mirrors explains
// why a crash at any point neither loses nor repeats a change).
//
// What a change does:
//   - events: an insert writes the event, an update deletes the
//     version the key produced and writes the new one (its $insert_id is
//     derived from the key alone, so it stays the same), a delete deletes
//     the event;
//   - people and groups: an insert or update $sets the row's properties
//     and $unsets those that are NULL; a delete $unsets the table's
//     properties on the profile, or with delete_profiles $deletes it;
//   - lookup tables: changed rows are upserted and deleted rows removed,
//     in one transaction when the run settles (mirrorlookup.go).

// MirrorPlan is what a Mirror run would change (Runner.PlanMirror).
type MirrorPlan struct {
	Inserts, Updates, Deletes, Unchanged int64
	// Samples of the keys (the key columns' values, comma-separated).
	InsertKeys, UpdateKeys []string
}

// ErrChangeLimit fails a Mirror run over its max_deletes or max_change_ratio.
var ErrChangeLimit = errors.New("mirror change limit exceeded")

// ErrNoMirrorStore: the store cannot keep a Mirror sync's state.
var ErrNoMirrorStore = errors.New("the store does not support sync_mode mirror")

const mirrorSamples = 10

// mirrorRun is one pass of a Mirror sync over the table.
type mirrorRun struct {
	r       *Runner
	im      *importspec.Import
	project importspec.Project
	opt     Options
	st      *Stats
	ms      store.Mirrors
	gen     int64       // this run's seen mark; 0 plans without writing
	plan    *MirrorPlan // set when planning
	planned *MirrorPlan // applying: the planning pass's counts, if it ran
	matched int64       // planning: keys found in the state

	schema   *connectors.Schema // discovered, with PrimaryKey = the key
	hasher   rowHasher
	m        *mapping.Mapper
	out      mapping.Records
	v        mapping.Validator
	pv       mapping.ProfileValidator
	batch    store.Batch
	table    *lookup.Builder
	fixed    []string // people and groups: the properties a row sets
	lkDel    []string // lookup tables: the keys deleted (mirrorlookup.go)
	hist     *histRun // History imports (history.go)
	lg       *mirrorLedger
	fg       feedGroup // a change feed's changes not yet applied (mirrorgroup.go)
	props    propArena // the pending events' properties (mirrorapply.go)
	replaced int64     // pending rows whose key had a state row (store.MirrorApply.Replaced)

	// per batch
	keyBuf  []byte
	keyEnd  []int
	order   []int // rows by key, duplicates dropped
	hashes  [][16]byte
	state   []*store.MirrorRow // by position in order
	rows    []store.MirrorRow
	delEvs  []store.EventRef
	changed []int
	oldRef  [][]byte // by row: the ref an updated row replaces
	had     []bool   // by row: its key has a state row (a new one supersedes it)
	sets    store.Batch
	pending map[string]struct{} // keys of the changes not yet flushed
	fixedAt map[string]int      // name → index in fixed
	mark    []uint32            // mark[i] == gen: fixed[i] is set by the update at hand
	markGen uint32
}

// PlanMirror reads the table and reports what the next Mirror run of im
// would change, writing nothing.
func (r *Runner) PlanMirror(ctx context.Context, im *importspec.Import, project importspec.Project) (MirrorPlan, error) {
	var plan MirrorPlan
	var st Stats
	im = im.ForHistory()
	mr := &mirrorRun{r: r, im: im, project: project, st: &st, plan: &plan}
	if err := mr.pass(ctx); err != nil {
		return plan, fmt.Errorf("import %s: %w", im.ID, err)
	}
	return plan, nil
}

// runMirror is Run for a Mirror import: an optional planning pass that
// enforces the import's change limits, then the applying pass, retried
// after transient source errors (applying again is idempotent).
func (r *Runner) runMirror(ctx context.Context, im *importspec.Import, project importspec.Project, opt Options, st *Stats) error {
	im = im.ForHistory()
	var planned *MirrorPlan
	if im.MaxDeletes > 0 || im.MaxChangeRatio > 0 {
		plan, err := r.PlanMirror(ctx, im, project)
		if err != nil {
			return err
		}
		if err := CheckLimits(im, plan); err != nil {
			return fmt.Errorf("import %s: %w", im.ID, connectors.Permanent(err))
		}
		planned = &plan
	}
	if ms, ok := r.Store.(store.Mirrors); ok && opt.RunID != "" {
		defer func() {
			// The counts so far, also of a run that failed, for its history.
			c := store.MirrorCounts{Inserted: st.Inserted, Updated: st.Updated, Deleted: st.Deleted, Unchanged: st.Unchanged,
				Rows: st.tableRows()}
			if err := ms.MirrorRecordRun(context.WithoutCancel(ctx), im.ProjectID, opt.RunID, c); err != nil {
				r.log().Error("sync: saving the mirror run's counts", "import", im.ID, "run", opt.RunID, "err", err)
			}
		}()
	}
	r.noteMirrorSource(ctx, im) // mirrorsource.go
	gen := r.now().UnixNano()
	bo := r.Backoff.withDefaults()
	for attempt := 0; ; attempt++ {
		mr := &mirrorRun{r: r, im: im, project: project, opt: opt, st: st, gen: gen, planned: planned}
		mr.lg = newMirrorLedger(r.Store, mr)
		err := mr.pass(ctx)
		if lerr := mr.lg.close(ctx); lerr != nil && err == nil {
			err = connectors.Permanent(lerr)
		}
		if err == nil {
			break
		}
		err = fmt.Errorf("import %s: %w", im.ID, err)
		if ctx.Err() != nil || connectors.IsPermanent(err) || attempt+1 >= bo.Attempts {
			return err
		}
		wait := bo.delay(attempt)
		r.log().Warn("sync: transient source error, retrying", "import", im.ID, "run", opt.RunID,
			"attempt", attempt+1, "wait", wait.Round(time.Millisecond), "err", err)
		st.retried(r.now(), err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("import %s: %w", im.ID, ctx.Err())
		}
	}
	r.log().Info("sync finished", "import", im.ID, "run", opt.RunID, "mode", "mirror", "rows", st.RowsRead,
		"inserted", st.Inserted, "updated", st.Updated, "deleted", st.Deleted, "unchanged", st.Unchanged,
		"failed", st.Failed, "retries", st.Retries)
	return nil
}

// CheckLimits fails when plan exceeds the import's max_deletes or
// max_change_ratio (ErrChangeLimit).
func CheckLimits(im *importspec.Import, p MirrorPlan) error {
	if im.MaxDeletes > 0 && p.Deletes > im.MaxDeletes {
		return fmt.Errorf("%w: the run would delete %d rows, max_deletes is %d; nothing was applied (check the table, then raise max_deletes)",
			ErrChangeLimit, p.Deletes, im.MaxDeletes)
	}
	// The first run (an empty state) is all inserts: no ratio applies.
	if im.MaxChangeRatio > 0 && p.Updates+p.Unchanged+p.Deletes > 0 {
		changes := p.Inserts + p.Updates + p.Deletes
		base := max(p.Inserts+p.Updates+p.Unchanged, p.Updates+p.Unchanged+p.Deletes, 1)
		if ratio := float64(changes) / float64(base); ratio > im.MaxChangeRatio {
			return fmt.Errorf("%w: the run would change %d of %d rows (%.1f%%), max_change_ratio is %g; nothing was applied",
				ErrChangeLimit, changes, base, 100*ratio, im.MaxChangeRatio)
		}
	}
	return nil
}

// pass reads the table once and applies (or plans) its changes.
func (mr *mirrorRun) pass(ctx context.Context) error {
	im := mr.im
	ms, ok := mr.r.Store.(store.Mirrors)
	if !ok {
		return connectors.Permanent(ErrNoMirrorStore)
	}
	mr.ms = ms
	if im.IsHistory() && mr.plan == nil {
		h, err := newHistRun(mr)
		if err != nil {
			return err
		}
		mr.hist = h
	}
	src, err := mr.r.Registry.Open(ctx, im.SourceConfig())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer src.Close()
	schema, err := src.Discover(ctx, im.TableParams)
	if err != nil {
		return fmt.Errorf("discover: %w", err)
	}
	if err := im.CheckSchema(schema); err != nil {
		return connectors.Permanent(err)
	}
	key := mirrorKey(im, schema)
	s := *schema
	s.PrimaryKey = key
	mr.schema = &s
	if err := mr.preflight(ctx, src); err != nil {
		return err
	}
	mr.batch = store.Batch{Project: im.ProjectID, Source: store.SourceWarehouse, RunID: mr.opt.RunID}
	if im.ImportType == importspec.LookupTable {
		cols := []string{im.PropertyKeyColumnName}
		for _, c := range schema.Columns {
			if c.Name != im.PropertyKeyColumnName {
				cols = append(cols, c.Name)
			}
		}
		mr.table = lookup.NewBuilder(cols, lookup.Options{})
	}
	if cf, ok := src.(connectors.ChangeFeed); ok && mr.plan == nil && mr.table == nil && im.TableParams.Name != "" && len(key) > 0 {
		return mr.viaFeed(ctx, src, cf, key)
	}
	return mr.fullDiff(ctx, src)
}

// fullDiff reads the whole table, applies its changes and settles.
func (mr *mirrorRun) fullDiff(ctx context.Context, src connectors.Source) error {
	im := mr.im
	mr.expect(ctx, src)
	seen := mr.seen() // mirrorrows.go
	req := connectors.ReadRequest{Table: im.TableParams}
	if err := src.Read(ctx, req, func(rec arrow.RecordBatch) error { return mr.read(ctx, rec) }); err != nil {
		return err
	}
	if err := mr.flush(ctx); err != nil {
		return err
	}
	if mr.plan != nil {
		n, err := mr.ms.MirrorCount(ctx, im.ProjectID, im.ID)
		if err != nil {
			return connectors.Permanent(err)
		}
		mr.plan.Deletes = max(n-mr.matched, 0)
		return nil
	}
	if mr.m == nil {
		// An empty table: the removals still need the table's properties.
		if err := mr.prepare(discovered(mr.schema)); err != nil {
			return err
		}
	}
	if err := mr.deletes(ctx); err != nil {
		return err
	}
	mr.setRows(mr.seen() - seen)
	return mr.settle(ctx)
}

// discovered is the Arrow schema of s's columns, as a read returns them.
func discovered(s *connectors.Schema) *arrow.Schema {
	fields := make([]arrow.Field, len(s.Columns))
	for i, c := range s.Columns {
		fields[i] = arrow.Field{Name: c.Name, Type: c.Type, Nullable: c.Nullable}
	}
	return arrow.NewSchema(fields, nil)
}

// settle applies a lookup table's changes and marks the run's changes done.
func (mr *mirrorRun) settle(ctx context.Context) error {
	im := mr.im
	if err := mr.applyLookup(ctx); err != nil {
		return err
	}
	if err := mr.ms.MirrorSettle(context.WithoutCancel(ctx), im.ProjectID, im.ID, mr.opt.RunID); err != nil {
		return connectors.Permanent(err)
	}
	return nil
}

// mirrorKey is the import's key columns, else the table's primary key,
// else the profile or lookup key column; nil (the whole row) for events
// without either.
func mirrorKey(im *importspec.Import, s *connectors.Schema) []string {
	switch {
	case len(im.KeyColumns) > 0:
		return im.KeyColumns
	case im.IsHistory():
		return historyKey(im)
	case len(s.PrimaryKey) > 0:
		return s.PrimaryKey
	}
	switch im.ImportType {
	case importspec.People:
		if im.UserColumnName != "" {
			return []string{im.UserColumnName}
		}
		return []string{im.DistinctIDColumnName}
	case importspec.Groups:
		return []string{im.GroupIDColumn}
	case importspec.LookupTable:
		return []string{im.PropertyKeyColumnName}
	}
	return nil
}

func (mr *mirrorRun) key(j int) []byte {
	start := 0
	if j > 0 {
		start = mr.keyEnd[j-1]
	}
	return mr.keyBuf[start:mr.keyEnd[j]]
}

// read diffs one batch against the state and applies its changes.
func (mr *mirrorRun) read(ctx context.Context, rec arrow.RecordBatch) error {
	im := mr.im
	n := int(rec.NumRows())
	if err := mr.prepare(rec.Schema()); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	mr.st.RowsRead += int64(n)
	uniq, keys := mr.keys(rec)
	// A key changed again before its pending change is applied: apply
	// that first, so the lookup sees it.
	for _, k := range keys {
		if _, ok := mr.pending[string(k)]; ok {
			if err := mr.flush(ctx); err != nil {
				return err
			}
			break
		}
	}
	mr.state = slices.Grow(mr.state[:0], len(uniq))[:len(uniq)]
	clear(mr.state)
	err := mr.ms.MirrorLookup(ctx, im.ProjectID, im.ID, mr.gen, keys, func(row store.MirrorRow) error {
		j, ok := slices.BinarySearchFunc(keys, row.Key, bytes.Compare)
		if ok {
			mr.state[j] = &row
		}
		return nil
	})
	if err != nil {
		return connectors.Permanent(err)
	}
	mr.classify(rec, uniq)
	if mr.plan != nil {
		return nil
	}
	slices.Sort(mr.changed)
	if len(mr.changed) == 0 {
		mr.progress()
		return nil
	}
	// A feed group's changes are mapped mirrorFlushRows at a time, so the
	// records waiting for a flush stay bounded whatever the group's size.
	changed := mr.changed
	for rest := changed; len(rest) > 0; {
		mr.changed = rest[:min(len(rest), mirrorFlushRows)]
		rest = rest[len(mr.changed):]
		mr.lg.chunk()
		if err := mr.stage(ctx, rec); err != nil {
			return err
		}
	}
	mr.changed = changed
	mr.progress()
	return nil
}

// classify counts uniq's rows as inserted, updated or unchanged against
// the state looked up (mr.state, by position in uniq) and collects the
// changed ones in mr.changed, with the refs updates replace in mr.oldRef.
func (mr *mirrorRun) classify(rec arrow.RecordBatch, uniq []int) {
	n := int(rec.NumRows())
	mr.changed = mr.changed[:0]
	mr.oldRef = slices.Grow(mr.oldRef[:0], n)[:n]
	clear(mr.oldRef)
	mr.had = slices.Grow(mr.had[:0], n)[:n]
	clear(mr.had)
	mr.lg.batch(n)
	for j, i := range uniq {
		old := mr.state[j]
		if old != nil && old.Flag != store.MirrorDeleting {
			mr.matched++
		}
		mr.had[i] = old != nil
		switch {
		case old == nil || old.Flag == store.MirrorDeleting:
			mr.st.Inserted++
			mr.lg.note(i, store.OutcomeInserted)
			if mr.plan != nil {
				mr.plan.Inserts++
				mr.plan.InsertKeys = mr.sample(mr.plan.InsertKeys, rec, i)
			}
		case old.Flag == store.MirrorPending || !bytes.Equal(old.Hash, mr.hashes[i][:]):
			mr.st.Updated++
			mr.lg.note(i, store.OutcomeUpdated)
			if mr.plan != nil {
				mr.plan.Updates++
				mr.plan.UpdateKeys = mr.sample(mr.plan.UpdateKeys, rec, i)
			}
			mr.oldRef[i] = old.Ref
			if mr.table != nil && old.Flag == store.MirrorSettled {
				mr.oldRef[i] = lookupRefKey(old.Ref) // its replaced keys are gone
			}
		default:
			mr.st.Unchanged++
			if mr.plan != nil {
				mr.plan.Unchanged++
			}
			continue
		}
		mr.changed = append(mr.changed, i)
	}
}

// keys computes the key and hash of rec's rows and returns the rows
// sorted by key, a repeated key keeping its last row (identical rows
// collapse into one), with their keys.
func (mr *mirrorRun) keys(rec arrow.RecordBatch) (uniq []int, keys [][]byte) {
	n := int(rec.NumRows())
	mr.keyBuf, mr.keyEnd, mr.hashes = mr.keyBuf[:0], mr.keyEnd[:0], mr.hashes[:0]
	for i := range n {
		mr.keyBuf = mr.hasher.keyOf(mr.keyBuf, rec, i)
		mr.keyEnd = append(mr.keyEnd, len(mr.keyBuf))
		mr.hashes = append(mr.hashes, mr.hasher.hash(rec, i))
	}
	mr.order = mr.order[:0]
	for i := range n {
		mr.order = append(mr.order, i)
	}
	slices.SortStableFunc(mr.order, func(a, b int) int { return bytes.Compare(mr.key(a), mr.key(b)) })
	uniq = mr.order[:0]
	for _, i := range mr.order {
		if len(uniq) > 0 && bytes.Equal(mr.key(uniq[len(uniq)-1]), mr.key(i)) {
			uniq[len(uniq)-1] = i // stable sort: the later row wins
			continue
		}
		uniq = append(uniq, i)
	}
	mr.order = uniq
	keys = make([][]byte, len(uniq))
	for j, i := range uniq {
		keys[j] = mr.key(i)
	}
	return uniq, keys
}

// prepare plans the mapping and the key of the rows' schema, once per pass.
func (mr *mirrorRun) prepare(rs *arrow.Schema) error {
	if mr.m != nil {
		return nil
	}
	im := mr.im
	mr.hasher.key, mr.fixed = nil, nil
	var err error
	mr.m, err = mapping.New(mapping.Options{Import: im, Project: mr.project, RunID: mr.opt.RunID,
		Schema: mr.schema, CommonTags: true, KeyID: true}, rs)
	if err != nil {
		return connectors.Permanent(err)
	}
	if len(mr.schema.PrimaryKey) > 0 {
		for _, k := range mr.schema.PrimaryKey {
			idx := rs.FieldIndices(k)
			if len(idx) == 0 {
				return connectors.Permanent(fmt.Errorf("key column %s is not in the rows read", k))
			}
			mr.hasher.key = append(mr.hasher.key, idx[0])
		}
	}
	mr.fixedAt = map[string]int{}
	for _, name := range mr.m.FixedNames() {
		name = truncateName(name)
		if _, dup := mr.fixedAt[name]; !dup {
			mr.fixedAt[name] = len(mr.fixed)
			mr.fixed = append(mr.fixed, name)
		}
	}
	mr.mark = make([]uint32, len(mr.fixed))
	return nil
}

// sample adds row i's key to dst, up to mirrorSamples of them.
func (mr *mirrorRun) sample(dst []string, rec arrow.RecordBatch, i int) []string {
	if len(dst) >= mirrorSamples {
		return dst
	}
	var b []byte
	if mr.hasher.key == nil {
		b = fmt.Appendf(b, "row %x", mr.hashes[i][:6])
	}
	for k, c := range mr.hasher.key {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, rec.Column(c).ValueStr(i)...)
	}
	return append(dst, string(b))
}

func (mr *mirrorRun) progress() {
	if mr.opt.Progress != nil {
		mr.st.Duration = mr.r.now().Sub(mr.st.Started)
		mr.opt.Progress(*mr.st)
	}
}

func (mr *mirrorRun) fail(errs []mapping.RowError) {
	mr.st.Failed += int64(len(errs))
	for _, f := range errs {
		if len(mr.st.Failures) < maxFailures {
			mr.st.Failures = append(mr.st.Failures, f)
		}
	}
}
