package mapping

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/internal/config"
)

// frozenDigests are SHA-256 digests of everything Map wrote for generated
// batches. Records and derived $insert_ids must not change: ids already
// imported would no longer dedup against a re-read. They were taken from
// the implementation before the performance work (fastjson flattening,
// jsonw strings, streaming xxh3), then retaken once when the flattener
// stopped writing fastjson's non-JSON output (NaN, loose numbers, Go
// escapes; see strictJSONNumber): a digest over just the rows whose old
// record was JSON, ids and errors included, was checked equal between the
// two implementations, so only rows the validator used to refuse changed.
var frozenDigests = map[string]string{
	"events":           "15ac756188919957da4816f408428a4448b4b52cfb673ff59a0d789b9996a772",
	"events-no-pk":     "6e4bdef31d0b901c256fcc2aa113a8fa73308c699f21f46387f804cf7eff764a",
	"events-original":  "3e8b4c1b011c48eb09cfd5a10ec5d51f3bccaa8b3e111675de7e0ad941b32773",
	"events-insert-id": "3e0d5b9ebab759e978eaad6c2db87ce872446add35b555af7de0968ec10f248c",
	"people":           "ce7eba91153885fd1f9d11e710207976142b124e6f45df7078ed0b79b5e78283",
	"groups":           "8ad39c575161c7051f5eecd9d3903349baaa35397b22c241a9f7466eb0d61de7",
	"lookup":           "b97ffa6e4ca2cba056b481fb78a78f3deea46dd30d396236669dcbd2b8663e46",
	"bench":            "8270230f269d116871f60a7f3b1ebb0d088dde29bf18acf947a51fee4dd3c54d",
}

func TestOutputFrozen(t *testing.T) {
	rec := buildWide(randomWideRows(rand.New(rand.NewPCG(3, 5)), 3000))
	defer rec.Release()
	orig, withID, noPK := eventVariants()
	runs := []struct {
		name       string
		im         *importspec.Import
		schema     *connectors.Schema
		simplified bool
	}{
		{"events", eventsImport(), wideConnSchema(), true},
		{"events-no-pk", eventsImport(), noPK, true},
		{"events-original", orig, noPK, false},
		{"events-insert-id", withID, noPK, true},
		{"people", &importspec.Import{ID: "users", ImportType: importspec.People, UserColumnName: "user_id",
			JSONPropertiesColumnName: "props"}, noPK, true},
		{"groups", &importspec.Import{ID: "companies", ImportType: importspec.Groups, GroupKey: "company_id",
			GroupIDColumn: "device_id", JSONPropertiesColumnName: "props"}, noPK, true},
		{"lookup", &importspec.Import{ID: "items", ImportType: importspec.LookupTable, LookupTableID: "items",
			PropertyKeyColumnName: "id"}, wideConnSchema(), true},
	}
	for _, r := range runs {
		m, err := New(Options{Import: r.im, Project: importspec.Project{ID: 1, Mode: modeOf(r.simplified)}, RunID: "run-1", Schema: r.schema}, wideSchema)
		if err != nil {
			t.Fatal(err)
		}
		var out Records
		h := sha256.New()
		for pass := 0; pass < 2; pass++ { // the second pass reuses every buffer
			out.Reset()
			m.Map(rec, &out)
		}
		h.Write(out.Buf)
		for i := range out.Len() {
			if !json.Valid(out.Record(i)) {
				t.Fatalf("%s: row %d is not JSON: %s", r.name, out.Rows[i], out.Record(i))
			}
			fmt.Fprintf(h, "|%d %d %s", out.Ends[i], out.Rows[i], out.Key(i))
		}
		for _, e := range out.Errs {
			fmt.Fprintf(h, "|%v", e)
		}
		checkDigest(t, r.name, h.Sum(nil))
	}
	m := benchMapper(t)
	h := sha256.New()
	var out Records
	for s := int64(0); s < 3; s++ {
		b := benchBatch(4096, s)
		out.Reset()
		m.Map(b, &out)
		b.Release()
		h.Write(out.Buf)
	}
	checkDigest(t, "bench", h.Sum(nil))
}

// eventVariants are event imports besides eventsImport: Original ID
// Merge with a distinct_id column, and a given $insert_id column; noPK is
// the wide schema without its primary key (ids hash the whole row).
func eventVariants() (orig, withID *importspec.Import, noPK *connectors.Schema) {
	noPK = wideConnSchema()
	noPK.PrimaryKey = nil
	orig = eventsImport()
	orig.UserColumnName, orig.DeviceColumnName, orig.DistinctIDColumnName = "", "", "user_id"
	withID = eventsImport()
	withID.InsertIDColumnName = "internal_note"
	return orig, withID, noPK
}

func checkDigest(t *testing.T, name string, sum []byte) {
	t.Helper()
	if got := hex.EncodeToString(sum); got != frozenDigests[name] {
		t.Errorf("%s: output digest %s, want %s", name, got, frozenDigests[name])
	}
}

var frozenStrings = []string{"", "a", "plain text", "Zürich", "São Paulo", "日本語", "q\"uote", `back\slash`, "nl\nx", "tab\t",
	"\x00\x01\x1f", "\x7f", "\xff\xfe", "bad \xc3 utf8", "\u2028\u2029", "😀", "\ud7ff\ue000", "null", "undefined", "-1", "0",
	strings.Repeat("long ", 80), strings.Repeat("ü", 300)}

func randomWideRows(r *rand.Rand, n int) []wideRow {
	str := func(nullable bool) *string {
		if nullable && r.IntN(6) == 0 {
			return nil
		}
		s := frozenStrings[r.IntN(len(frozenStrings))]
		if r.IntN(3) == 0 {
			s += fmt.Sprint(r.IntN(1000))
		}
		return &s
	}
	rows := make([]wideRow, n)
	for k := range rows {
		w := &rows[k]
		w.id = int64(k)*7 - 300
		w.event, w.user, w.device, w.city, w.note = str(true), str(true), str(true), str(true), str(true)
		if r.IntN(20) > 0 {
			at := t0.Add(time.Duration(r.Int64N(1e18) - 5e17))
			w.at = &at
		}
		switch r.IntN(8) {
		case 0:
		case 1:
			w.props = str(false)
		case 2: // beyond one xxh3 block (1 KiB) of hashed input
			var b strings.Builder
			b.WriteString(`{"pad":"` + strings.Repeat("x", 1500) + `"`)
			for j := 0; j < 40; j++ {
				fmt.Fprintf(&b, `,"k%d":{"v":%d,"s":"%s"}`, j, j, "é\\n")
			}
			b.WriteString("}")
			s := b.String()
			w.props = &s
		default:
			var b strings.Builder
			genObject(r, &b, 0)
			s := b.String()
			w.props = &s
		}
		if r.IntN(7) == 0 {
			w.shippingNull = true
		}
		if r.IntN(5) > 0 {
			w.zip = ptr(int32(r.Uint32()))
		}
		if r.IntN(5) > 0 {
			w.amount = ptr(r.Int64() >> r.IntN(64))
		}
		if r.IntN(5) > 0 {
			w.qty = ptr(int32(r.IntN(200) - 100))
		}
		if r.IntN(5) > 0 {
			f := []float64{0, -0.0, 1, 0.1, 1e6, 123456, 1e21, 1e-7, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64,
				math.SmallestNonzeroFloat64}[r.IntN(13)]
			if r.IntN(2) == 0 {
				f = r.NormFloat64() * math.Pow(10, float64(r.IntN(30)-15))
			}
			w.price = &f
		}
		if r.IntN(5) > 0 {
			w.active = ptr(r.IntN(2) == 0)
		}
		if r.IntN(5) > 0 {
			w.day = ptr(int32(r.IntN(2_000_000) - 1_000_000))
		}
		if r.IntN(5) > 0 {
			w.tags = []string{}
			for j := r.IntN(4); j > 0; j-- {
				w.tags = append(w.tags, *str(false))
			}
		}
		if r.IntN(3) == 0 {
			w.attrs = map[string]int64{*str(false): r.Int64N(100)} // one key: map order is random
		}
		if r.IntN(3) == 0 {
			w.raw = []byte(*str(false))
		}
	}
	return rows
}

// A batch that is a slice of another (non-zero array offsets) maps its
// rows exactly as the whole batch does.
func TestSlicedBatchMatches(t *testing.T) {
	rec := buildWide(randomWideRows(rand.New(rand.NewPCG(8, 9)), 1500))
	defer rec.Release()
	noPK := wideConnSchema()
	noPK.PrimaryKey = nil
	for _, schema := range []*connectors.Schema{wideConnSchema(), noPK} {
		m, err := New(Options{Import: eventsImport(), Project: importspec.Project{ID: 1, Mode: config.IDSimplified}, RunID: "r", Schema: schema}, wideSchema)
		if err != nil {
			t.Fatal(err)
		}
		var whole, part Records
		m.Map(rec, &whole)
		byRow := map[int32]string{}
		for i := range whole.Len() {
			byRow[whole.Rows[i]] = string(whole.Record(i))
		}
		const from = 37
		sl := rec.NewSlice(from, 1400)
		m.Map(sl, &part)
		sl.Release()
		if part.Len() == 0 {
			t.Fatal("no records")
		}
		for i := range part.Len() {
			if got, want := string(part.Record(i)), byRow[part.Rows[i]+from]; got != want {
				t.Fatalf("row %d of the slice:\n got %s\nwant %s", part.Rows[i], got, want)
			}
		}
	}
}
