package run

import (
	"testing"
	"time"
)

func TestWatermark(t *testing.T) {
	at := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	n := int64(3)
	c := cursor{Columns: []string{"loaded_at", "id"}, Values: []value{{T: &at}, {I: &n}}}
	if got, ok := Watermark(c.encode()); !ok || !got.Equal(at) {
		t.Errorf("watermark %v %v, want %v", got, ok, at)
	}
	for _, ck := range [][]byte{nil, []byte(completeMark), []byte(`{"columns":["seq"],"values":[{"i":5}]}`)} {
		if _, ok := Watermark(ck); ok {
			t.Errorf("%q: a watermark where there is no insert time", ck)
		}
	}
}
