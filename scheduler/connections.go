package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/sealed"
)

// Connections created through the app API (owner-only) are kept beside
// the import documents under connPrefix+id, an id no import can have
// ('/' is not allowed in import ids), with their secrets sealed under
// the operator's connection_key.

const connPrefix = "connection/"

// ErrNotEnabled refuses connection creation on a server without
// connection_key.
var ErrNotEnabled = errors.New("connections cannot be created through the API on this server (the operator sets connection_key to allow it)")

// ErrInUse refuses deleting a connection imports still name.
var ErrInUse = errors.New("connection in use")

// apiConnFields are the fields a connection created through the API may
// set: a Postgres server the operator allows, with its own credentials
// (never the server's PG* environment or ~/.pgpass, so user, password and
// database are required), and no file on the server (sslrootcert) or DSN.
var apiConnFields = map[string]struct{ required, secret bool }{
	"host": {true, false}, "port": {false, false}, "user": {true, false}, "password": {true, true},
	"database": {true, false}, "sslmode": {false, false},
}

// connDoc is what the store keeps for a connection created through the API.
type connDoc struct {
	Kind      string            `json:"kind"`
	Fields    map[string]string `json:"fields"` // not secret
	Sealed    map[string]string `json:"sealed"` // secret, sealed.Seal
	CreatedMs int64             `json:"created_ms"`
	Creator   string            `json:"creator"`
}

// ConnectionView is a connection as the API shows it: never a secret's
// value, only which secrets are set; a config connection shows its id and
// kind only.
type ConnectionView struct {
	ID      string            `json:"id"`
	Kind    string            `json:"kind"`
	Origin  string            `json:"origin"` // config or api
	Fields  map[string]string `json:"fields,omitempty"`
	Secrets []string          `json:"secrets_set,omitempty"`
	Created int64             `json:"created_ms,omitempty"`
	Creator string            `json:"creator_name,omitempty"`
}

func sealAAD(project int64, id, field string) string {
	return fmt.Sprintf("tributary connection %d/%s %s", project, id, field)
}

// loadConnection opens a stored connection into c.conns.
func (c *Catalog) loadConnection(sd store.ImportDoc) error {
	if c.connKey == nil {
		return errors.New("connection_key is not set, so its secrets cannot be opened")
	}
	var d connDoc
	if err := json.Unmarshal(sd.Doc, &d); err != nil {
		return err
	}
	id := strings.TrimPrefix(sd.ID, connPrefix)
	conn := config.Connection{ID: id, Kind: d.Kind, Projects: []int64{sd.Project}, Fields: maps.Clone(d.Fields)}
	if conn.Fields == nil {
		conn.Fields = map[string]string{}
	}
	for f, v := range d.Sealed {
		plain, err := sealed.Open(c.connKey, sealAAD(sd.Project, id, f), v)
		if err != nil {
			return fmt.Errorf("%s: %w (was connection_key changed?)", f, err)
		}
		conn.Fields[f] = plain
	}
	if err := c.conns.Add(conn, c.reg); err != nil {
		return err
	}
	c.apiConns[id] = d
	return nil
}

// CreateConnection creates a Postgres connection for project from a JSON
// object of its fields; its host must be one the operator allows.
func (c *Catalog) CreateConnection(ctx context.Context, project int64, body []byte, creator string) (ConnectionView, error) {
	if c.connKey == nil {
		return ConnectionView{}, ErrNotEnabled
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return ConnectionView{}, fmt.Errorf("%w: the body must be a JSON object", ErrInvalid)
	}
	fields := map[string]string{}
	for k, v := range raw {
		if k == "kind" {
			continue
		}
		if _, ok := apiConnFields[k]; !ok {
			return ConnectionView{}, fmt.Errorf("%w: %s: not a field of a connection created through the API (host, port, user, password, database, sslmode); DSNs, files and other kinds are declared by the operator in the server config", ErrInvalid, k)
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			var n json.Number
			if k != "port" || json.Unmarshal(v, &n) != nil {
				return ConnectionView{}, fmt.Errorf("%w: %s: must be a string", ErrInvalid, k)
			}
			s = n.String()
		}
		fields[k] = s
	}
	var kind string
	if json.Unmarshal(raw["kind"], &kind) != nil || kind != "postgres" {
		return ConnectionView{}, fmt.Errorf("%w: kind: connections created through the API are postgres; other kinds are declared by the operator in the server config", ErrInvalid)
	}
	for _, k := range []string{"host", "user", "password", "database"} {
		if strings.TrimSpace(fields[k]) == "" {
			return ConnectionView{}, fmt.Errorf("%w: %s: is required", ErrInvalid, k)
		}
	}
	port := fields["port"]
	if port == "" {
		port = "5432"
	}
	if c.hostOK == nil || !c.hostOK(fields["host"], port) {
		return ConnectionView{}, fmt.Errorf("%w: host: %q port %s is not among the hosts the operator allows for connections created through the API (connection_hosts_allowed)", ErrInvalid, fields["host"], port)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.nextConnID()
	conn := config.Connection{ID: id, Kind: kind, Projects: []int64{project}, Fields: fields}
	if err := c.reg.Validate(connectors.Config{Kind: kind, Fields: fields}); err != nil {
		return ConnectionView{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	d := connDoc{Kind: kind, Fields: map[string]string{}, Sealed: map[string]string{}, CreatedMs: c.now().UnixMilli(), Creator: creator}
	for k, v := range fields {
		if !apiConnFields[k].secret {
			d.Fields[k] = v
			continue
		}
		s, err := sealed.Seal(c.connKey, sealAAD(project, id, k), v)
		if err != nil {
			return ConnectionView{}, err
		}
		d.Sealed[k] = s
	}
	doc, err := json.Marshal(d)
	if err != nil {
		return ConnectionView{}, err
	}
	if err := c.st.PutImportDoc(ctx, store.ImportDoc{Project: project, ID: connPrefix + id, Doc: doc}); err != nil {
		return ConnectionView{}, err
	}
	if err := c.conns.Add(conn, c.reg); err != nil {
		return ConnectionView{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c.apiConns[id] = d
	return apiView(id, d), nil
}

// nextConnID is one more than the largest numeric connection id (the
// public API's warehouse_source_id is an integer); the caller holds c.mu.
func (c *Catalog) nextConnID() string {
	var max int64
	for _, id := range c.conns.IDs() {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil && n > max {
			max = n
		}
	}
	return strconv.FormatInt(max+1, 10)
}

func apiView(id string, d connDoc) ConnectionView {
	v := ConnectionView{ID: id, Kind: d.Kind, Origin: OriginAPI, Fields: d.Fields, Created: d.CreatedMs, Creator: d.Creator}
	for k := range d.Sealed {
		v.Secrets = append(v.Secrets, k)
	}
	slices.Sort(v.Secrets)
	return v
}

// Connections lists the connections imports of project may name.
func (c *Catalog) Connections(project int64) []ConnectionView {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ConnectionView
	for _, id := range c.conns.IDs() {
		conn, ok := c.conns.Lookup(id)
		if !ok || !conn.AllowedFor(project) {
			continue
		}
		if d, api := c.apiConns[id]; api {
			out = append(out, apiView(id, d))
		} else {
			out = append(out, ConnectionView{ID: id, Kind: conn.Kind, Origin: "config"})
		}
	}
	return out
}

// DeleteConnection deletes a connection project created through the API
// that no import names.
func (c *Catalog) DeleteConnection(ctx context.Context, project int64, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, ok := c.conns.Lookup(id)
	if !ok || !conn.AllowedFor(project) {
		return fmt.Errorf("connection %s in project %d: %w", id, project, ErrNotFound)
	}
	if _, api := c.apiConns[id]; !api {
		return fmt.Errorf("%w: connection %s is declared in the server config; only the operator can remove it", ErrInvalid, id)
	}
	for _, e := range c.entries {
		if !e.Deleted && e.Import.Connection == id {
			return fmt.Errorf("%w: import %s of project %d names connection %s; delete it first", ErrInUse, e.Import.ID, e.Import.ProjectID, id)
		}
	}
	if err := c.st.PutImportDoc(ctx, store.ImportDoc{Project: project, ID: connPrefix + id}); err != nil {
		return err
	}
	c.conns.Remove(id)
	delete(c.apiConns, id)
	return nil
}
