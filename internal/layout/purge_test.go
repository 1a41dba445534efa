package layout

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// After a purge is marked, no older generation becomes live again: Publish
// refuses it, Clean removes it whatever keep says, CheckPurged names the
// purge's time.
func TestPurgeMarkRefusesOlder(t *testing.T) {
	d, err := Lock(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Unlock()
	for _, g := range []string{"gen-000001", "gen-000002", "gen-000003"} {
		mkgen(t, d, g)
	}
	if err := d.Publish("gen-000002"); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := d.MarkPurge("gen-000003", at); err != nil {
		t.Fatal(err)
	}
	err = d.Publish("gen-000001")
	var pe *PurgedError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPurged) || pe.Purge.Generation != "gen-000003" || !pe.Purge.Time.Equal(at) {
		t.Fatalf("publish of an older generation: %v; want a *PurgedError", err)
	}
	if err := d.Publish("gen-000003"); err != nil {
		t.Fatal(err)
	}
	removed, err := d.Clean(10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"gen-000002", "gen-000001"}) {
		t.Errorf("Clean(10) after a purge removed %v; want both older generations", removed)
	}
	if err := CheckPurged(d.path, "gen-000002"); !errors.Is(err, ErrPurged) {
		t.Errorf("CheckPurged(gen-000002) = %v", err)
	}
	if err := CheckPurged(d.path, "gen-000003"); err != nil {
		t.Errorf("CheckPurged(gen-000003) = %v", err)
	}
}

// A crash between the mark and the publish: the next Resolve publishes the
// purge's generation, never the older one CURRENT still names.
func TestResolveFinishesPurge(t *testing.T) {
	d, err := Lock(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mkgen(t, d, "gen-000001")
	if err := d.Publish("gen-000001"); err != nil {
		t.Fatal(err)
	}
	gen, err := d.NewGeneration()
	if err != nil {
		t.Fatal(err)
	}
	mkgen(t, d, gen)
	if err := d.MarkPurge(gen, time.Now()); err != nil {
		t.Fatal(err)
	}
	d = relock(t, d)
	got, _, err := d.Resolve()
	if err != nil || got != gen {
		t.Fatalf("Resolve = %s, %v; want %s", got, err, gen)
	}
	if Unfinished(d.path, gen) {
		t.Error("the purge's generation is still marked unfinished")
	}
	// A mark whose generation is lost: nothing is served.
	os.RemoveAll(filepath.Join(d.path, gen))
	os.WriteFile(filepath.Join(d.path, CurrentName), []byte("gen-000001\n"), 0o644)
	if _, _, err := d.Resolve(); err == nil {
		t.Fatal("Resolve with the purge's generation lost succeeded")
	}
}

// RemoveBefore waits for a held older generation to be released, then
// removes it and the temporary files.
func TestRemoveBeforeWaitsForHolds(t *testing.T) {
	d, err := Lock(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Unlock()
	mkgen(t, d, "gen-000001")
	mkgen(t, d, "gen-000002")
	if err := d.Publish("gen-000002"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d.path, "CURRENT.tmp"), []byte("x"), 0o644)
	release := d.Hold("gen-000001")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r, err := d.RemoveBefore(ctx, "gen-000002"); err == nil || len(r.Generations) != 0 {
		t.Fatalf("RemoveBefore with a hold: %+v, %v; want it to wait, then fail", r, err)
	}
	time.AfterFunc(20*time.Millisecond, release)
	r, err := d.RemoveBefore(context.Background(), "gen-000002")
	if err != nil || !slices.Equal(r.Generations, []string{"gen-000001"}) || !slices.Equal(r.Temp, []string{"CURRENT.tmp"}) || r.Bytes() != 3 {
		t.Fatalf("RemoveBefore = %+v, %v", r, err)
	}
	if got := listing(t, d.path); got != "CURRENT=gen-000002 LASTGEN=2 gen-000002" && got != "CURRENT=gen-000002 gen-000002" {
		t.Errorf("left %s", got)
	}
}

// A purge that began and was never marked (a crash or an error between its
// deletes and its mark): no generation older than the one live when it
// began becomes live again, and Clean removes them; MarkPurge clears it.
func TestPurgingRefusesOlder(t *testing.T) {
	d, err := Lock(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Unlock()
	for _, g := range []string{"gen-000001", "gen-000002"} {
		mkgen(t, d, g)
	}
	if err := d.Publish("gen-000002"); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := d.BeginPurge("gen-000002", at); err != nil {
		t.Fatal(err)
	}
	err = d.Publish("gen-000001")
	var pe *PurgedError
	if !errors.As(err, &pe) || !pe.Unfinished || pe.Purge.Generation != "gen-000002" || !pe.Purge.Time.Equal(at) {
		t.Fatalf("publish of a generation older than an unfinished purge: %v; want a *PurgedError", err)
	}
	if err := CheckPurged(d.path, "gen-000002"); err != nil {
		t.Errorf("CheckPurged(the live one) = %v", err)
	}
	removed, err := d.Clean(10)
	if err != nil || !slices.Equal(removed, []string{"gen-000001"}) {
		t.Errorf("Clean(10) during an unfinished purge removed %v, %v; want gen-000001", removed, err)
	}
	gen, err := d.NewGeneration()
	if err != nil {
		t.Fatal(err)
	}
	mkgen(t, d, gen)
	if err := d.MarkPurge(gen, at); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.path, PurgingName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("PURGING after the mark: %v", err)
	}
}

// A crash (or a cancellation) after a purge's publish, before RemoveBefore
// removed the older generations: the next Resolve removes them.
func TestResolveRemovesPurgedGenerations(t *testing.T) {
	d, err := Lock(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"gen-000001", "gen-000002"} {
		mkgen(t, d, g)
	}
	if err := d.Publish("gen-000002"); err != nil {
		t.Fatal(err)
	}
	gen, err := d.NewGeneration()
	if err != nil {
		t.Fatal(err)
	}
	mkgen(t, d, gen)
	if err := d.MarkPurge(gen, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := d.Publish(gen); err != nil {
		t.Fatal(err)
	}
	d = relock(t, d)
	defer d.Unlock()
	if got, _, err := d.Resolve(); err != nil || got != gen {
		t.Fatalf("Resolve = %s, %v; want %s", got, err, gen)
	}
	if gens, err := Generations(d.path); err != nil || !slices.Equal(gens, []string{gen}) {
		t.Errorf("generations after Resolve: %v, %v; want only %s", gens, err, gen)
	}
}
