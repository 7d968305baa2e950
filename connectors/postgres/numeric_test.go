package postgres

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// TestNumericAgainstServer decodes random numerics of many magnitudes and
// scales and compares each with the server's own text rendering.
func TestNumericAgainstServer(t *testing.T) {
	db := newDB(t)
	src := db.open(t)
	db.exec(t, `CREATE TABLE nums AS
		SELECT x::numeric(38,10) AS d38, x::numeric(38,10)::text AS d38_t,
		       round(x, 0)::numeric(20,0) AS d20, round(x, 0)::numeric(20,0)::text AS d20_t,
		       (x / 1e19)::numeric(5,5) AS d5, (x / 1e19)::numeric(5,5)::text AS d5_t,
		       y AS n, y::text AS n_t
		FROM (SELECT round(((random() - 0.5) * 10 ^ (random() * 40 - 12))::numeric, (random() * 10)::int) AS x,
		             round(((random() - 0.5) * 10 ^ (random() * 120 - 60))::numeric, (random() * 70)::int) AS y
		      FROM generate_series(1, 20000)) AS g
		WHERE abs(x) < 1e19`)
	db.exec(t, `INSERT INTO nums (d38, d38_t, n, n_t) VALUES
		(0, '0.0000000000', 0, '0'), (-0.0000000001, '-0.0000000001', 'NaN', 'NaN'),
		(9999999999999999999999999999.9999999999, '9999999999999999999999999999.9999999999', 1e-70, NULL),
		(-1e27, '-1000000000000000000000000000.0000000000', 'Infinity', 'Infinity')`)
	db.exec(t, `UPDATE nums SET n_t = n::text WHERE n_t IS NULL`)
	rows := 0
	err := src.Read(context.Background(), connectors.ReadRequest{Table: connectors.Table{Name: "nums"}}, func(rec arrow.RecordBatch) error {
		for c := 0; c < int(rec.NumCols()); c += 2 {
			if c == 0 && rec.Column(c).DataType().ID() != arrow.DECIMAL128 {
				t.Fatalf("%s read as %s", rec.ColumnName(c), rec.Column(c).DataType())
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				got, want := sourcetest.Canon(rec.Column(c), i), sourcetest.Canon(rec.Column(c+1), i)
				if got != want {
					t.Errorf("%s: decoded %v, server says %v", rec.ColumnName(c), got, want)
				}
			}
		}
		rows += int(rec.NumRows())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows < 10000 {
		t.Fatalf("only %d rows compared", rows)
	}
}

func numericBytes(ndigits, weight int, sign uint16, dscale int, digits ...uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(ndigits))
	b = binary.BigEndian.AppendUint16(b, uint16(int16(weight)))
	b = binary.BigEndian.AppendUint16(b, sign)
	b = binary.BigEndian.AppendUint16(b, uint16(dscale))
	for _, d := range digits {
		b = binary.BigEndian.AppendUint16(b, d)
	}
	return b
}

// TestNumericMalformed feeds messages no server sends: they must fail
// cleanly, not panic or decode to a wrong value.
func TestNumericMalformed(t *testing.T) {
	for name, v := range map[string][]byte{
		"short":      {0, 1},
		"ndigits":    numericBytes(3, 0, numPos, 0, 1),
		"sign":       numericBytes(1, 0, 0x1234, 0, 1),
		"negative n": numericBytes(-1, 0, numPos, 0),
	} {
		if _, err := parseNumeric(v); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	n, err := parseNumeric(numericBytes(2, 0, numPos, 3, 12, 3450)) // 12.345
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.decimal(2); err != errScale {
		t.Errorf("12.345 at scale 2: %v, want errScale", err)
	}
	if d, err := n.decimal(3); err != nil || d.ToString(3) != "12.345" {
		t.Errorf("12.345 at scale 3: %v %v", d.ToString(3), err)
	}
	huge, _ := parseNumeric(numericBytes(1, 12, numPos, 0, 1)) // 10^48
	if _, err := huge.decimal(0); err == nil {
		t.Error("10^48 fitted in decimal128")
	}
}
