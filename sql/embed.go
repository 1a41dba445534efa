// Package sql holds escurel's schema as numbered, forward-only SQL files,
// embedded into the binary.
//
// File NNNN_name.sql is schema version NNNN. Versions start at 1 and have no
// gaps; the highest number is the schema version a binary writes
// (index.SchemaVersion). The index package applies the files in order, each in
// its own transaction, and records each in the schema_migrations table. A file,
// once released, is never edited: a change to the schema is a new file.
//
// Import it under another name, as database/sql is usually imported too:
//
//	import schemasql "github.com/escurel/escurel/sql"
package sql

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
)

//go:embed *.sql
var files embed.FS

// Migration is one numbered SQL file.
type Migration struct {
	Version int    // the file's number, from 1
	Name    string // the file name, e.g. "0001_core.sql"
	SQL     string // the statements, run in one transaction
}

var fileName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// Migrations returns the embedded migrations in version order, or an error
// when a file is misnamed, a number repeats or a number is skipped.
func Migrations() ([]Migration, error) {
	return parse(files)
}

func parse(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %q: name must be NNNN_lower_snake.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %04d (versions start at 1 and have no gaps or repeats)", m.Name, i+1)
		}
	}
	return ms, nil
}
