package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/mixpanel/mixpanel-go"
)

// These tests drive the server with the official Go SDK (v1.2.1) exactly
// as a customer would, pointed at the test server with its proxy options.

func sdkClient(s *server, opts ...mixpanel.Options) *mixpanel.ApiClient {
	base := []mixpanel.Options{mixpanel.ProxyApiLocation(s.URL), mixpanel.ProxyDataLocation(s.URL),
		mixpanel.HttpClient(httpClient)}
	return mixpanel.NewApiClient(mainToken, append(base, opts...)...)
}

// sdkEvents builds n events with every JSON value type among their
// properties and a millisecond-precision time, as NewEvent/AddTime do.
func sdkEvents(c *mixpanel.ApiClient, name string, n int, base time.Time) []*mixpanel.Event {
	out := make([]*mixpanel.Event, n)
	for i := range out {
		e := c.NewEvent(name, "sdk-user-"+string(rune('a'+i%5)), map[string]any{
			"plan":     "enterprise",
			"amount":   12.5 + float64(i),
			"quantity": i,
			"paid":     i%2 == 0,
			"coupon":   nil,
			"tags":     []any{"x", float64(i), true},
			"address":  map[string]any{"city": "Zürich", "geo": map[string]any{"lat": 47.37}},
			"note":     "Grüße ✓ \"quoted\" \\ back",
		})
		e.AddTime(base.Add(time.Duration(i)*1234*time.Millisecond + 567*time.Millisecond))
		e.AddInsertID(uid("sdk"))
		out[i] = e
	}
	return out
}

// normalize turns a value into what a JSON round trip makes of it, so sent
// Go values and decoded export values compare with DeepEqual.
func normalize(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal(mustJSON(t, v), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// compareExport checks field by field that every sent event came back
// exactly once with the same name and properties; time is in whole seconds
// (floor of the sent milliseconds) and mp_processing_time_ms is the only
// property the server adds.
func compareExport(t *testing.T, sent []*mixpanel.Event, got []*mixpanel.Event, since time.Time) {
	t.Helper()
	if len(got) != len(sent) {
		t.Fatalf("export returned %d events, sent %d", len(got), len(sent))
	}
	byID := map[string]*mixpanel.Event{}
	for _, e := range got {
		id, _ := e.Properties["$insert_id"].(string)
		if byID[id] != nil {
			t.Fatalf("export returned $insert_id %q twice", id)
		}
		byID[id] = e
	}
	for _, s := range sent {
		id := s.Properties["$insert_id"].(string)
		g := byID[id]
		if g == nil {
			t.Fatalf("event %s missing from export", id)
		}
		if g.Name != s.Name {
			t.Errorf("%s: event name %q, sent %q", id, g.Name, s.Name)
		}
		wantSec := float64(s.Properties["time"].(int64) / 1000)
		if g.Properties["time"] != wantSec {
			t.Errorf("%s: time %v, want %v (seconds)", id, g.Properties["time"], wantSec)
		}
		pt, _ := g.Properties["mp_processing_time_ms"].(float64)
		if pt < float64(since.UnixMilli()) || pt > float64(time.Now().UnixMilli()) {
			t.Errorf("%s: mp_processing_time_ms %v not within the test's run", id, g.Properties["mp_processing_time_ms"])
		}
		for k, v := range s.Properties {
			if k == "time" {
				continue
			}
			if _, ok := g.Properties[k]; !ok {
				t.Errorf("%s: property %q missing from export", id, k)
			} else if w := normalize(t, v); !reflect.DeepEqual(g.Properties[k], w) {
				t.Errorf("%s: property %q = %#v, sent %#v", id, k, g.Properties[k], w)
			}
		}
		for k := range g.Properties {
			if _, ok := s.Properties[k]; !ok && k != "mp_processing_time_ms" {
				t.Errorf("%s: export added property %q = %v", id, k, g.Properties[k])
			}
		}
	}
}

func exportRange() (time.Time, time.Time) {
	now := time.Now().UTC()
	return now.AddDate(0, 0, -2), now.AddDate(0, 0, 1)
}

func TestSDKImportServiceAccountGzip(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	start := time.Now()
	c := sdkClient(s, mixpanel.ServiceAccount(mainID, ownerSA, ownerSecret))
	sent := sdkEvents(c, "sdk purchase", 250, time.Now().Add(-3*time.Hour))
	res, err := c.Import(context.Background(), sent, mixpanel.ImportOptionsRecommend) // strict=1 + gzip
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if res.Code != 200 || res.NumRecordsImported != 250 || res.Status != "OK" {
		t.Fatalf("Import result %+v, want code 200, 250 imported, status OK", *res)
	}
	from, to := exportRange()
	got, err := c.Export(context.Background(), from, to, mixpanel.ExportNoLimit, `["sdk purchase"]`, mixpanel.ExportNoWhereFilter)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	compareExport(t, sent, got, start)

	// time_in_ms returns the exact milliseconds that were sent.
	raw := s.export(t, asOwner, mainID, url.Values{"time_in_ms": {"true"}})
	ids := byInsertID(t, raw)
	for _, e := range sent {
		g := ids[e.Properties["$insert_id"].(string)]
		if num(t, g.Properties["time"]) != e.Properties["time"].(int64) {
			t.Fatalf("time_in_ms: got %v, sent %v", g.Properties["time"], e.Properties["time"])
		}
	}
}

func TestSDKImportAPISecretUncompressed(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	start := time.Now()
	c := sdkClient(s, mixpanel.ApiSecret(mainSecret))
	sent := sdkEvents(c, "sdk signup", 40, time.Now().Add(-90*time.Minute))
	res, err := c.Import(context.Background(), sent, mixpanel.ImportOptions{Strict: true, Compression: mixpanel.None})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if res.Code != 200 || res.NumRecordsImported != 40 || res.Status != "OK" {
		t.Fatalf("Import result %+v", *res)
	}
	from, to := exportRange()
	// Without a service account the SDK exports with the API secret.
	got, err := c.Export(context.Background(), from, to, mixpanel.ExportNoLimit, mixpanel.ExportNoEventFilter, mixpanel.ExportNoWhereFilter)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	compareExport(t, sent, got, start)

	// The SDK's limit and where parameters reach the server.
	some, err := c.Export(context.Background(), from, to, 7, mixpanel.ExportNoEventFilter, mixpanel.ExportNoWhereFilter)
	if err != nil || len(some) != 7 {
		t.Fatalf("Export limit 7: %d events, err %v", len(some), err)
	}
	paid, err := c.Export(context.Background(), from, to, mixpanel.ExportNoLimit, mixpanel.ExportNoEventFilter, `properties["paid"] == true`)
	if err != nil || len(paid) != 20 {
		t.Fatalf("Export where paid: %d events (want 20), err %v", len(paid), err)
	}
}

func TestSDKImportPartialFailure(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	c := sdkClient(s, mixpanel.ServiceAccount(mainID, ownerSA, ownerSecret))
	sent := sdkEvents(c, "sdk partial", 10, time.Now().Add(-time.Hour))
	sent[2].Properties["time"] = "yesterday"
	sent[5].Properties["$insert_id"] = "not valid!"
	sent[7].Properties["distinct_id"] = 42
	sent[8].Properties["time"] = time.Now().Add(2 * time.Hour).Unix() // more than 1h ahead
	_, err := c.Import(context.Background(), sent, mixpanel.ImportOptionsRecommend)
	var fe mixpanel.ImportFailedValidationError
	if !errors.As(err, &fe) {
		t.Fatalf("Import: want ImportFailedValidationError, got %T %v", err, err)
	}
	if fe.Code != 400 || fe.Status != "Bad Request" || fe.NumRecordsImported != 6 || fe.ApiError == "" {
		t.Fatalf("400 body: %+v", fe)
	}
	want := []struct {
		index    int
		field    string
		insertID string
	}{
		{2, "properties.time", sent[2].Properties["$insert_id"].(string)},
		{5, "properties.$insert_id", "not valid!"},
		{7, "properties.distinct_id", sent[7].Properties["$insert_id"].(string)},
		{8, "properties.time", sent[8].Properties["$insert_id"].(string)},
	}
	if len(fe.FailedImportRecords) != len(want) {
		t.Fatalf("failed_records: %+v, want indexes 2,5,7,8", fe.FailedImportRecords)
	}
	for i, w := range want {
		g := fe.FailedImportRecords[i]
		if g.Index != w.index || g.Field != w.field || g.InsertID != w.insertID || g.Message == "" {
			t.Errorf("failed_records[%d] = %+v, want index %d field %s insert_id %q", i, g, w.index, w.field, w.insertID)
		}
	}
	if m := fe.FailedImportRecords[0].Message; m != "'properties.time' is invalid: must be specified as seconds since epoch" {
		t.Errorf("time message %q", m)
	}
	stored := byInsertID(t, s.export(t, asOwner, mainID, nil))
	if len(stored) != 6 {
		t.Fatalf("export has %d events, want the 6 valid ones", len(stored))
	}
	for i, e := range sent {
		_, ok := stored[e.Properties["$insert_id"].(string)]
		if bad := i == 2 || i == 5 || i == 7 || i == 8; ok == bad {
			t.Errorf("event %d stored=%v", i, ok)
		}
	}
}

// TestSDKLegacyPaths covers the SDK calls that do not use strict=1:
// Import with strict off (the JSON answer still counts the records) and
// Merge (form body, no token, bare 1).
func TestSDKLegacyPaths(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	c := sdkClient(s, mixpanel.ApiSecret(mainSecret))
	sent := sdkEvents(c, "sdk lenient", 5, time.Now().Add(-time.Hour))
	res, err := c.Import(context.Background(), sent, mixpanel.ImportOptions{Strict: false, Compression: mixpanel.Gzip})
	if err != nil {
		t.Fatalf("Import strict=0: %v", err)
	}
	if res.Code != 200 || res.NumRecordsImported != 5 || res.Status != "OK" {
		t.Fatalf("Import strict=0: %+v, want {200 5 OK}", *res)
	}
	if got := s.export(t, asSecret, 0, nil); len(got) != 5 {
		t.Fatalf("export after strict=0 import: %d events, want 5", len(got))
	}
	// Merge posts form data={"event":"$merge","properties":{"$distinct_ids":[…]}}
	// with the API secret and no properties.token: the secret names the
	// project, so the merge is accepted (on this Simplified project it
	// changes nothing, as Mixpanel documents).
	if err := c.Merge(context.Background(), "sdk-user-a", "sdk-user-b"); err != nil {
		t.Errorf("SDK Merge: %v", err)
	}
}
