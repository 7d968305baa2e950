//go:build linux && amd64

package duckstore

// DuckDB links its own jemalloc on Linux, its symbols prefixed duckdb_je_.

/*
#include <stddef.h>
#include <stdlib.h>
#include <sys/types.h>

int duckdb_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

static int tributary_je_set_ssize(const char *name, long v) {
	ssize_t x = v;
	return duckdb_je_mallctl(name, NULL, NULL, &x, sizeof(x));
}

static int tributary_je_get_ssize(const char *name, long *v) {
	ssize_t x;
	size_t len = sizeof(x);
	int rc = duckdb_je_mallctl(name, &x, &len, NULL, 0);
	*v = x;
	return rc;
}

static int tributary_je_narenas(unsigned *n) {
	size_t len = sizeof(*n);
	return duckdb_je_mallctl("arenas.narenas", n, &len, NULL, 0);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// returnFreedMemory sets the decay delays of DuckDB's allocator to
// freedDecayMs, for every arena and those made later: freed pages go back
// to the system after that instead of staying resident for jemalloc's
// default delay. The setting is the process's. It is made through mallctl
// because the environment variable (DUCKDB_JE_MALLOC_CONF) had no effect
// when set from Go: jemalloc had already read it, before main ran.
func returnFreedMemory() error {
	set := func(name string) C.int {
		cs := C.CString(name)
		defer C.free(unsafe.Pointer(cs))
		return C.tributary_je_set_ssize(cs, freedDecayMs)
	}
	// The defaults of arenas made from now on.
	for _, name := range []string{"arenas.dirty_decay_ms", "arenas.muzzy_decay_ms"} {
		if rc := set(name); rc != 0 {
			return fmt.Errorf("jemalloc %s: error %d", name, int(rc))
		}
	}
	var n C.uint
	if rc := C.tributary_je_narenas(&n); rc != 0 {
		return fmt.Errorf("jemalloc arenas.narenas: error %d", int(rc))
	}
	// The arenas in use; the others (EFAULT: not made yet) take the
	// defaults above when they are.
	for i := range uint(n) {
		for _, kind := range []string{"dirty", "muzzy"} {
			set(fmt.Sprintf("arena.%d.%s_decay_ms", i, kind))
		}
	}
	return nil
}

// decayMs reads an arena setting such as "arenas.dirty_decay_ms" (tests).
func decayMs(name string) (int64, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var v C.long
	if rc := C.tributary_je_get_ssize(cs, &v); rc != 0 {
		return 0, fmt.Errorf("jemalloc %s: error %d", name, int(rc))
	}
	return int64(v), nil
}
