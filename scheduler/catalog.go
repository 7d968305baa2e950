package scheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
)

// Origins of an import.
const (
	OriginFile = "file" // declared in imports_dir
	OriginAPI  = "api"  // created through the app API
)

type key struct {
	project int64
	id      string
}

// Entry is one import as the scheduler and the app API see it.
type Entry struct {
	Import    *importspec.Import // with the app API's changes applied
	Project   importspec.Project
	Origin    string
	CreatedMs int64
	Creator   string
	Deleted   bool
	// PausedReason says why a monitoring rule paused the import ("" when
	// paused by hand, or running).
	PausedReason string
}

// Paused reports whether the import may run.
func (e Entry) Paused() bool { return e.Deleted || e.Import.Paused }

// Schedule is the import's schedule ("" or "api": manual only).
func (e Entry) Schedule() string { return e.Import.Schedule }

// doc is what the store keeps for an import: the whole declaration for
// one created through the API, only the API's changes for one from a file
// (the file stays the source of truth for everything else).
type doc struct {
	Origin    string          `json:"origin"`
	Spec      json.RawMessage `json:"spec,omitempty"`
	Paused    *bool           `json:"paused,omitempty"`
	Schedule  *string         `json:"schedule,omitempty"`
	Deleted   bool            `json:"deleted,omitempty"`
	CreatedMs int64           `json:"created_ms,omitempty"`
	Creator   string          `json:"creator,omitempty"`
	// PausedReason: a monitoring rule paused the import (monitor.go).
	PausedReason string `json:"paused_reason,omitempty"`
}

// Catalog is every import: files from imports_dir plus the app API's
// documents in the store.
type Catalog struct {
	st       store.Syncs
	reg      *connectors.Registry
	projects func(int64) (importspec.Project, bool)
	conns    *importspec.Connections
	connKey  []byte                       // connection_key; nil: no connections through the API
	hostOK   func(host, port string) bool // connection_hosts_allowed
	apiConns map[string]connDoc           // connections created through the API, by id
	floor    time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex
	entries map[key]Entry
	docs    map[key]doc
	// leftOut are stored imports that no longer pass at start: their ids
	// stay taken, so a new import never inherits their runs or state.
	leftOut  map[key]bool
	onChange func(Entry)
}

// CatalogOptions configure NewCatalog.
type CatalogOptions struct {
	Store    store.Syncs // where the app API's import documents live
	Registry *connectors.Registry
	Projects func(int64) (importspec.Project, bool)
	Files    []*importspec.Import // validated imports from imports_dir
	// Connections are the operator's; imports from the API can only
	// name one of them.
	Connections *importspec.Connections
	// ConnectionKey seals the secrets of connections created through the
	// API (nil: no such connections); HostAllowed is the operator's
	// allow-list for their hosts.
	ConnectionKey []byte
	HostAllowed   func(host, port string) bool
	// MinInterval is the schedule floor (0: importspec.DefaultMinInterval).
	MinInterval time.Duration
	Log         *slog.Logger // nil: discarded
	Now         func() time.Time
}

// NewCatalog loads the API's documents over the file imports.
func NewCatalog(ctx context.Context, o CatalogOptions) (*Catalog, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Connections == nil {
		o.Connections, _ = importspec.NewConnections(nil, nil)
	}
	c := &Catalog{st: o.Store, reg: o.Registry, projects: o.Projects, conns: o.Connections, floor: o.MinInterval,
		connKey: o.ConnectionKey, hostOK: o.HostAllowed, apiConns: map[string]connDoc{},
		log: o.Log, now: o.Now, entries: map[key]Entry{}, docs: map[key]doc{}, leftOut: map[key]bool{}}
	for _, im := range o.Files {
		p, _ := o.Projects(im.ProjectID)
		c.entries[key{im.ProjectID, im.ID}] = Entry{Import: im, Project: p, Origin: OriginFile}
	}
	docs, err := o.Store.ImportDocs(ctx)
	if err != nil {
		return nil, fmt.Errorf("scheduler: load imports: %w", err)
	}
	// Connections first: imports may name them.
	for _, sd := range docs {
		if strings.HasPrefix(sd.ID, connPrefix) {
			if err := c.loadConnection(sd); err != nil {
				c.log.Warn("connection left out: it cannot be opened", "project", sd.Project, "connection", strings.TrimPrefix(sd.ID, connPrefix), "err", err)
			}
		}
	}
	for _, sd := range docs {
		if strings.HasPrefix(sd.ID, connPrefix) {
			continue
		}
		var d doc
		if err := json.Unmarshal(sd.Doc, &d); err != nil {
			return nil, fmt.Errorf("scheduler: import %s of project %d: stored document: %w", sd.ID, sd.Project, err)
		}
		k := key{sd.Project, sd.ID}
		e, err := c.apply(k, d)
		if err != nil {
			// A stored import that no longer passes (one from before
			// imports had to name a connection, a connection removed
			// from the config) is left out, not run: the server still
			// starts, and the import can be created again.
			c.leftOut[k] = true
			if !d.Deleted {
				c.log.Warn("import left out: it does not pass the server's rules; create it again", "project", sd.Project, "import", sd.ID, "err", err)
			}
			continue
		}
		c.docs[k] = d
		if e.Import != nil {
			c.entries[k] = e
		}
	}
	return c, nil
}

// apply builds the entry a document describes over the file import.
func (c *Catalog) apply(k key, d doc) (Entry, error) {
	var e Entry
	switch d.Origin {
	case OriginAPI:
		im, err := c.loader().ParseAPI(fmt.Sprintf("import %s", k.id), d.Spec)
		if err == nil {
			err = im.Check(c.rules())
		}
		if err != nil {
			return e, err
		}
		p, _ := c.projects(k.project)
		e = Entry{Import: im, Project: p, Origin: OriginAPI}
	case OriginFile:
		base, ok := c.entries[k]
		if !ok || base.Origin != OriginFile {
			return e, nil // its file is gone: nothing to change
		}
		cp := *base.Import
		e = base
		e.Import = &cp
	default:
		return e, fmt.Errorf("unknown origin %q", d.Origin)
	}
	if d.Paused != nil {
		e.Import.Paused = *d.Paused
	}
	if d.Schedule != nil {
		// Patch checks a new schedule; one stored by an older version
		// under the floor is not applied (the import keeps its own).
		if err := importspec.CheckSchedule(*d.Schedule, c.floor); err != nil {
			c.log.Warn("stored schedule ignored", "project", k.project, "import", k.id, "err", err)
		} else {
			e.Import.Schedule = *d.Schedule
		}
	}
	e.Deleted, e.CreatedMs, e.Creator = d.Deleted, d.CreatedMs, d.Creator
	e.PausedReason = ""
	if e.Import.Paused {
		e.PausedReason = d.PausedReason
	}
	return e, nil
}

func (c *Catalog) loader() importspec.Loader {
	return importspec.Loader{Registry: c.reg, Connections: c.conns}
}

func (c *Catalog) rules() importspec.Rules {
	return importspec.Rules{Registry: c.reg, Projects: c.projects, MinInterval: c.floor}
}

// List returns the imports of project (0: all), deleted ones excluded,
// ordered by project and id.
func (c *Catalog) List(project int64) []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Entry
	for k, e := range c.entries {
		if (project == 0 || k.project == project) && !e.Deleted {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Import.ProjectID != b.Import.ProjectID {
			return cmp.Compare(a.Import.ProjectID, b.Import.ProjectID)
		}
		return compareIDs(a.Import.ID, b.Import.ID)
	})
	return out
}

// compareIDs orders numeric ids as numbers (the API's), others as text.
func compareIDs(a, b string) int {
	na, ea := strconv.ParseInt(a, 10, 64)
	nb, eb := strconv.ParseInt(b, 10, 64)
	if ea == nil && eb == nil {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(a, b)
}

// Get returns one import that is not deleted.
func (c *Catalog) Get(project int64, id string) (Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key{project, id}]
	return e, ok && !e.Deleted
}

// save stores d and applies it; the caller holds c.mu.
func (c *Catalog) save(ctx context.Context, k key, d doc) (Entry, error) {
	e, err := c.apply(k, d)
	if err != nil {
		return e, err
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return e, err
	}
	if err := c.st.PutImportDoc(ctx, store.ImportDoc{Project: k.project, ID: k.id, Doc: raw}); err != nil {
		return e, err
	}
	c.docs[k] = d
	c.entries[k] = e
	if c.onChange != nil {
		c.onChange(e)
	}
	return e, nil
}
