package importspec

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/internal/config"
)

// ErrNoConnection is the error of an import naming a connection that is
// not declared, or not declared for its project (the two are one error,
// so a project cannot learn which connections other projects have).
var ErrNoConnection = errors.New("no such connection")

// Connections are the operator's warehouse connections (the server
// config's `connections:`), checked against the connector registry, plus
// those project owners created through the app API (Add).
type Connections struct {
	mu   sync.RWMutex
	byID map[string]*config.Connection
}

// NewConnections checks every connection's kind and fields, and that
// each secret field is a ${VAR} or read from a file: a secret never sits
// in the config file.
func NewConnections(list []config.Connection, reg *connectors.Registry) (*Connections, error) {
	cs := &Connections{byID: map[string]*config.Connection{}}
	for i := range list {
		c := &list[i]
		key := fmt.Sprintf("connections[%d]", i)
		if reg != nil {
			if err := checkConnection(c, reg, key); err != nil {
				return nil, err
			}
		}
		cs.byID[c.ID] = c
	}
	return cs, nil
}

func checkConnection(c *config.Connection, reg *connectors.Registry, key string) error {
	kind, ok := reg.Lookup(c.Kind)
	if !ok {
		names := make([]string, 0)
		for _, k := range reg.Kinds() {
			names = append(names, k.Name)
		}
		return &Error{Key: key + ".kind", Msg: fmt.Sprintf("unknown kind %q (one of %s)", c.Kind, strings.Join(names, ", "))}
	}
	secret := map[string]bool{}
	for _, f := range kind.Fields {
		secret[f.Name] = f.Secret
	}
	names := make([]string, 0, len(c.Fields))
	for n := range c.Fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		_, fromFile := c.Files[n]
		switch {
		case fromFile && !secret[n]:
			return &Error{Key: key + "." + n, Msg: "is not a secret field: give its value, not {file: …}"}
		case secret[n] && !fromFile && c.Raw[n] != "" && !config.IsEnvRef(c.Raw[n]):
			return &Error{Key: key + "." + n, Msg: "is a secret: give it as ${ENV_VAR} or {file: PATH}, never literally in the file (and never ${VAR:-default})"}
		}
	}
	if err := reg.Validate(connectors.Config{Kind: c.Kind, Fields: c.Fields}); err != nil {
		var fe *connectors.FieldError
		if errors.As(err, &fe) {
			return &Error{Key: key + strings.TrimPrefix(fe.Field, "source"), Msg: fe.Msg}
		}
		return &Error{Key: key, Msg: err.Error()}
	}
	return nil
}

// Resolve returns the connection id as the connectors see it, if imports
// of project may use it.
func (cs *Connections) Resolve(id string, project int64) (connectors.Config, error) {
	var c *config.Connection
	if cs != nil {
		cs.mu.RLock()
		c = cs.byID[id]
		cs.mu.RUnlock()
	}
	if c == nil || !c.AllowedFor(project) {
		return connectors.Config{}, fmt.Errorf("%w %q for project %d: name a connection the operator declared in the server config (connections:)", ErrNoConnection, id, project)
	}
	return connectors.Config{Kind: c.Kind, Fields: maps.Clone(c.Fields)}, nil
}

// Add adds a connection (one created through the app API), checked like
// the config's but for the rule on secret fields: the caller holds their
// values, sealed at rest.
func (cs *Connections) Add(c config.Connection, reg *connectors.Registry) error {
	c.Raw = nil
	if reg != nil {
		if err := reg.Validate(connectors.Config{Kind: c.Kind, Fields: c.Fields}); err != nil {
			return err
		}
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if _, taken := cs.byID[c.ID]; taken {
		return fmt.Errorf("connection %q already exists", c.ID)
	}
	cs.byID[c.ID] = &c
	return nil
}

// Remove removes a connection.
func (cs *Connections) Remove(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.byID, id)
}

// Lookup returns a copy of the connection with that id.
func (cs *Connections) Lookup(id string) (config.Connection, bool) {
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	c, ok := cs.byID[id]
	if !ok {
		return config.Connection{}, false
	}
	cp := *c
	cp.Fields = maps.Clone(c.Fields)
	return cp, true
}

// IDs lists every connection id.
func (cs *Connections) IDs() []string {
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	ids := make([]string, 0, len(cs.byID))
	for id := range cs.byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
