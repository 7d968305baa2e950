package connectors

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ResolvePath makes p absolute and resolves its symlinks as far as the
// path exists, so a link cannot smuggle the store in under another name
// and a file that does not exist yet is judged by its real directory.
func ResolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// within reports whether p is root or inside it (both resolved).
func within(p, root string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, string(os.PathSeparator))+string(os.PathSeparator))
}

// Resolved returns o with every path resolved, and an error naming the
// first allowed path that holds a server path or lies inside one.
func (o Options) Resolved() (Options, error) {
	out := Options{Log: o.Log}
	for _, p := range o.ServerPaths {
		r, err := ResolvePath(p)
		if err != nil {
			return Options{}, fmt.Errorf("server path %s: %w", p, err)
		}
		out.ServerPaths = append(out.ServerPaths, r)
	}
	for i, p := range o.AllowedPaths {
		if strings.TrimSpace(p) == "" {
			return Options{}, fmt.Errorf("allowed_paths[%d]: is empty", i)
		}
		r, err := ResolvePath(p)
		if err != nil {
			return Options{}, fmt.Errorf("allowed_paths[%d]: %w", i, err)
		}
		for _, s := range out.ServerPaths {
			// s is a prefix pattern: a root inside it starts with it; a
			// root holding it is a directory s lies in.
			if strings.HasPrefix(r, s) || within(filepath.Dir(s), r) {
				return Options{}, fmt.Errorf("allowed_paths[%d]: %s overlaps the server's own files (%s): %w", i, p, s, ErrRefused)
			}
		}
		out.AllowedPaths = append(out.AllowedPaths, r)
	}
	return out, nil
}

// ServerPath reports whether the resolved path p is one of the server's
// own files (see Options.ServerPaths).
func (o Options) ServerPath(p string) bool {
	for _, s := range o.ServerPaths {
		if strings.HasPrefix(p, s) {
			return true
		}
	}
	return false
}

// Allowed reports whether the resolved path p lies under an allowed path
// and is none of the server's own files.
func (o Options) Allowed(p string) bool {
	if o.ServerPath(p) {
		return false
	}
	for _, root := range o.AllowedPaths {
		if within(p, root) {
			return true
		}
	}
	return false
}

// GuardPaths returns k whose Open first refuses a Path field naming one
// of the server's own files (opts.ServerPaths, after symlinks), so no
// kind reads the store or the config as a key file or a certificate.
func GuardPaths(k Kind, opts Options) Kind {
	var server []string
	for _, p := range opts.ServerPaths {
		if r, err := ResolvePath(p); err == nil {
			server = append(server, r)
		}
	}
	guard := Options{ServerPaths: server}
	open := k.Open
	k.Open = func(ctx context.Context, fields map[string]string) (Source, error) {
		for _, f := range k.Fields {
			v := fields[f.Name]
			if !f.Path || v == "" {
				continue
			}
			r, err := ResolvePath(v)
			if err != nil || guard.ServerPath(r) {
				return nil, Permanent(fmt.Errorf("%w: %w", &FieldError{Field: "source." + f.Name, Msg: v + " is one of the server's own files"}, ErrRefused))
			}
		}
		return open(ctx, fields)
	}
	return k
}
