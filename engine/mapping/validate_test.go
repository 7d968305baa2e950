package mapping

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// TestValidatorCanonicalMatchesGeneral: the decoder's one-pass path for
// canonical records gives exactly what its general path gives, over the
// mapper's output for random wide rows (every import variant that makes
// events) and the benchmark's table; and it takes almost every row.
func TestValidatorCanonicalMatchesGeneral(t *testing.T) {
	now := t0.Add(time.Hour)
	rec := buildWide(randomWideRows(rand.New(rand.NewPCG(7, 11)), 3000))
	defer rec.Release()
	orig, withID, noPK := eventVariants()
	for _, r := range []struct {
		name       string
		im         *importspec.Import
		simplified bool
	}{{"events", eventsImport(), true}, {"events-original", orig, false}, {"events-insert-id", withID, true}} {
		m, err := New(Options{Import: r.im, Project: importspec.Project{ID: 1, Mode: modeOf(r.simplified)}, RunID: "run-1", Schema: noPK}, wideSchema)
		if err != nil {
			t.Fatal(err)
		}
		var out Records
		m.Map(rec, &out)
		hits := compareValidators(t, r.name, now, &out)
		t.Logf("%s: %d of %d records took the canonical path", r.name, hits, out.Len())
		if hits == 0 {
			t.Errorf("%s: no record took the canonical path", r.name)
		}
	}
	m := benchMapper(t)
	b := benchBatch(4096, 1)
	defer b.Release()
	var out Records
	m.Map(b, &out)
	if hits := compareValidators(t, "bench", time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), &out); hits != out.Len() {
		t.Errorf("bench: %d of %d records took the canonical path, want all", hits, out.Len())
	}
}

// compareValidators validates out three ways: the general path, the
// one-pass path reading every record, and the one-pass path trusting the
// mapper's vouching. All must give the same row errors and batch, and a
// vouched record must be one the one-pass path takes when it reads it all.
func compareValidators(t *testing.T, name string, now time.Time, out *Records) int {
	t.Helper()
	var vouched, canon, general Validator
	canon.unvouched, general.general = true, true
	var b0, b1, b2 store.Batch
	e0 := vouched.Events(1, now, out, 0, &b0)
	e1 := canon.Events(1, now, out, 0, &b1)
	e2 := general.Events(1, now, out, 0, &b2)
	if !reflect.DeepEqual(e1, e2) || !reflect.DeepEqual(e0, e1) {
		t.Fatalf("%s: row errors differ:\n vouched   %+v\n canonical %+v\n general   %+v", name, e0, e1, e2)
	}
	for _, b := range []*store.Batch{&b0, &b1} {
		if len(b.Events) != len(b2.Events) {
			t.Fatalf("%s: %d events vs %d", name, len(b.Events), len(b2.Events))
		}
		for i := range b.Events {
			if !reflect.DeepEqual(b.Events[i], b2.Events[i]) {
				t.Fatalf("%s: event %d differs:\n one-pass %+v\n general  %+v", name, i, b.Events[i], b2.Events[i])
			}
		}
		if !reflect.DeepEqual(*b, b2) {
			t.Fatalf("%s: batches differ", name)
		}
	}
	if lent := compareLent(t, name, now, out, e2, &b2); canon.dec.CanonicalHits() > 0 && lent == 0 {
		t.Fatalf("%s: no event's properties were lent", name)
	}
	if h0, h1 := vouched.dec.CanonicalHits(), canon.dec.CanonicalHits(); h0 != h1 {
		t.Fatalf("%s: %d records took the one-pass path when vouched for, %d when read in full", name, h0, h1)
	}
	heads, rests := checkVouches(t, name, out)
	t.Logf("%s: of %d records, %d heads and %d property lists vouched for", name, out.Len(), heads, rests)
	return canon.dec.CanonicalHits()
}

// compareLent validates a copy of out (lending rewrites the records in
// place) with Validator.Lend, as a sync's batcher does: the row errors
// and the batch must be wantErrs and want exactly. It returns how many
// events' Props are the copy's bytes.
func compareLent(t *testing.T, name string, now time.Time, out *Records, wantErrs []RowError, want *store.Batch) int {
	t.Helper()
	cp := *out
	cp.Buf = bytes.Clone(out.Buf)
	v := Validator{Lend: true}
	var b store.Batch
	e := v.Events(1, now, &cp, 0, &b)
	if !reflect.DeepEqual(e, wantErrs) {
		t.Fatalf("%s: row errors differ when lent:\n lent    %+v\n general %+v", name, e, wantErrs)
	}
	if !reflect.DeepEqual(b, *want) {
		t.Fatalf("%s: batches differ when the records are lent", name)
	}
	lent := 0
	lo, hi := uintptr(unsafe.Pointer(unsafe.SliceData(cp.Buf))), uintptr(unsafe.Pointer(unsafe.SliceData(cp.Buf)))+uintptr(len(cp.Buf))
	for i := range b.Events {
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(b.Events[i].Props))); p >= lo && p < hi {
			lent++
		}
	}
	return lent
}

// checkVouches holds each record's vouch to record.CheckVouch, which reads
// the record in full, and returns how many heads and properties were
// vouched for.
func checkVouches(t *testing.T, name string, out *Records) (heads, rests int) {
	t.Helper()
	if len(out.Vouched) != out.Len() {
		t.Fatalf("%s: %d vouches for %d records", name, len(out.Vouched), out.Len())
	}
	for i, v := range out.Vouched {
		if err := record.CheckVouch(out.Record(i), v); err != nil {
			t.Fatalf("%s: record %d: %v (vouch %+v): %s", name, i, err, v, out.Record(i))
		}
		heads += b2i(v.Head)
		rests += b2i(v.Rest)
	}
	return heads, rests
}

// TestUniqueNamesVouch: the mapper vouches for distinct property names
// (which lets the one-pass validator skip the duplicate-key rule) only when
// no two columns write one name; when two do, records are not vouched for
// and the validator refuses them exactly as its general path does.
func TestUniqueNamesVouch(t *testing.T) {
	now := t0.Add(time.Hour)
	rec := buildWide(randomWideRows(rand.New(rand.NewPCG(3, 5)), 500))
	defer rec.Release()
	_, _, noPK := eventVariants()
	for _, tc := range []struct {
		name     string
		mappings map[string]string
		want     bool
	}{
		{"distinct", map[string]string{"amount_usd": "Amount"}, true},
		{"renamed onto a column", map[string]string{"amount_usd": "qty"}, false},
		{"renamed onto a struct field", map[string]string{"qty": "shipping.city"}, false},
	} {
		im := eventsImport()
		im.PropertyMappings = tc.mappings
		m, err := New(Options{Import: im, Project: importspec.Project{ID: 1, Mode: config.IDSimplified}, RunID: "run-1", Schema: noPK}, wideSchema)
		if err != nil {
			t.Fatal(err)
		}
		var out Records
		m.Map(rec, &out)
		if out.UniqueNames != tc.want {
			t.Errorf("%s: UniqueNames = %v, want %v", tc.name, out.UniqueNames, tc.want)
		}
		compareValidators(t, tc.name, now, &out)
		if !tc.want {
			var v Validator
			var b store.Batch
			if errs := v.Events(1, now, &out, 0, &b); len(errs) == 0 {
				t.Errorf("%s: records repeating a name were all accepted", tc.name)
			}
		}
	}
}
