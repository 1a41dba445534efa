package embed

import (
	"context"
	"math"
	"testing"
)

func TestParseSpec(t *testing.T) {
	for in, want := range map[string]Spec{
		"none": None, "hash": {"hash", 384}, "hash/64": {"hash", 64}, " hash/384 ": Default,
	} {
		got, err := ParseSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "openai", "hash/0", "hash/x", "none/3", "hash/99999999"} {
		if _, err := ParseSpec(in); err == nil {
			t.Errorf("ParseSpec(%q) succeeded", in)
		}
	}
	if None.String() != "none" || Default.String() != "hash/384" {
		t.Errorf("String: %q %q", None, Default)
	}
}

func TestHash(t *testing.T) {
	e, err := New(Spec{"hash", 64})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Embed(context.Background(), []string{"Path Parameters with types", "path parameters WITH types", "", "other words entirely"})
	if err != nil {
		t.Fatal(err)
	}
	var norm float64
	for _, x := range vs[0] {
		norm += float64(x) * float64(x)
	}
	if math.Abs(norm-1) > 1e-6 {
		t.Errorf("norm² = %v, want 1", norm)
	}
	dot := func(a, b []float32) (s float64) {
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return
	}
	if d := dot(vs[0], vs[1]); math.Abs(d-1) > 1e-6 {
		t.Errorf("case must not matter: cos = %v", d)
	}
	if d := dot(vs[0], vs[3]); d > 0.5 {
		t.Errorf("unrelated texts too similar: cos = %v", d)
	}
	for _, x := range vs[2] {
		if x != 0 {
			t.Fatal("empty text must give the zero vector")
		}
	}
	// Pinned values: the same text gives the same bits everywhere.
	v := NewHash(8).vector("escurel indexes documents")
	want := []float32{-0.37796447, 0, -0.37796447, 0, 0, 0, 0.37796447, -0.75592893} // 5 features, two collide: ±1,±1,±1,±2 over √7
	for i := range want {
		if v[i] != want[i] {
			t.Fatalf("vector = %v, want %v", v, want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"x"}); err == nil {
		t.Error("Embed ignored a cancelled context")
	}
	if e, err := New(None); e != nil || err != nil {
		t.Errorf("New(None) = %v, %v", e, err)
	}
}
