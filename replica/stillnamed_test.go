package replica

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stillNamed tells a temporary file that a gc removed, and Snapshot then
// wrote again under its name, from one still in place (Publish refuses
// the first: it would upload an empty copy).
func TestStillNamed(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "publish-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := stillNamed(f); err != nil {
		t.Fatalf("a file in place: %v", err)
	}
	os.Remove(f.Name())
	if err := stillNamed(f); err == nil || !strings.Contains(err.Error(), "removed or replaced") {
		t.Fatalf("a removed file: %v", err)
	}
	if err := os.WriteFile(f.Name(), []byte("the snapshot's copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := stillNamed(f); err == nil {
		t.Fatalf("another file under its name (%s) passes", filepath.Base(f.Name()))
	}
}
