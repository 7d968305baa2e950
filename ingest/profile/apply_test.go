package profile

import (
	"errors"
	"testing"
)

func TestApplyOperators(t *testing.T) {
	tests := []struct {
		name    string
		updates []string
		want    string // the profile after all updates ("null": no profile)
		wantErr error  // category of the last update's error
	}{
		{"set creates", []string{user(`"$set":{"a":1,"b":"x"}`)}, `{"a":1,"b":"x"}`, nil},
		{"set replaces in place", []string{user(`"$set":{"a":1,"b":2}`), user(`"$set":{"a":3,"c":4}`)},
			`{"a":3,"b":2,"c":4}`, nil},
		{"set nested values compactly", []string{user(`"$set":{"o":{ "k" : [1, "é\u0041"] }}`)}, `{"o":{"k":[1,"éA"]}}`, nil},
		{"set empty object creates an empty profile", []string{user(`"$set":{}`)}, `{}`, nil},
		{"set_once only absent", []string{user(`"$set":{"a":1}`), user(`"$set_once":{"a":2,"b":2}`)}, `{"a":1,"b":2}`, nil},
		{"set_once creates", []string{user(`"$set_once":{"first":"x"}`)}, `{"first":"x"}`, nil},
		{"set_once keeps null", []string{user(`"$set":{"a":null}`), user(`"$set_once":{"a":1}`)}, `{"a":null}`, nil},

		{"add to missing counts as 0", []string{user(`"$add":{"n":5}`)}, `{"n":5}`, nil},
		{"add negative", []string{user(`"$set":{"n":1}`), user(`"$add":{"n":-3}`)}, `{"n":-2}`, nil},
		{"add floats", []string{user(`"$set":{"n":0.1}`), user(`"$add":{"n":0.2}`)}, `{"n":0.30000000000000004}`, nil},
		{"add int and float", []string{user(`"$set":{"n":1}`), user(`"$add":{"n":1.5}`)}, `{"n":2.5}`, nil},
		{"add float to integral", []string{user(`"$set":{"n":1.5}`), user(`"$add":{"n":1.5}`)}, `{"n":3}`, nil},
		{"add to null counts as 0", []string{user(`"$set":{"n":null}`), user(`"$add":{"n":2}`)}, `{"n":2}`, nil},
		{"add past int64 becomes float", []string{user(`"$set":{"n":9223372036854775807}`), user(`"$add":{"n":1}`)},
			`{"n":9223372036854776000}`, nil},
		{"add huge uses exponent", []string{user(`"$set":{"n":1e300}`), user(`"$add":{"n":1e300}`)}, `{"n":2e+300}`, nil},
		{"add overflow refused", []string{user(`"$set":{"n":1e308}`), user(`"$add":{"n":1e308}`)}, `{"n":1e308}`, ErrInvalid},
		{"add to string refused, nothing changes", []string{user(`"$set":{"a":1,"s":"5"}`), user(`"$add":{"a":1,"s":1}`)},
			`{"a":1,"s":"5"}`, ErrType},
		{"add to list refused", []string{user(`"$set":{"l":[1]}`), user(`"$add":{"l":1}`)}, `{"l":[1]}`, ErrType},

		{"union creates and de-duplicates", []string{user(`"$union":{"l":["a","b","a"]}`)}, `{"l":["a","b"]}`, nil},
		{"union numbers vs strings", []string{user(`"$set":{"l":["a",1]}`), user(`"$union":{"l":["a","1",1.0,2,"2"]}`)},
			`{"l":["a",1,"1",2,"2"]}`, nil},
		{"union keeps existing duplicates", []string{user(`"$set":{"l":["a","a"]}`), user(`"$union":{"l":["a","b"]}`)},
			`{"l":["a","a","b"]}`, nil},
		{"union single value", []string{user(`"$union":{"l":"x"}`)}, `{"l":["x"]}`, nil},
		{"union empty list creates it", []string{user(`"$union":{"l":[]}`)}, `{"l":[]}`, nil},
		{"union escaped equals plain", []string{user(`"$set":{"l":["a"]}`), user(`"$union":{"l":["\u0061"]}`)}, `{"l":["a"]}`, nil},
		{"union onto null", []string{user(`"$set":{"l":null}`), user(`"$union":{"l":["y"]}`)}, `{"l":["y"]}`, nil},
		{"union onto scalar refused", []string{user(`"$set":{"l":"x"}`), user(`"$union":{"l":["y"]}`)}, `{"l":"x"}`, ErrType},

		{"append creates", []string{user(`"$append":{"l":"a"}`)}, `{"l":["a"]}`, nil},
		{"append keeps duplicates", []string{user(`"$append":{"l":"a"}`), user(`"$append":{"l":"a"}`)}, `{"l":["a","a"]}`, nil},
		{"append object (track_charge)", []string{user(`"$append":{"$transactions":{"$amount":9.5}}`)},
			`{"$transactions":[{"$amount":9.5}]}`, nil},
		{"append list is one element", []string{user(`"$append":{"l":[1,2]}`)}, `{"l":[[1,2]]}`, nil},
		{"append onto object refused", []string{user(`"$set":{"l":{"a":1}}`), user(`"$append":{"l":1}`)}, `{"l":{"a":1}}`, ErrType},

		{"remove all equal", []string{user(`"$set":{"l":["a","b","a",1]}`), user(`"$remove":{"l":"a"}`)}, `{"l":["b",1]}`, nil},
		{"remove absent value is a no-op", []string{user(`"$set":{"l":["a"]}`), user(`"$remove":{"l":"z"}`)}, `{"l":["a"]}`, nil},
		{"remove by numeric value", []string{user(`"$set":{"l":[1,1.0,"1",-0]}`), user(`"$remove":{"l":1}`)}, `{"l":["1",-0]}`, nil},
		{"remove objects", []string{user(`"$set":{"l":[{"a":[1,","]},2]}`), user(`"$remove":{"l":{"a":[1,","]}}`)}, `{"l":[2]}`, nil},
		{"remove from missing property", []string{user(`"$set":{"a":1}`), user(`"$remove":{"l":"a"}`)}, `{"a":1}`, nil},
		{"remove from scalar is a no-op", []string{user(`"$set":{"l":"a"}`), user(`"$remove":{"l":"a"}`)}, `{"l":"a"}`, nil},
		{"remove never creates a profile", []string{user(`"$remove":{"l":"a"}`)}, `null`, nil},

		{"unset", []string{user(`"$set":{"a":1,"b":2,"c":3}`), user(`"$unset":["b","zz"]`)}, `{"a":1,"c":3}`, nil},
		{"unset single name", []string{user(`"$set":{"a":1,"b":2}`), user(`"$unset":"a"`)}, `{"b":2}`, nil},
		{"unset never creates a profile", []string{user(`"$unset":["a"]`)}, `null`, nil},
		{"set after unset appends", []string{user(`"$set":{"a":1,"b":2}`), user(`"$unset":["a"]`), user(`"$set":{"a":3}`)},
			`{"b":2,"a":3}`, nil},

		{"delete", []string{user(`"$set":{"a":1}`), user(`"$delete":"null"`)}, `null`, nil},
		{"delete then set starts afresh", []string{user(`"$set":{"a":1,"b":2}`), user(`"$delete":""`), user(`"$set":{"c":3}`)},
			`{"c":3}`, nil},
		{"delete then unset", []string{user(`"$set":{"a":1}`), user(`"$delete":null`), user(`"$unset":["a"]`)}, `null`, nil},
		{"delete missing profile", []string{user(`"$delete":""`)}, `null`, nil},

		{"group set union remove", []string{group(`"$set":{"plan":"pro","tags":["a"]}`), group(`"$union":{"tags":["b"]}`),
			group(`"$remove":{"tags":"a"}`)}, `{"plan":"pro","tags":["b"]}`, nil},
		{"group delete", []string{group(`"$set":{"plan":"pro"}`), group(`"$delete":"null"`)}, `null`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Profile
			err := run(t, &p, tt.updates...)
			if category(err) != tt.wantErr || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("error %v, want category %v", err, tt.wantErr)
			}
			if got := jsonOf(&p); got != tt.want {
				t.Fatalf("profile %s, want %s", got, tt.want)
			}
		})
	}
}

func TestApplyFieldErrors(t *testing.T) {
	var p Profile
	err := run(t, &p, user(`"$set":{"s":"x"}`), user(`"$add":{"s":1}`))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "$add.s" || !errors.Is(err, ErrType) {
		t.Fatalf("got %#v", err)
	}
	// A hand-built group $add is refused even though the parser never makes one.
	err = Apply(&p, Update{Kind: Group, Op: OpAdd, Props: []Property{{"n", []byte("1")}}}, nowMs)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("group $add: %v", err)
	}
}

// A repeated name in a hand-built Update acts twice, and still atomically.
func TestApplyRepeatedOperands(t *testing.T) {
	var p Profile
	u := Update{Kind: User, Op: OpAdd, IgnoreTime: true,
		Props: []Property{{"n", []byte("1")}, {"n", []byte("2")}}}
	if err := Apply(&p, u, nowMs); err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(&p); got != `{"n":3}` {
		t.Fatalf("got %s", got)
	}
	u.Props = append(u.Props, Property{"n", []byte(`1e308`)}, Property{"n", []byte(`1e308`)})
	if err := Apply(&p, u, nowMs); !errors.Is(err, ErrInvalid) || jsonOf(&p) != `{"n":3}` {
		t.Fatalf("overflow: %v, profile %s", err, jsonOf(&p))
	}
}

func TestApplyLastSeen(t *testing.T) {
	base := `"$token":"tok","$distinct_id":"u1",`
	tests := []struct {
		name    string
		updates []string
		want    string
	}{
		{"server clock", []string{`{` + base + `"$set":{"a":1}}`}, `{"a":1,"$last_seen":"2025-06-01T00:00:00"}`},
		{"$time in float seconds", []string{`{` + base + `"$time":1700000000.999,"$set":{"a":1}}`},
			`{"a":1,"$last_seen":"2023-11-14T22:13:20"}`},
		{"$time in ms", []string{`{` + base + `"$time":1700000001000,"$set":{"a":1}}`},
			`{"a":1,"$last_seen":"2023-11-14T22:13:21"}`},
		{"ignore_time", []string{`{` + base + `"$ignore_time":"true","$set":{"a":1}}`}, `{"a":1}`},
		{"explicit $last_seen wins", []string{`{` + base + `"$set":{"$last_seen":"2020-01-01T00:00:00"}}`},
			`{"$last_seen":"2020-01-01T00:00:00"}`},
		{"unset updates it", []string{`{` + base + `"$ignore_time":true,"$set":{"a":1,"b":2}}`, `{` + base + `"$unset":["a"]}`},
			`{"b":2,"$last_seen":"2025-06-01T00:00:00"}`},
		{"later update moves it", []string{`{` + base + `"$time":1700000000,"$set":{"a":1}}`, `{` + base + `"$add":{"n":1}}`},
			`{"a":1,"$last_seen":"2025-06-01T00:00:00","n":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Profile
			if err := run(t, &p, tt.updates...); err != nil {
				t.Fatal(err)
			}
			if got := jsonOf(&p); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}
