package store

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestCheckCommonAndSplice(t *testing.T) {
	for _, c := range []struct {
		common string
		ok     bool
	}{
		{``, true}, {`{}`, true}, {`{"a":1}`, true}, {`{"a":1,"b":{"c":[1, 2]}}`, true},
		{`{ }`, false}, {`{ "a":1}`, false}, {`{"a":1 }`, false}, {`[1]`, false}, {`{"a":`, false},
		{`{"a":1}x`, false}, {`{`, false}, {`"x"`, false}, {`{"a":1}{"b":2}`, false},
	} {
		err := CheckCommon([]byte(c.common))
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadCommon)) {
			t.Errorf("CheckCommon(%q) = %v, want ok=%v", c.common, err, c.ok)
		}
		if !c.ok || c.common == "" {
			continue
		}
		for _, props := range []string{`{}`, `{"n":1}`, `{"n":{"m":[]}}`} {
			got := SpliceProps(nil, []byte(props), []byte(c.common))
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil {
				t.Errorf("SpliceProps(%s, %s) = %s: %v", props, c.common, got, err)
			}
		}
	}
	if got := string(SpliceProps(nil, []byte(`{"n":1}`), []byte(`{"a":true}`))); got != `{"n":1,"a":true}` {
		t.Errorf("splice: %s", got)
	}
}
