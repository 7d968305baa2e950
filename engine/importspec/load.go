package importspec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/internal/config"
)

// Error is a validation problem: the file, the key and, when it is about a
// column, the column.
type Error struct {
	File   string
	Key    string
	Column string
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	if e.Column != "" {
		fmt.Fprintf(&b, "column %q: ", e.Column)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found, in file order.
type Errors []*Error

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Err returns nil for no problems, else es.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Loader loads imports against the server's connections.
type Loader struct {
	Registry *connectors.Registry
	// Connections the imports may name (nil: none declared).
	Connections *Connections
	// Env resolves ${VAR} in import files (nil: the environment). It is
	// never used for imports from the app API.
	Env func(string) (string, bool)
}

// LoadFile reads one import file with no connections declared.
func LoadFile(path string, reg *connectors.Registry, lookup func(string) (string, bool)) (*Import, error) {
	return Loader{Registry: reg, Env: lookup}.File(path)
}

// Parse is LoadFile without the file system.
func Parse(path string, raw []byte, reg *connectors.Registry, lookup func(string) (string, bool)) (*Import, error) {
	return Loader{Registry: reg, Env: lookup}.Parse(path, raw)
}

// LoadDir is Loader.Dir with no connections declared.
func LoadDir(dir string, reg *connectors.Registry, lookup func(string) (string, bool)) ([]*Import, error) {
	return Loader{Registry: reg, Env: lookup}.Dir(dir)
}

// File reads one import file. Files are the operator's: their source
// may be inline; secrets in it must be ${VAR} references (checked before
// expansion, so a secret never sits in a file); every value is expanded
// on its own, so a secret containing YAML syntax cannot change the
// document's structure.
func (l Loader) File(path string) (*Import, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return l.Parse(path, raw)
}

// Parse is File without the file system.
func (l Loader) Parse(path string, raw []byte) (*Import, error) {
	root, err := parseRoot(path, raw)
	if err != nil {
		return nil, err
	}
	if err := connectionRef(path, root); err != nil {
		return nil, err
	}
	if err := checkSecrets(path, root, l.Registry); err != nil {
		return nil, err
	}
	if err := expand(path, root, "", l.Env); err != nil {
		return nil, err
	}
	return l.decode(path, root)
}

// ParseAPI reads an import created through the app API (JSON). A project
// user wrote it, so nothing in it is expanded from the server's
// environment, and it names an operator's connection
// (warehouse_source_id) for its project instead of carrying a source: no
// DSN, file path or credentials of its own. name labels errors.
func (l Loader) ParseAPI(name string, raw []byte) (*Import, error) {
	root, err := parseRoot(name, raw)
	if err != nil {
		return nil, err
	}
	if k := mapKey(root, "source"); k != nil {
		return nil, &Error{File: name, Key: "source", Msg: "imports created through the API cannot declare a source (a DSN, a file path, credentials): name a connection the operator declared with warehouse_source_id"}
	}
	ws := mapValue(root, "warehouse_source_id")
	if ws == nil || ws.Kind != yaml.ScalarNode || ws.Value == "" {
		return nil, &Error{File: name, Key: "warehouse_source_id", Msg: "is required: the id of a connection the operator declared in the server config"}
	}
	// ${…} is never expanded here; where it would have named what is
	// read it is refused rather than taken literally, so a request that
	// expected expansion fails clearly instead of reading something else.
	refs := map[string]*yaml.Node{"warehouse_source_id": ws}
	if tp := mapValue(root, "table_params"); tp != nil {
		refs["table_params.table"], refs["table_params.query"] = mapValue(tp, "table"), mapValue(tp, "query")
	}
	for _, k := range []string{"warehouse_source_id", "table_params.table", "table_params.query"} {
		if n := refs[k]; n != nil && strings.Contains(n.Value, "${") {
			return nil, &Error{File: name, Key: k, Msg: "${…} is not expanded in imports created through the API (the server's environment is the operator's); write the value itself"}
		}
	}
	return l.decode(name, root)
}

// parseRoot parses the document and refuses aliases, merge keys and
// unknown keys.
func parseRoot(path string, raw []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, &Error{File: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 {
		return nil, &Error{File: path, Msg: "empty file"}
	}
	if err := config.RefuseAliases(&doc); err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	root := doc.Content[0]
	if err := checkKeys(path, root); err != nil {
		return nil, err
	}
	return root, nil
}

// connectionRef rewrites `source: {connection: ID}` as
// `warehouse_source_id: ID`.
func connectionRef(path string, root *yaml.Node) error {
	src := mapValue(root, "source")
	if src == nil || src.Kind != yaml.MappingNode || mapValue(src, "connection") == nil {
		return nil
	}
	if len(src.Content) != 2 {
		return &Error{File: path, Key: "source.connection", Msg: "names a connection: give no other source fields beside it"}
	}
	id := src.Content[1]
	if ws := mapValue(root, "warehouse_source_id"); ws != nil && ws.Value != id.Value {
		return &Error{File: path, Key: "warehouse_source_id", Msg: fmt.Sprintf("%q differs from source.connection %q; give one", ws.Value, id.Value)}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "source" {
			root.Content = append(root.Content[:i], root.Content[i+2:]...)
			break
		}
	}
	if mapValue(root, "warehouse_source_id") == nil {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "warehouse_source_id"}, id)
	}
	return nil
}

// decode decodes the checked document and resolves its connection.
func (l Loader) decode(path string, root *yaml.Node) (*Import, error) {
	text, err := yaml.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	var im Import
	if err := dec.Decode(&im); err != nil && !errors.Is(err, io.EOF) {
		return nil, &Error{File: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	im.file = path
	if im.Connection != "" {
		if len(im.Source) > 0 {
			return nil, &Error{File: path, Key: "warehouse_source_id", Msg: "give a connection or an inline source, not both"}
		}
		c, err := l.Connections.Resolve(im.Connection, im.ProjectID)
		if err != nil {
			return nil, &Error{File: path, Key: "warehouse_source_id", Msg: err.Error()}
		}
		im.conn = &c
	}
	return &im, nil
}

// checkKeys refuses unknown keys with their line in the file as written
// (decoding happens after expansion, on re-encoded text).
func checkKeys(path string, root *yaml.Node) error {
	if root.Kind != yaml.MappingNode {
		return &Error{File: path, Msg: "an import file is a YAML mapping of keys to values"}
	}
	known := map[string]bool{"source": true, "table_params": true, "warehouse_source_id": true}
	for _, f := range fields {
		known[f.name] = true
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		if !known[k.Value] {
			return &Error{File: path, Key: k.Value, Msg: fmt.Sprintf("unknown key (line %d)", k.Line)}
		}
	}
	if tp := mapValue(root, "table_params"); tp != nil && tp.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(tp.Content); i += 2 {
			if k := tp.Content[i]; k.Value != "table" && k.Value != "query" {
				return &Error{File: path, Key: "table_params." + k.Value, Msg: fmt.Sprintf("unknown key (line %d); use table or query", k.Line)}
			}
		}
	}
	return nil
}

// checkSecrets refuses literal values for fields a source kind marks secret.
func checkSecrets(path string, root *yaml.Node, reg *connectors.Registry) error {
	src := mapValue(root, "source")
	if src == nil || src.Kind != yaml.MappingNode || reg == nil {
		return nil
	}
	kindNode := mapValue(src, "kind")
	if kindNode == nil {
		return nil
	}
	kind, ok := reg.Lookup(kindNode.Value)
	if !ok {
		return nil
	}
	for _, f := range kind.Fields {
		v := mapValue(src, f.Name)
		if f.Secret && v != nil && v.Value != "" && !config.IsEnvRef(v.Value) {
			return &Error{File: path, Key: "source." + f.Name,
				Msg: "is a secret: give it as ${ENV_VAR}, never literally in the file (and not as ${VAR:-default})"}
		}
	}
	return nil
}

func mapKey(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	return nil
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// expand resolves ${VAR} in every value of the file on its own (after
// parsing, so a value cannot change the document's structure).
func expand(path string, n *yaml.Node, key string, lookup func(string) (string, bool)) error {
	return config.WalkScalars(n, key, func(n *yaml.Node, key string) error {
		v, err := config.ExpandEnv(n.Value, lookup)
		if err != nil {
			return &Error{File: path, Key: key, Msg: err.Error()}
		}
		config.SetScalar(n, v)
		return nil
	})
}

// Dir loads every *.yaml / *.yml file in dir (a missing dir is empty),
// sorted by name, and refuses duplicate ids.
func (l Loader) Dir(dir string) ([]*Import, error) {
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	var out []*Import
	seen := map[string]string{}
	for _, f := range files {
		im, err := l.File(f)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[im.ID]; dup && im.ID != "" {
			return nil, &Error{File: f, Key: "id", Msg: fmt.Sprintf("%q is also the id of %s", im.ID, prev)}
		}
		seen[im.ID] = f
		out = append(out, im)
	}
	return out, nil
}
