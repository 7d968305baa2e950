package profile

import "testing"

// BenchmarkParse parses the updates SDKs send most: a $set of a few
// strings and numbers, an $add, and a $union with a list.
func BenchmarkParse(b *testing.B) {
	updates := [][]byte{
		[]byte(`{"$token":"tok","$distinct_id":"u1","$set":{"$name":"Ada Lovelace","$email":"ada@example.com","plan":"pro","seats":12,"mrr":99.5,"tags":["a","b"]}}`),
		[]byte(`{"$token":"tok","$distinct_id":"u1","$add":{"visits":1,"spend":12.99}}`),
		[]byte(`{"$token":"tok","$distinct_id":"u1","$union":{"ids":[1748736000000,42,7]}}`),
	}
	var ps Parser
	for b.Loop() {
		for _, u := range updates {
			if _, err := ps.ParseUser(u); err != nil {
				b.Fatal(err)
			}
		}
	}
}
