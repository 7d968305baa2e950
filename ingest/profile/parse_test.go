package profile

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func props(kv ...string) []Property {
	out := make([]Property, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		out = append(out, Property{Name: kv[i], Value: []byte(kv[i+1])})
	}
	return out
}

// The payloads the official SDKs send (public-interface-facts §6 and their
// sources) must all parse.
func TestParseSDKPayloads(t *testing.T) {
	tests := []struct {
		name  string
		group bool
		raw   string
		want  Update
	}{
		{"mixpanel-go PeopleSet", false, `{"$token":"tok","$distinct_id":"u1","$set":{"plan":"pro","$ip":"1.2.3.4"},"$ip":"0"}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpSet, IP: "0", Props: props("plan", `"pro"`, "$ip", `"1.2.3.4"`)}},
		{"mixpanel-go PeopleIncrement", false, `{"$token":"tok","$distinct_id":"u1","$add":{"n":1}}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpAdd, Props: props("n", "1")}},
		{"mixpanel-go PeopleUnionProperty scalar", false, `{"$token":"tok","$distinct_id":"u1","$union":{"l":"a"}}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpUnion, Props: props("l", `["a"]`)}},
		{"mixpanel-go PeopleAppendListProperty", false, `{"$token":"tok","$distinct_id":"u1","$append":{"l":{"x":1}}}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpAppend, Props: props("l", `{"x":1}`)}},
		{"mixpanel-go PeopleRemoveListProperty", false, `{"$token":"tok","$distinct_id":"u1","$remove":{"l":"a"}}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpRemove, Props: props("l", `"a"`)}},
		{"mixpanel-go PeopleDeleteProperty", false, `{"$token":"tok","$distinct_id":"u1","$unset":["a","b"]}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpUnset, Unset: []string{"a", "b"}}},
		{"mixpanel-go PeopleDeleteProfile", false, `{"$token":"tok","$distinct_id":"u1","$delete":"null","$ignore_alias":"true"}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpDelete, IgnoreAlias: true}},
		{"mixpanel-go v1 GroupSet (token)", true, `{"token":"tok","$group_key":"company","$group_id":"acme","$set":{"a":"b"}}`,
			Update{Kind: Group, Token: "tok", GroupKey: "company", GroupID: "acme", Op: OpSet, Props: props("a", `"b"`)}},
		{"mixpanel-go GroupDelete", true, `{"$token":"tok","$group_key":"company","$group_id":"acme","$delete":"null"}`,
			Update{Kind: Group, Token: "tok", GroupKey: "company", GroupID: "acme", Op: OpDelete}},
		{"mixpanel-node set with modifiers", false,
			`{"$token":"tok","$distinct_id":"bob","$set":{"a":1},"$ip":0,"$ignore_time":true,"$time":1700000000,"$latitude":1.5,"$longitude":2}`,
			Update{Kind: User, Token: "tok", DistinctID: "bob", Op: OpSet, IP: "0", IgnoreTime: true, TimeMs: 1_700_000_000_000, Props: props("a", "1")}},
		{"mixpanel-node delete_user", false, `{"$delete":"","$token":"tok","$distinct_id":"bob"}`,
			Update{Kind: User, Token: "tok", DistinctID: "bob", Op: OpDelete}},
		{"mixpanel-python people_set", false, `{"$token":"tok","$time":1700000000.1234567,"$distinct_id":"u1","$set":{"d":"2024-01-01T00:00:00"}}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpSet, TimeMs: 1_700_000_000_123, Props: props("d", `"2024-01-01T00:00:00"`)}},
		{"mixpanel-python group_unset numeric id", true, `{"$token":"tok","$time":1700000000.5,"$group_key":"company","$group_id":42,"$unset":["a"]}`,
			Update{Kind: Group, Token: "tok", GroupKey: "company", GroupID: "42", Op: OpUnset, TimeMs: 1_700_000_000_500, Unset: []string{"a"}}},
		{"mixpanel-python people_delete", false, `{"$token":"tok","$time":1700000000.0,"$distinct_id":7,"$delete":""}`,
			Update{Kind: User, Token: "tok", DistinctID: "7", Op: OpDelete, TimeMs: 1_700_000_000_000}},
		{"mixpanel-utils import_people", false, `{"$token":"tok","$distinct_id":"u1","$ignore_time":true,"$ip":0,"$ignore_alias":false,"$set":{"n":1}}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpSet, IgnoreTime: true, IP: "0", Props: props("n", "1")}},
		{"mixpanel-js with identity keys", false, `{"$set":{"$browser":"Chrome"},"$token":"tok","$distinct_id":"d","$device_id":"dev","$user_id":"u"}`,
			Update{Kind: User, Token: "tok", DistinctID: "d", Op: OpSet, Props: props("$browser", `"Chrome"`)}},
		{"ruby-style ms $time", false, `{"$token":"tok","$distinct_id":"u1","$time":1700000000123,"$set_once":{"a":1}}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpSetOnce, TimeMs: 1_700_000_000_123, Props: props("a", "1")}},
		{"repeated property keeps first position, last value", false, `{"$token":"tok","$distinct_id":"u1","$set":{"a":1,"b":2,"a":3}}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpSet, Props: props("a", "3", "b", "2")}},
		{"repeated operation key: last wins", false, `{"$token":"tok","$distinct_id":"u1","$set":{"a":1},"$set":{"b":2}}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpSet, Props: props("b", "2")}},
		{"escapes normalised", false, `{"$token":"tok","$distinct_id":"u1","$set":{"\u0061":"\u00e9\n\u2028\/"}}`,
			Update{Kind: User, Token: "tok", DistinctID: "u1", Op: OpSet, Props: props("a", `"é\n\u2028/"`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parse := ParseUser
			if tt.group {
				parse = ParseGroup
			}
			got, err := parse([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseFailures(t *testing.T) {
	huge := `{"$token":"tok","$distinct_id":"u1","$set":{"a":"` + strings.Repeat("x", MaxUpdateBytes) + `"}}`
	bigValue := user(`"$set":{"big":"` + strings.Repeat("x", MaxValueBytes) + `"}`)
	tests := []struct {
		name, raw string
		group     bool
		field     string
		category  error
	}{
		{"not an object", `[1]`, false, "", ErrInvalid},
		{"truncated JSON", `{"$token":`, false, "", ErrInvalid},
		{"NaN", user(`"$add":{"n":NaN}`), false, "", ErrInvalid},
		{"raw control character", "{\"$token\":\"t\x01\",\"$distinct_id\":\"u\",\"$set\":{}}", false, "", ErrInvalid},
		{"bad UTF-8", "{\"$token\":\"tok\",\"$distinct_id\":\"u\xff\",\"$set\":{}}", false, "", ErrInvalid},
		{"over 1 MB", huge, false, "", ErrTooLarge},
		{"missing token", `{"$distinct_id":"u1","$set":{}}`, false, "$token", ErrInvalid},
		{"number token", `{"$token":5,"$distinct_id":"u1","$set":{}}`, false, "$token", ErrInvalid},
		{"missing distinct_id", `{"$token":"tok","$set":{}}`, false, "$distinct_id", ErrInvalid},
		{"blank distinct_id", `{"$token":"tok","$distinct_id":" ","$set":{}}`, false, "$distinct_id", ErrInvalid},
		{"placeholder distinct_id", `{"$token":"tok","$distinct_id":"Undefined","$set":{}}`, false, "$distinct_id", ErrInvalid},
		{"NUL in distinct_id", `{"$token":"tok","$distinct_id":"u\u0000","$set":{}}`, false, "$distinct_id", ErrInvalid},
		{"object distinct_id", `{"$token":"tok","$distinct_id":{},"$set":{}}`, false, "$distinct_id", ErrInvalid},
		{"no operation", `{"$token":"tok","$distinct_id":"u1"}`, false, "", ErrInvalid},
		{"two operations", user(`"$set":{"a":1},"$add":{"n":1}`), false, "$add", ErrInvalid},
		{"set not an object", user(`"$set":[1]`), false, "$set", ErrInvalid},
		{"empty property name", user(`"$set":{"":1}`), false, "$set", ErrInvalid},
		{"add string", user(`"$add":{"n":"5"}`), false, "$add.n", ErrInvalid},
		{"add null", user(`"$add":{"n":null}`), false, "$add.n", ErrInvalid},
		{"unset number", user(`"$unset":5`), false, "$unset", ErrInvalid},
		{"unset element", user(`"$unset":["a",1]`), false, "$unset[1]", ErrInvalid},
		{"ignore_time word", user(`"$set":{},"$ignore_time":"maybe"`), false, "$ignore_time", ErrInvalid},
		{"ignore_alias object", user(`"$set":{},"$ignore_alias":{}`), false, "$ignore_alias", ErrInvalid},
		{"time string", user(`"$set":{},"$time":"1700000000"`), false, "$time", ErrInvalid},
		{"time negative", user(`"$set":{},"$time":-1`), false, "$time", ErrInvalid},
		{"time before 1971", user(`"$set":{},"$time":31535999`), false, "$time", ErrInvalid},
		{"time huge", user(`"$set":{},"$time":1e300`), false, "$time", ErrInvalid},
		{"ip object", user(`"$set":{},"$ip":{}`), false, "$ip", ErrInvalid},
		{"value over 256 KB", bigValue, false, "$set.big", ErrTooLarge},
		{"group missing key", `{"$token":"tok","$group_id":"acme","$set":{}}`, true, "$group_key", ErrInvalid},
		{"group missing id", `{"$token":"tok","$group_key":"company","$set":{}}`, true, "$group_id", ErrInvalid},
		{"group $add", group(`"$add":{"n":1}`), true, "$add", ErrUnsupported},
		{"group $append", group(`"$append":{"l":1}`), true, "$append", ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parse := ParseUser
			if tt.group {
				parse = ParseGroup
			}
			_, err := parse([]byte(tt.raw))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			if fe.Field != tt.field || !errors.Is(err, tt.category) || fe.Message == "" {
				t.Fatalf("got field %q message %q (%v), want field %q category %v", fe.Field, fe.Message, fe.Err, tt.field, tt.category)
			}
		})
	}
}

func TestParseMessages(t *testing.T) {
	_, err := ParseUser([]byte(user(`"$add":{"visits":"x"}`)))
	if got, want := err.Error(), "$add.visits: '$add.visits' is invalid: must be a number"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	_, err = ParseGroup([]byte(group(`"$add":{"n":1}`)))
	if got, want := err.Error(), "$add: '$add' is not supported on group profiles"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestParseTruncatesNames(t *testing.T) {
	long := strings.Repeat("é", 300)
	u, err := ParseUser([]byte(user(`"$set":{"` + long + `":1},"$unset_ignored":1`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := []rune(u.Props[0].Name); len(got) != MaxNameRunes {
		t.Fatalf("name has %d runes", len(got))
	}
}

// Updates must not share memory with the Parser, which reuses its buffers.
func TestParserReuse(t *testing.T) {
	var ps Parser
	a, err := ps.ParseUser([]byte(user(`"$set":{"k":"first"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ps.ParseUser([]byte(user(`"$set":{"z":"other"}`))); err != nil {
		t.Fatal(err)
	}
	if a.Props[0].Name != "k" || string(a.Props[0].Value) != `"first"` || a.Token != "tok" || a.DistinctID != "u1" {
		t.Fatalf("first update changed: %+v", a)
	}
}
