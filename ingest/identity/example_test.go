package identity_test

import (
	"fmt"

	"github.com/tributary-dev/tributary/ingest/identity"
)

func Example() {
	g := identity.New(identity.Simplified)
	var log []identity.Change // what a store persists

	// Events arrive; each with both ids links the device to the user.
	for _, ev := range []struct{ user, device string }{
		{"", "d1"},   // anonymous browsing
		{"u1", "d1"}, // login: links d1 to u1, retroactively
		{"u2", "d1"}, // another user on the same device: d1 keeps u1
	} {
		fmt.Println("event distinct_id:", identity.DistinctID(ev.user, ev.device))
		if ev.user == "" || ev.device == "" {
			continue
		}
		c := identity.Change{Kind: identity.KindLink, A: ev.user, B: ev.device}
		changed, err := g.Apply(c)
		if err != nil {
			fmt.Println("refused:", err)
		}
		if changed {
			log = append(log, c)
		}
	}
	fmt.Println("$device:d1 reads as", g.Resolve("$device:d1"))

	// After a restart the store rebuilds the same state from the log.
	again, _ := identity.Replay(identity.Simplified, log)
	fmt.Println("after replay:", again.Resolve("$device:d1"))
	// Output:
	// event distinct_id: $device:d1
	// event distinct_id: u1
	// event distinct_id: u2
	// refused: link $user_id "u2" with $device_id "d1" (linked to "u1"): identity: device already linked to another user
	// $device:d1 reads as u1
	// after replay: u1
}

func ExampleGraph_Identify() {
	g := identity.New(identity.Original)
	anon := "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	if _, err := g.Merge(anon, "3f2504e0-4f89-41d3-9a0c-0305e82c3302"); err != nil {
		fmt.Println(err)
	}
	if _, err := g.Identify("alice@example.com", anon); err != nil {
		fmt.Println(err)
	}
	_, err := g.Identify("bob@example.com", anon)
	fmt.Println(g.Resolve(anon), g.ClusterSize(anon))
	fmt.Println(err)
	// Output:
	// alice@example.com 3
	// $identify "bob@example.com" with $anon_id "3f2504e0-4f89-41d3-9a0c-0305e82c3301" (merged with "alice@example.com"): identity: $anon_id already merged with another $identified_id
}
