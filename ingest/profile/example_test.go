package profile_test

import (
	"fmt"

	"github.com/tributary-dev/tributary/ingest/profile"
)

func Example() {
	var ps profile.Parser
	var p profile.Profile
	now := int64(1_748_736_000_000) // the server clock, ms since the epoch
	for _, raw := range []string{
		`{"$token":"tok","$distinct_id":"u1","$set":{"plan":"free","tags":["a"]}}`,
		`{"$token":"tok","$distinct_id":"u1","$ignore_time":true,"$add":{"visits":2}}`,
		`{"$token":"tok","$distinct_id":"u1","$ignore_time":true,"$union":{"tags":["a","b"]}}`,
		`{"$token":"tok","$distinct_id":"u1","$ignore_time":true,"$add":{"plan":1}}`,
	} {
		u, err := ps.ParseUser([]byte(raw))
		if err != nil {
			fmt.Println(err)
			continue
		}
		if err := profile.Apply(&p, u, now); err != nil {
			fmt.Println(err)
		}
	}
	out, _ := p.MarshalJSON()
	fmt.Println(string(out))
	// Output:
	// $add.plan: '$add.plan' cannot take $add: the property is not a number
	// {"plan":"free","tags":["a","b"],"$last_seen":"2025-06-01T00:00:00","visits":2}
}
