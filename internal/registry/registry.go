// Package registry is the name → provider table that embed and rerank
// register their providers in, as database/sql registers drivers: safe
// for concurrent use, written by init functions, a second registration
// under one name a programming error.
package registry

import (
	"sort"
	"sync"
)

// Registry maps names to providers of type T. The zero value is empty and
// ready to use.
type Registry[T any] struct {
	mu sync.RWMutex // guards m; held only to read or change it, never while a provider runs
	m  map[string]T
}

// Add registers v under name and reports false, changing nothing, when a
// provider is already registered under it.
func (r *Registry[T]) Add(name string, v T) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		return false
	}
	if r.m == nil {
		r.m = map[string]T{}
	}
	r.m[name] = v
	return true
}

// Get returns the provider registered under name.
func (r *Registry[T]) Get(name string) (T, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.m[name]
	return v, ok
}

// Names returns the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.m))
	for name := range r.m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
