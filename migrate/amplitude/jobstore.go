package amplitude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrJobNotFound is returned for an id no job has.
var ErrJobNotFound = errors.New("amplitude: no such migration job")

// JobStore persists jobs so they survive a restart.
type JobStore interface {
	// Save replaces the job's record; durable on return.
	Save(ctx context.Context, j *Job) error
	// Load returns a job by id, or ErrJobNotFound.
	Load(ctx context.Context, id string) (*Job, error)
	// List returns every job, oldest first.
	List(ctx context.Context) ([]*Job, error)
	// WorkDir returns a directory, created if needed, for the job's working
	// files (its profile spill). It is the job's alone.
	WorkDir(id string) (string, error)
}

// FileJobStore keeps each job as DIR/<id>.json, replaced atomically
// (written to a temporary file, fsynced, renamed, directory fsynced), so a
// crash leaves the old record or the new one, never a torn one. Working
// files live in DIR/<id>.d/.
type FileJobStore struct {
	dir string
}

// NewFileJobStore opens (and creates) a job directory, typically
// DATA_DIR/migrations.
func NewFileJobStore(dir string) (*FileJobStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("amplitude: job store: %w", err)
	}
	return &FileJobStore{dir: dir}, nil
}

// validID keeps ids to what newJobID makes, so an id from a URL can never
// name a path outside the store.
func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func (s *FileJobStore) path(id string) string { return filepath.Join(s.dir, id+".json") }

// Save writes the job atomically.
func (s *FileJobStore) Save(_ context.Context, j *Job) error {
	if !validID(j.ID) {
		return fmt.Errorf("amplitude: job store: invalid job id %q", j.ID)
	}
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("amplitude: job store: %w", err)
	}
	if err := writeFileAtomic(s.path(j.ID), append(data, '\n')); err != nil {
		return fmt.Errorf("amplitude: job store: save %s: %w", j.ID, err)
	}
	return nil
}

// Load reads one job.
func (s *FileJobStore) Load(_ context.Context, id string) (*Job, error) {
	if !validID(id) {
		return nil, ErrJobNotFound
	}
	data, err := os.ReadFile(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrJobNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("amplitude: job store: %w", err)
	}
	var j Job
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("amplitude: job store: %s: %w", s.path(id), err)
	}
	return &j, nil
}

// List reads every job, oldest first.
func (s *FileJobStore) List(ctx context.Context) ([]*Job, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("amplitude: job store: %w", err)
	}
	var jobs []*Job
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() || !validID(id) {
			continue // temporary files of an interrupted Save, work dirs
		}
		j, err := s.Load(ctx, id)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	slices.SortFunc(jobs, func(a, b *Job) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return jobs, nil
}

// WorkDir returns DIR/<id>.d.
func (s *FileJobStore) WorkDir(id string) (string, error) {
	if !validID(id) {
		return "", fmt.Errorf("amplitude: job store: invalid job id %q", id)
	}
	d := filepath.Join(s.dir, id+".d")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("amplitude: job store: %w", err)
	}
	return d, nil
}

// writeFileAtomic replaces path with data: temp file in the same
// directory, fsync, rename, fsync of the directory (without it the rename
// itself may not survive a power cut).
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
