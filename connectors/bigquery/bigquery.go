// Package bigquery is the Google BigQuery source. Schemas and queries go
// through the REST API (cloud.google.com/go/bigquery); rows come through the
// BigQuery Storage Read API in Arrow format, several streams in parallel,
// and are decoded with arrow-go v18 (the client library's own Arrow
// decoding would pull in a second Arrow copy).
//
// The Storage Read API neither orders nor limits rows, so a read with
// OrderBy (every incremental sync) or of a query first runs a query job
// (WHERE watermark ORDER BY … LIMIT …) and then reads its result table
// through the Storage Read API in a single stream, which keeps the job's
// order. A plain read (full sync, or Limit alone for previews) reads the
// table directly, with the watermark as the session's row restriction.
//
// Types: INT64 → int64; FLOAT64 → float64; BOOL → bool; STRING → utf8;
// JSON → utf8 (its JSON text); GEOGRAPHY → utf8 (WKT); BYTES → binary;
// DATE → date32; TIME → time64[us]; TIMESTAMP → timestamp[us, UTC];
// DATETIME → timestamp[us] (UTC wall-clock); NUMERIC → decimal128(38,9),
// NUMERIC(P,S) → decimal128(P,S); BIGNUMERIC → decimal256(76,38),
// BIGNUMERIC(P,S) → decimal256(P,S); STRUCT/RECORD → struct; REPEATED →
// list (BigQuery has no NULL arrays: NULL is stored as an empty array).
package bigquery

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"

	bq "cloud.google.com/go/bigquery"
	storage "cloud.google.com/go/bigquery/storage/apiv1"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributary-dev/tributary/connectors"
)

// Kind is the `kind: bigquery` source.
func Kind() connectors.Kind {
	return connectors.Kind{
		Name: "bigquery",
		Doc:  "Google BigQuery: schemas and queries through the REST API, rows through the Storage Read API in Arrow format.",
		Fields: []connectors.Field{
			{Name: "project", Required: true, Doc: "Project that runs the query jobs and read sessions (billed), and the default project of table names."},
			{Name: "dataset", Doc: "Default dataset of unqualified table names (table: events)."},
			{Name: "location", Doc: "Location of the datasets and jobs, e.g. US, EU, europe-west3 (default: BigQuery infers it)."},
			{Name: "credentials_file", Path: true, Doc: "Path to a service-account JSON key file."},
			{Name: "credentials_json", Secret: true, Doc: "Service-account JSON key itself, as ${ENV}. Without either credentials field, Application Default Credentials apply."},
			{Name: "staging_dataset", Doc: "Dataset where query results (queries, ordered and incremental reads) are written before they are read, deleted afterwards; needs table create/delete permission. Default: BigQuery's anonymous result table of each job."},
			{Name: "max_streams", Doc: "Storage Read streams read in parallel for a plain table read (default 4, at most 32)."},
			{Name: "endpoint", Doc: "REST API endpoint override (https://… for a private endpoint, http://host:port for an emulator)."},
			{Name: "storage_endpoint", Doc: "Storage Read API gRPC endpoint override: host:port (TLS), or http://host:port for plain text (local test servers only)."},
		},
		Check: check,
		Open: func(ctx context.Context, f map[string]string) (connectors.Source, error) {
			return Open(ctx, f)
		},
	}
}

const (
	defaultStreams = 4
	maxStreams     = 32
)

func check(f map[string]string) error {
	if strings.TrimSpace(f["project"]) == "" {
		return &connectors.FieldError{Field: "source.project", Msg: "is required (the Google Cloud project ID)"}
	}
	if f["credentials_file"] != "" && f["credentials_json"] != "" {
		return &connectors.FieldError{Field: "source.credentials_json", Msg: "cannot be combined with credentials_file (give one of them)"}
	}
	if v := f["credentials_json"]; v != "" && !strings.HasPrefix(v, "${") {
		if err := checkKey([]byte(v)); err != nil {
			return &connectors.FieldError{Field: "source.credentials_json", Msg: err.Error()}
		}
	}
	if v := f["max_streams"]; v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > maxStreams {
			return &connectors.FieldError{Field: "source.max_streams", Msg: fmt.Sprintf("%q is not a number from 1 to %d", v, maxStreams)}
		}
	}
	if v := f["endpoint"]; v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &connectors.FieldError{Field: "source.endpoint", Msg: fmt.Sprintf("%q is not an http(s):// URL", v)}
		}
	}
	if v := f["storage_endpoint"]; v != "" {
		if _, _, err := grpcTarget(v); err != nil {
			return &connectors.FieldError{Field: "source.storage_endpoint", Msg: err.Error()}
		}
	}
	return nil
}

// checkKey accepts only a service-account key: other credential JSON
// (authorized_user, external_account) makes the client fetch tokens from
// URLs the file names, which is not what a key field should allow.
func checkKey(b []byte) error {
	var k struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return fmt.Errorf("is not JSON (a service-account key file's content): %v", err)
	}
	if k.Type != "service_account" {
		return fmt.Errorf("is a %q credential, want a service-account key (\"type\": \"service_account\")", k.Type)
	}
	return nil
}

// grpcTarget splits a storage endpoint into its gRPC address and whether
// it is plain text.
func grpcTarget(v string) (addr string, plain bool, err error) {
	switch {
	case strings.HasPrefix(v, "http://"):
		addr, plain = strings.TrimPrefix(v, "http://"), true
	case strings.HasPrefix(v, "https://"):
		addr = strings.TrimPrefix(v, "https://")
	default:
		addr = v
	}
	addr = strings.TrimSuffix(addr, "/")
	if !strings.Contains(addr, ":") || strings.ContainsAny(addr, "/ ") {
		return "", false, fmt.Errorf("%q is not host:port or http://host:port", v)
	}
	return addr, plain, nil
}

// Source reads the tables of one BigQuery project.
type Source struct {
	project, dataset, location, staging string
	streams                             int
	rest                                *bq.Client
	read                                *storage.BigQueryReadClient
	log                                 *slog.Logger
}

// Open connects with fields (see Kind). With a default dataset it reads
// the dataset's metadata, so bad credentials or a wrong dataset fail here,
// permanently, rather than at the first sync.
func Open(ctx context.Context, fields map[string]string) (*Source, error) {
	if err := check(fields); err != nil {
		return nil, connectors.Permanent(err)
	}
	s := &Source{
		project:  fields["project"],
		dataset:  fields["dataset"],
		location: fields["location"],
		staging:  fields["staging_dataset"],
		streams:  defaultStreams,
		log:      slog.Default().With("source", "bigquery", "project", fields["project"]),
	}
	if v := fields["max_streams"]; v != "" {
		s.streams, _ = strconv.Atoi(v)
	}
	var auth []option.ClientOption
	switch {
	case fields["credentials_json"] != "":
		auth = append(auth, option.WithAuthCredentialsJSON(option.ServiceAccount, []byte(fields["credentials_json"])))
	case fields["credentials_file"] != "":
		b, err := os.ReadFile(fields["credentials_file"])
		if err != nil {
			return nil, connectors.Permanent(fmt.Errorf("bigquery source: source.credentials_file: %w", err))
		}
		if err := checkKey(b); err != nil {
			return nil, connectors.Permanent(fmt.Errorf("bigquery source: source.credentials_file %s %v", fields["credentials_file"], err))
		}
		auth = append(auth, option.WithAuthCredentialsJSON(option.ServiceAccount, b))
	case fields["endpoint"] != "" || fields["storage_endpoint"] != "":
		// An endpoint override without credentials is an emulator or a
		// test server: send no token rather than look for ADC.
		auth = append(auth, option.WithoutAuthentication())
	}
	restOpts := append([]option.ClientOption{}, auth...)
	if v := fields["endpoint"]; v != "" {
		restOpts = append(restOpts, option.WithEndpoint(strings.TrimSuffix(v, "/")+"/bigquery/v2/"))
	}
	// Client construction fails on credentials it cannot load (a bad key,
	// no Application Default Credentials): configuration, not weather.
	rest, err := bq.NewClient(ctx, s.project, restOpts...)
	if err != nil {
		return nil, connectors.Permanent(fmt.Errorf("bigquery source: connect: %w (%s)", err, hintAuth))
	}
	rest.Location = s.location
	s.rest = rest
	readOpts := auth
	if v := fields["storage_endpoint"]; v != "" {
		addr, plain, _ := grpcTarget(v)
		readOpts = append([]option.ClientOption{}, auth...)
		if plain {
			// Plain text never carries a token, whatever credentials say.
			readOpts = []option.ClientOption{option.WithoutAuthentication(),
				option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials()))}
		}
		readOpts = append(readOpts, option.WithEndpoint(addr))
	}
	// Storage Read batches can exceed gRPC's 4 MB default message limit.
	readOpts = append(readOpts, option.WithGRPCDialOption(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(128<<20))))
	s.read, err = storage.NewBigQueryReadClient(ctx, readOpts...)
	if err != nil {
		rest.Close()
		return nil, connectors.Permanent(fmt.Errorf("bigquery source: connect to the Storage Read API: %w (%s)", err, hintAuth))
	}
	if s.dataset != "" {
		if _, err := rest.Dataset(s.dataset).Metadata(ctx); err != nil {
			s.Close()
			return nil, classify(ctx, "open dataset "+s.dataset, err)
		}
	}
	return s, nil
}

// Close closes both clients.
func (s *Source) Close() error {
	err := s.read.Close()
	if e := s.rest.Close(); err == nil {
		err = e
	}
	return err
}
