package integration

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"
)

// TestLookupTables: list, replace (plain and gzip), the 400 that lists bad
// rows, 404, roles, and 413. That a refused upload keeps the previous table
// is the store's all-or-nothing replace (storetest Lookup_Replace).
func TestLookupTables(t *testing.T) {
	s := startServer(t, defaultConfig())
	owner := basicAuth(ownerSA, ownerSecret)
	q := projectQ(mainID)
	put := func(auth authFn, id string, body []byte, gz bool) reply {
		h := map[string]string{"Content-Type": "text/csv"}
		if gz {
			h["Content-Encoding"] = "gzip"
		}
		return s.do(t, request{Method: "PUT", Path: "/lookup-tables/" + id, Query: q, Auth: auth, Header: h, Body: body})
	}
	list := s.do(t, request{Method: "GET", Path: "/lookup-tables", Query: q, Auth: basicAuth(analystSA, analystSec)})
	if list.Status != 200 || !strings.Contains(string(list.Body), `"results":[{"id":"items","name":"Items"}]`) {
		t.Fatalf("list: %s", list)
	}
	if rep := put(owner, "items", []byte("item_id,price\na,1\nb,2\n"), false); rep.Status != 200 || rep.JSON(t)["status"] != "OK" {
		t.Fatalf("replace: %s", rep)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	fmt.Fprint(zw, "item_id,price,tags\na,1.5,\"[\"\"x\"\"]\"\n")
	zw.Close()
	if rep := put(owner, "items", gz.Bytes(), true); rep.Status != 200 {
		t.Fatalf("gzip replace: %s", rep)
	}
	bad := put(owner, "items", []byte("item_id,price\n,1\nc,2,extra\nc,3\n"), false)
	if bad.Status != 400 {
		t.Fatalf("bad csv: %s", bad)
	}
	failed, _ := bad.JSON(t)["failed_records"].([]any)
	// Row 1 has no key: the upload streams into the store, so the first
	// bad row ends it (row 2 has a field too many, row 3 is fine).
	if len(failed) != 1 || fmt.Sprint(failed[0].(map[string]any)["index"]) != "1" {
		t.Fatalf("bad csv lists %v, want row 1 alone: %s", failed, bad)
	}
	if rep := put(owner, "nope", []byte("a,b\n1,2\n"), false); rep.Status != 404 || !strings.Contains(string(rep.Body), "Lookup table with id 'nope' was not found.") {
		t.Fatalf("unknown table: %s", rep)
	}
	if rep := put(basicAuth(analystSA, analystSec), "items", []byte("item_id,p\na,1\n"), false); rep.Status != 403 {
		t.Fatalf("analyst replace: %s", rep)
	}
	if rep := put(nil, "items", []byte("item_id,p\na,1\n"), false); rep.Status != 401 {
		t.Fatalf("no auth: %s", rep)
	}
	// Over 100 MB uncompressed, sent compressed: refused at the limit.
	var big bytes.Buffer
	zw = gzip.NewWriter(&big)
	fmt.Fprint(zw, "item_id,pad\n")
	row := []byte(strings.Repeat("x", 1000) + "\n")
	for i := 0; i < 110_000; i++ {
		fmt.Fprintf(zw, "k%d,", i)
		zw.Write(row)
	}
	zw.Close()
	if rep := put(owner, "items", big.Bytes(), true); rep.Status != 413 {
		t.Fatalf("110 MB table: %s", rep)
	}
}
