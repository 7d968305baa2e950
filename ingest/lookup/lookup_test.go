package lookup

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func mustParse(t *testing.T, csv string) *Table {
	t.Helper()
	tab, err := Parse(strings.NewReader(csv), Options{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return tab
}

func TestParseTypes(t *testing.T) {
	in := "\uFEFFid,name,price,qty,active,since,tags,zip,big,note\r\n" +
		`a1,Widget,9.5,3,TRUE,2024-01-02T03:04:05+01:00,"[""x"", ""y""]",02134,12345678901234567890,` + "\r\n" +
		`a2,"Gadget, large",-0.25,0,false,2024-01-02T03:04:05.120Z,[],10001,9007199254740992,"say ""hi""` + "\nbye\"\n" +
		"\n" + // blank lines are skipped
		`a3,1e5,1e999,1.,-,nan,[1],"[""a"",2]",Infinity,2024-01-02` + "\n" +
		`a4,,,,,,,,,` // no trailing newline; all cells empty
	tab := mustParse(t, in)
	want := []struct{ key, row string }{
		{"a1", `{"id":"a1","name":"Widget","price":9.5,"qty":3,"active":true,"since":"2024-01-02T02:04:05Z","tags":["x","y"],"zip":"02134","big":"12345678901234567890"}`},
		{"a2", `{"id":"a2","name":"Gadget, large","price":-0.25,"qty":0,"active":false,"since":"2024-01-02T03:04:05.12Z","tags":[],"zip":10001,"big":9007199254740992,"note":"say \"hi\"\nbye"}`},
		{"a3", `{"id":"a3","name":1e5,"price":"1e999","qty":"1.","active":"-","since":"nan","tags":"[1]","zip":"[\"a\",2]","big":"Infinity","note":"2024-01-02"}`},
		{"a4", `{"id":"a4"}`},
	}
	if tab.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", tab.Len(), len(want))
	}
	for i, w := range want {
		if tab.Key(i) != w.key || string(tab.Row(i)) != w.row {
			t.Errorf("row %d:\n got %s %s\nwant %s %s", i, tab.Key(i), tab.Row(i), w.key, w.row)
		}
		if got, ok := tab.Lookup(w.key); !ok || string(got) != w.row {
			t.Errorf("Lookup(%s) = %s, %v", w.key, got, ok)
		}
	}
	if _, ok := tab.Lookup("nope"); ok {
		t.Error("Lookup of a missing key succeeded")
	}
	if cols := strings.Join(tab.Columns(), ","); cols != "id,name,price,qty,active,since,tags,zip,big,note" {
		t.Errorf("Columns = %s (the BOM must be stripped)", cols)
	}
}

func TestHeaderOnly(t *testing.T) {
	if tab := mustParse(t, "id,v\n"); tab.Len() != 0 {
		t.Fatalf("Len = %d", tab.Len())
	}
}

func TestHeaderErrors(t *testing.T) {
	cases := map[string]string{
		"":                  "the file is empty",
		"\uFEFF":            "the file is empty",
		"id\na\n":           "at least 2 columns",
		"id,v,v\n":          `column 3: name "v" is already used by column 2`,
		"id, \n":            "column 2: name is blank",
		"id,\n":             "column 2: name is blank",
		"id,\xffx\n":        "not valid UTF-8",
		"id,a\"b\n":         `bare "`,
		"\"id,v\n1,2\n":     "extraneous or missing",
		"ID,id\nA,1\n":      "", // names are case-sensitive: valid
		"id,v\r\nk,1\r\n":   "",
		"\"i\"\"d\",v\nk,1": "",
	}
	for in, want := range cases {
		_, err := Parse(strings.NewReader(in), Options{})
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", in, err)
			}
			continue
		}
		var re *RowErrors
		if !errors.Is(err, ErrInvalid) || errors.As(err, &re) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want a header error containing %q", in, err, want)
		}
	}
}

func TestRowErrors(t *testing.T) {
	in := "id,v,w\n" +
		"a,1,2\n" + // row 1, line 2: fine
		",1,2\n" + // row 2: blank key
		"  ,1,2\n" + // row 3: blank key
		"a,3,4\n" + // row 4: duplicate
		"b,1\n" + // row 5: short
		"c,1,2,3\n" + // row 6: long
		"d,x\"y,2\n" + // row 7: bare quote
		"e,\"multi\nline\",2\n" + // row 8, lines 9-10: fine
		"f,\xff,2\n" + // row 9, line 11: invalid UTF-8
		"g,1,2\n" + // row 10: fine
		"h\x00,1,2\n" + // row 11, line 13: NUL in the key
		"i,1\x00,2\n" // row 12: NUL in a cell is fine (escaped in the row's JSON)
	_, err := Parse(strings.NewReader(in), Options{})
	var re *RowErrors
	if !errors.As(err, &re) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want *RowErrors", err)
	}
	want := []RowError{
		{2, 3, "primary key is required and cannot be blank"},
		{3, 4, "primary key is required and cannot be blank"},
		{4, 5, `duplicate primary key "a" (first in row 1)`},
		{5, 6, "invalid row: wrong number of fields: got 2, want 3"},
		{6, 7, "invalid row: wrong number of fields: got 4, want 3"},
		{7, 8, `invalid row: parse error on line 8, column 4: bare " in non-quoted-field`},
		{9, 11, `column "v": value is not valid UTF-8`},
		{11, 13, "primary key must not contain the NUL character (U+0000)"},
	}
	if re.Total != len(want) || fmt.Sprint(re.Rows) != fmt.Sprint(want) {
		t.Fatalf("got  %d %v\nwant %d %v", re.Total, re.Rows, len(want), want)
	}
	if !strings.HasPrefix(err.Error(), "lookup: 8 row(s) failed validation; row 2 (line 3): primary key") {
		t.Errorf("message: %s", err)
	}
}

func TestFirstTenErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,v\n")
	for i := range 25 {
		if i%2 == 0 {
			fmt.Fprintf(&b, ",%d\n", i) // rows 1, 3, 5, … are bad
		} else {
			fmt.Fprintf(&b, "k%d,%d\n", i, i)
		}
	}
	_, err := Parse(strings.NewReader(b.String()), Options{})
	var re *RowErrors
	if !errors.As(err, &re) {
		t.Fatal(err)
	}
	if re.Total != 13 || len(re.Rows) != MaxReportedErrors || re.Rows[0].Row != 1 || re.Rows[9].Row != 19 {
		t.Fatalf("Total %d, %v", re.Total, re.Rows)
	}
	if !strings.HasSuffix(err.Error(), "; and 3 more") {
		t.Errorf("message: %s", err)
	}
}

// countingReader serves n copies of a row after a header, counting reads.
type countingReader struct {
	r    io.Reader
	read int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	return n, err
}

func TestSizeLimit(t *testing.T) {
	body := "id,v\nk1,1\nk2,2\n" // 15 bytes
	if _, err := Parse(strings.NewReader(body), Options{MaxBytes: 15}); err != nil {
		t.Fatalf("exactly at the limit: %v", err)
	}
	_, err := Parse(strings.NewReader(body), Options{MaxBytes: 14})
	if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalid) {
		t.Fatalf("one byte over: %v", err)
	}

	// An endless body is cut off just past the limit, not read to the end.
	endless := &countingReader{r: io.MultiReader(strings.NewReader("id,v\n"), infinite("k,1\n"))}
	_, err = Parse(endless, Options{MaxBytes: 1 << 20})
	if !errors.Is(err, ErrTooLarge) || endless.read > 1<<20+1 {
		t.Fatalf("err %v after reading %d bytes", err, endless.read)
	}
}

type infinite string

func (s infinite) Read(p []byte) (int, error) {
	n := 0
	for n+len(s) <= len(p) {
		n += copy(p[n:], s)
	}
	return n, nil
}

func TestRowSizeLimit(t *testing.T) {
	// A quote left open makes the rest of the file one field.
	body := "id,v\na,1\nb,\"open\n" + strings.Repeat("c,1\n", 10_000)
	_, err := Parse(strings.NewReader(body), Options{MaxRowBytes: 8 << 10})
	var re *RowErrors
	if !errors.As(err, &re) || re.Rows[0].Row != 2 || re.Rows[0].Line != 3 || !strings.Contains(re.Rows[0].Message, "longer than 8192 bytes") {
		t.Fatalf("err = %v", err)
	}
	_, err = Parse(strings.NewReader(strings.Repeat("h", 20_000)+",v\n"), Options{MaxRowBytes: 8 << 10})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "header: longer than 8192 bytes") {
		t.Fatalf("long header: %v", err)
	}
	// Without the row limit biting, the same mistake is a CSV syntax error.
	_, err = Parse(strings.NewReader("id,v\na,1\nb,\"open\nc,1\n"), Options{})
	if !errors.As(err, &re) || re.Rows[0].Row != 2 || !strings.Contains(re.Rows[0].Message, `extraneous or missing " in quoted-field`) {
		t.Fatalf("err = %v", err)
	}
}

func TestGzipAndReadErrors(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	io.WriteString(zw, "id,v\nk,\"[\"\"a\"\"]\"\n")
	zw.Close()
	zr, err := gzip.NewReader(bytes.NewReader(z.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Parse(zr, Options{})
	if err != nil || string(tab.Row(0)) != `{"id":"k","v":["a"]}` {
		t.Fatalf("%v %v", tab, err)
	}

	// A truncated gzip stream is the reader's error, not a validation one.
	zr, _ = gzip.NewReader(bytes.NewReader(z.Bytes()[:z.Len()-6]))
	_, err = Parse(zr, Options{})
	if err == nil || errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge) {
		t.Fatalf("truncated gzip: %v", err)
	}
}

func TestBuilder(t *testing.T) {
	b := NewBuilder([]string{"id", "price"}, Options{})
	if err := b.Add("a", []byte(`{"price":1.5}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Add("b", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ key, props string }{{"", `{}`}, {"a", `{}`}, {"c", `[]`}, {"d\x00", `{}`}} {
		if err := b.Add(bad.key, []byte(bad.props)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Add(%q, %s) = %v, want ErrInvalid", bad.key, bad.props, err)
		}
	}
	tb := b.Table()
	if row, _ := tb.Lookup("a"); string(row) != `{"id":"a","price":1.5}` || tb.Len() != 2 || string(tb.Row(1)) != `{"id":"b"}` {
		t.Fatalf("rows %s %s", row, tb.Row(1))
	}
	small := NewBuilder([]string{"id"}, Options{MaxBytes: 10})
	if err := small.Add("long-key-x", []byte(`{"v":1}`)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
}
