package identity

import (
	"fmt"
	"testing"
)

func TestDistinctID(t *testing.T) {
	tests := []struct{ user, device, want string }{
		{"u1", "d1", "u1"},
		{"", "d1", "$device:d1"},
		{"u1", "", "u1"},
		{"", "", ""},
	}
	for _, tt := range tests {
		if got := DistinctID(tt.user, tt.device); got != tt.want {
			t.Errorf("DistinctID(%q, %q) = %q, want %q", tt.user, tt.device, got, tt.want)
		}
	}
	if u, d := SplitDistinctID("$device:abc"); u != "" || d != "abc" {
		t.Errorf("device split: %q %q", u, d)
	}
	if u, d := SplitDistinctID("user-1"); u != "user-1" || d != "" {
		t.Errorf("user split: %q %q", u, d)
	}
}

func TestLinkIsRetroactive(t *testing.T) {
	g := New(Simplified)
	// Anonymous events carry only the device: they resolve to it.
	wantResolve(t, g, "$device:d1", "$device:d1")
	changes(t)(g.Link("u1", "d1"))
	// After the first event with both, the device's earlier events read as u1.
	wantResolve(t, g, "$device:d1", "u1", "u1", "u1")
	unchanged(t)(g.Link("u1", "d1"))
}

func TestDeviceKeepsFirstUser(t *testing.T) {
	g := New(Simplified)
	changes(t)(g.Link("u1", "d1"))
	refused(t, ErrDeviceLinked)(g.Link("u2", "d1"))
	_, err := g.Link("u2", "d1")
	if want := `link $user_id "u2" with $device_id "d1" (linked to "u1"): ` + ErrDeviceLinked.Error(); err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	// The second user's event is attributed by its own $user_id, and users
	// never merge.
	wantResolve(t, g, "$device:d1", "u1", "u2", "u2")
	changes(t)(g.Link("u2", "d2"))
	wantResolve(t, g, "$device:d2", "u2", "u1", "u1")
	if g.ClusterSize("u1") != 2 || g.ClusterSize("u2") != 2 {
		t.Fatalf("sizes %d %d", g.ClusterSize("u1"), g.ClusterSize("u2"))
	}
}

// ApplyBare refuses as Apply does, with the bare error and no allocation;
// what holds and what changes is the same.
func TestApplyBare(t *testing.T) {
	g := New(Simplified)
	changes(t)(g.ApplyBare(Change{Kind: KindLink, A: "u1", B: "d1"}))
	unchanged(t)(g.ApplyBare(Change{Kind: KindLink, A: "u1", B: "d1"}))
	taken := Change{Kind: KindLink, A: "u2", B: "d1"}
	if _, err := g.ApplyBare(taken); err != ErrDeviceLinked {
		t.Fatalf("ApplyBare: %v, want the bare ErrDeviceLinked", err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = g.ApplyBare(taken) }); n != 0 {
		t.Fatalf("ApplyBare allocates %v times per refusal", n)
	}
	refused(t, ErrWrongMode)(g.ApplyBare(Change{Kind: KindMerge, A: "u1", B: "u2"}))
	wantResolve(t, g, "$device:d1", "u1", "u1", "u1")
}

func TestUnlimitedDevicesPerUser(t *testing.T) {
	g := New(Simplified)
	for i := range 3 * MaxClusterSize {
		changes(t)(g.Link("u1", fmt.Sprint("d", i)))
	}
	if g.ClusterSize("$device:d0") != 3*MaxClusterSize+1 {
		t.Fatalf("size %d", g.ClusterSize("u1"))
	}
	wantResolve(t, g, "$device:d1499", "u1")
}

func TestLinkRefusesBadIDs(t *testing.T) {
	g := New(Simplified)
	for _, c := range [][2]string{{"", "d"}, {"u", ""}, {"$device:x", "d"}} {
		refused(t, ErrInvalidID)(g.Link(c[0], c[1]))
	}
	if g.Len() != 0 {
		t.Fatal("refusals registered ids")
	}
}
