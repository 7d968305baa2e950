package profile

import (
	"errors"
	"strings"
	"testing"
)

// nowMs is the server clock of every test: 2025-06-01T00:00:00Z.
const nowMs = 1_748_736_000_000

// user wraps operation members into a user update that leaves $last_seen
// alone, so expected profiles stay short.
func user(members string) string {
	return `{"$token":"tok","$distinct_id":"u1","$ignore_time":true,` + members + `}`
}

func group(members string) string {
	return `{"$token":"tok","$group_key":"company_id","$group_id":"acme","$ignore_time":true,` + members + `}`
}

// run parses and applies updates in order and returns the error of the
// first one that fails.
func run(t *testing.T, p *Profile, updates ...string) error {
	t.Helper()
	var ps Parser
	for _, raw := range updates {
		parse := ps.ParseUser
		if strings.Contains(raw, `"$group_key"`) {
			parse = ps.ParseGroup
		}
		u, err := parse([]byte(raw))
		if err != nil {
			t.Fatalf("parse %s: %v", raw, err)
		}
		if err := Apply(p, u, nowMs); err != nil {
			return err
		}
	}
	return nil
}

func jsonOf(p *Profile) string { return string(p.AppendJSON(nil)) }

// category returns which of the package's error categories err wraps.
func category(err error) error {
	for _, c := range []error{ErrInvalid, ErrTooLarge, ErrUnsupported, ErrTooManyProperties, ErrType} {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}
