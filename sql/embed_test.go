package sql

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestMigrationsEmbedded(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 2 {
		t.Fatalf("got %d migrations, want at least 2", len(ms))
	}
	for i, m := range ms {
		if m.Version != i+1 || strings.TrimSpace(m.SQL) == "" {
			t.Errorf("migration %d: %+v", i, m.Name)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]fstest.MapFS{
		"gap":     {"0001_a.sql": {Data: []byte("x")}, "0003_c.sql": {Data: []byte("x")}},
		"repeat":  {"0001_a.sql": {Data: []byte("x")}, "0001_b.sql": {Data: []byte("x")}},
		"badname": {"0001_a.sql": {Data: []byte("x")}, "2-b.sql": {Data: []byte("x")}},
		"from0":   {"0000_a.sql": {Data: []byte("x")}},
	}
	for name, fsys := range cases {
		if _, err := parse(fsys); err == nil {
			t.Errorf("%s: parse succeeded, want error", name)
		}
	}
	ms, err := parse(fstest.MapFS{"0002_b.sql": {Data: []byte("2")}, "0001_a.sql": {Data: []byte("1")}})
	if err != nil || len(ms) != 2 || ms[0].SQL != "1" || ms[1].Version != 2 {
		t.Fatalf("parse ordered = %+v, %v", ms, err)
	}
}
