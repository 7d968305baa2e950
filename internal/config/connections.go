package config

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tributary-dev/tributary/internal/sealed"
)

// Connection is one warehouse connection the operator declares
// (`connections:`). Imports name it (warehouse_source_id) instead of
// carrying a source of their own; imports created through the app API can
// only do that. The kind's fields are checked against the connector
// registry by importspec.NewConnections, which also holds secret fields
// to ${VAR} or {file: PATH}.
type Connection struct {
	ID   string
	Kind string
	// Projects whose imports may use the connection. With one project in
	// the config it defaults to that project; with more it is required.
	Projects []int64
	// Fields are the kind's fields, ${VAR} expanded and files read.
	Fields map[string]string
	// Raw are the scalar fields as written, before expansion: the rule
	// that a secret is a ${VAR} is checked on them.
	Raw map[string]string
	// Files are the fields read from a file ({file: PATH}): field → path.
	Files map[string]string
	Line  int
}

// AllowedFor reports whether imports of project may use the connection.
func (c *Connection) AllowedFor(project int64) bool {
	for _, p := range c.Projects {
		if p == project {
			return true
		}
	}
	return false
}

// UnmarshalYAML takes id, kind and projects plus the kind's fields, flat
// as in an import's source block; a field may be {file: PATH}, whose
// content (without a trailing newline) is its value.
func (c *Connection) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a connection is a mapping of id, kind, projects and the kind's fields", n.Line)
	}
	c.Line, c.Fields, c.Files = n.Line, map[string]string{}, map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		switch {
		case k == "projects":
			if err := v.Decode(&c.Projects); err != nil {
				return fmt.Errorf("line %d: projects: must be a list of project ids, e.g. [1, 2]", v.Line)
			}
		case v.Kind == yaml.ScalarNode && (k == "id" || k == "kind"):
			if k == "id" {
				c.ID = v.Value
			} else {
				c.Kind = v.Value
			}
		case v.Kind == yaml.ScalarNode:
			c.Fields[k] = v.Value
		case v.Kind == yaml.MappingNode && len(v.Content) == 2 && v.Content[0].Value == "file":
			path := v.Content[1].Value
			b, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("line %d: %s: reading {file: %s}: %w", v.Line, k, path, err)
			}
			c.Fields[k] = strings.TrimRight(string(b), "\r\n")
			c.Files[k] = path
		default:
			return fmt.Errorf("line %d: %s: must be a string, a ${VAR} or {file: PATH}", v.Line, k)
		}
	}
	return nil
}

// rawConnections returns the scalar fields of each connection as written,
// before ${VAR} expansion.
func rawConnections(root *yaml.Node) []map[string]string {
	var out []map[string]string
	seq := mappingValue(root, "connections")
	if seq == nil || seq.Kind != yaml.SequenceNode {
		return nil
	}
	for _, m := range seq.Content {
		raw := map[string]string{}
		if m.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(m.Content); i += 2 {
				if v := m.Content[i+1]; v.Kind == yaml.ScalarNode {
					raw[m.Content[i].Value] = v.Value
				}
			}
		}
		out = append(out, raw)
	}
	return out
}

func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

var connectionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ConnectionKeyBytes is connection_key decoded (nil when unset).
func (c *Config) ConnectionKeyBytes() []byte {
	k, _ := sealed.ParseKey(c.ConnectionKey)
	return k
}

// HostAllowed reports whether a connection created through the API may
// reach host:port.
func (c *Config) HostAllowed(host, port string) bool {
	for _, a := range c.ConnectionHostsAllowed {
		h, p, err := net.SplitHostPort(a)
		if err != nil {
			h, p = a, ""
		}
		if strings.EqualFold(h, host) && (p == "" || p == port) {
			return true
		}
	}
	return false
}

// validateConnections checks what needs no connector registry: ids,
// kinds and the projects each connection serves.
func (c *Config) validateConnections() error {
	if c.ConnectionKey != "" {
		if _, err := sealed.ParseKey(c.ConnectionKey); err != nil {
			return bad("connection_key", "%v", err)
		}
	}
	for i, a := range c.ConnectionHostsAllowed {
		if h, _, err := net.SplitHostPort(a); (err != nil && strings.ContainsAny(a, ":/, ")) || (err == nil && h == "") || strings.TrimSpace(a) == "" {
			return bad(fmt.Sprintf("connection_hosts_allowed[%d]", i), "%q: give host or host:port", a)
		}
	}
	seen := map[string]string{}
	for i := range c.Connections {
		conn := &c.Connections[i]
		key := fmt.Sprintf("connections[%d]", i)
		switch {
		case conn.ID == "":
			return bad(key+".id", "is required (imports name the connection by it)")
		case !connectionID.MatchString(conn.ID):
			return bad(key+".id", "%q: use letters, digits, '_', '-' or '.' (at most 128)", conn.ID)
		}
		if prev, ok := seen[conn.ID]; ok {
			return bad(key+".id", "%q is already used by %s", conn.ID, prev)
		}
		seen[conn.ID] = key
		if strings.TrimSpace(conn.Kind) == "" {
			return bad(key+".kind", "is required")
		}
		if len(conn.Projects) == 0 {
			if len(c.Projects) != 1 {
				return bad(key+".projects", "is required when the server has more than one project: list the projects whose imports may use this connection")
			}
			conn.Projects = []int64{c.Projects[0].ID}
		}
		for j, p := range conn.Projects {
			if _, ok := c.Project(p); !ok {
				return bad(fmt.Sprintf("%s.projects[%d]", key, j), "no project %d in this config", p)
			}
		}
	}
	return nil
}

// Project returns the project with that id.
func (c *Config) Project(id int64) (*Project, bool) {
	for i := range c.Projects {
		if c.Projects[i].ID == id {
			return &c.Projects[i], true
		}
	}
	return nil, false
}

// Connection returns the connection with that id.
func (c *Config) Connection(id string) (*Connection, bool) {
	for i := range c.Connections {
		if c.Connections[i].ID == id {
			return &c.Connections[i], true
		}
	}
	return nil, false
}
