// Package snowflake is the Snowflake warehouse source. Results come
// through gosnowflake's Arrow-batches API in Snowflake's own Arrow
// encoding and are converted column by column into standard Arrow types
// (see convert.go); no value goes through a Go row.
//
// Types: NUMBER(p,0) → int64 (NUMBER(p,s>0) → decimal128(p,s)); FLOAT →
// float64; VARCHAR → utf8; BOOLEAN; DATE → date32; TIME → time64[ns];
// TIMESTAMP_NTZ → timestamp[us] (wall-clock time, read as UTC);
// TIMESTAMP_LTZ and TIMESTAMP_TZ → timestamp[us, UTC] (the instant; a
// TZ value's own offset is dropped); VARIANT, OBJECT and ARRAY → utf8 JSON
// text; BINARY → binary. Sub-microsecond digits are truncated. A NUMBER
// with scale 0 whose value does not fit int64 fails the read: cast it to
// VARCHAR or give it a scale in a query.
//
// Unquoted parts of a table name follow Snowflake's rule and are upper
// cased (events → EVENTS); double-quote a part to keep its case.
package snowflake

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"database/sql"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	sf "github.com/snowflakedb/gosnowflake"

	"github.com/tributary-dev/tributary/connectors"
)

// Kind is the `kind: snowflake` source.
func Kind() connectors.Kind {
	return connectors.Kind{
		Name: "snowflake",
		Doc:  "Snowflake, read as Arrow result batches (gosnowflake). Authenticate with a password or a key pair.",
		Fields: []connectors.Field{
			{Name: "account", Required: true, Doc: "Account identifier, e.g. myorg-myaccount or xy12345.eu-west-1 (not the URL)."},
			{Name: "user", Required: true, Doc: "Login name."},
			{Name: "password", Secret: true, Doc: "Password of user, as ${ENV}. Excludes private_key and private_key_path."},
			{Name: "private_key", Secret: true, Doc: "Unencrypted PKCS#8 RSA private key (PEM text) for key-pair authentication, as ${ENV}."},
			{Name: "private_key_path", Path: true, Doc: "File holding the unencrypted PKCS#8 RSA private key (PEM), instead of private_key."},
			{Name: "warehouse", Doc: "Warehouse that runs the queries (default: the user's default warehouse)."},
			{Name: "database", Doc: "Database of unqualified table names (default: the user's default)."},
			{Name: "schema", Doc: "Schema of unqualified table names (default: the user's default, usually PUBLIC)."},
			{Name: "role", Doc: "Role to use (default: the user's default role); it needs USAGE on the warehouse, database and schema and SELECT on the tables."},
			{Name: "host", Doc: "Host name to connect to instead of <account>.snowflakecomputing.com, e.g. a PrivateLink endpoint."},
		},
		Check: check,
		Open: func(ctx context.Context, f map[string]string) (connectors.Source, error) {
			return Open(ctx, f)
		},
	}
}

func check(f map[string]string) error {
	acct := f["account"]
	if strings.Contains(acct, "://") || strings.Contains(acct, "snowflakecomputing") || strings.ContainsAny(acct, "/ ") {
		return &connectors.FieldError{Field: "source.account", Msg: fmt.Sprintf("%q should be the account identifier only (e.g. myorg-myaccount), not a URL", acct)}
	}
	n := 0
	for _, k := range []string{"password", "private_key", "private_key_path"} {
		if strings.TrimSpace(f[k]) != "" {
			n++
		}
	}
	if n != 1 {
		return &connectors.FieldError{Field: "source.password", Msg: "give exactly one of password, private_key or private_key_path"}
	}
	return nil
}

// config turns fields into the driver's configuration.
func config(f map[string]string) (*sf.Config, error) {
	if err := check(f); err != nil {
		return nil, err
	}
	utc := "UTC"
	cfg := &sf.Config{
		Account:   f["account"],
		User:      f["user"],
		Password:  f["password"],
		Warehouse: f["warehouse"],
		Database:  f["database"],
		Schema:    f["schema"],
		Role:      f["role"],
		Host:      f["host"],
		// UTC makes TIMESTAMP_NTZ watermarks compare with LTZ and TZ
		// columns as instants, whatever the account's default zone.
		Params:       map[string]*string{"TIMEZONE": &utc},
		Application:  "tributary",
		LoginTimeout: 60 * time.Second,
	}
	pemText := f["private_key"]
	if p := f["private_key_path"]; p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, &connectors.FieldError{Field: "source.private_key_path", Msg: fmt.Sprintf("cannot read the key file: %v", err)}
		}
		pemText = string(b)
	}
	if pemText != "" {
		key, err := parseKey(pemText)
		if err != nil {
			field := "source.private_key"
			if f["private_key_path"] != "" {
				field = "source.private_key_path"
			}
			return nil, &connectors.FieldError{Field: field, Msg: err.Error()}
		}
		cfg.Authenticator, cfg.PrivateKey = sf.AuthTypeJwt, key
	}
	return cfg, nil
}

// parseKey reads an unencrypted PKCS#8 RSA key; the messages say how to
// produce one, since that is the usual fix.
func parseKey(text string) (*rsa.PrivateKey, error) {
	// Keys passed through environment variables often lose their line
	// breaks or carry them escaped.
	text = strings.ReplaceAll(strings.TrimSpace(text), `\n`, "\n")
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, fmt.Errorf("is not a PEM private key (expected -----BEGIN PRIVATE KEY-----)")
	}
	if block.Type == "ENCRYPTED PRIVATE KEY" {
		return nil, fmt.Errorf("is encrypted; give an unencrypted PKCS#8 key (openssl pkcs8 -topk8 -nocrypt)")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("is not a PKCS#8 key (convert with openssl pkcs8 -topk8 -nocrypt): %v", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("is a %T; Snowflake key-pair authentication needs an RSA key", k)
	}
	return rk, nil
}

// Source reads the tables of one Snowflake account.
type Source struct {
	db  *sql.DB
	cfg sf.Config
	// feedLag is how far behind Snowflake's clock a change feed reads
	// (feed.go); tests set it to 0.
	feedLag time.Duration
}

// Open connects with fields (see Kind) and logs in, so bad credentials
// fail here, permanently.
func Open(ctx context.Context, fields map[string]string) (*Source, error) {
	cfg, err := config(fields)
	if err != nil {
		return nil, connectors.Permanent(err)
	}
	return open(ctx, cfg)
}

// quietDriver turns off gosnowflake's own logger: it writes logrus text
// to stderr beside the service's slog output, and every error it logs
// reaches the caller anyway, classified.
var quietDriver sync.Once

func open(ctx context.Context, cfg *sf.Config) (*Source, error) {
	quietDriver.Do(func() { _ = sf.GetLogger().SetLogLevel("OFF") })
	db := sql.OpenDB(sf.NewConnector(sf.SnowflakeDriver{}, *cfg))
	// Each Read holds a connection for its whole stream; a few cover
	// Discover running beside a Read.
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, classify(ctx, "connect", err)
	}
	return &Source{db: db, cfg: *cfg, feedLag: time.Second}, nil
}

// Close logs every session out.
func (s *Source) Close() error { return s.db.Close() }
