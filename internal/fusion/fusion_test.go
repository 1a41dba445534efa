package fusion

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func leg(pairs ...float64) Leg {
	var l Leg
	for i := 0; i < len(pairs); i += 2 {
		l.IDs = append(l.IDs, int64(pairs[i]))
		l.Scores = append(l.Scores, pairs[i+1])
	}
	return l
}

func ids(rs []Result) []int64 {
	out := []int64{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func TestFuse(t *testing.T) {
	bm25 := leg(1, 9.0, 2, 5.0, 3, 1.0)
	dense := leg(3, 0.9, 4, 0.8, 1, 0.1)
	for _, tc := range []struct {
		name string
		legs [2]Leg
		p    Params
		n    int
		want []int64
	}{
		// 1: 1/61 + 1/63; 3: 1/63 + 1/61: equal, so by id; 2: 1/62; 4: 1/62.
		{"rrf, equal weights", [2]Leg{bm25, dense}, Params{Method: RRF, K: 60, Alpha: 0.5}, 10, []int64{1, 3, 2, 4}},
		{"rrf cut at n", [2]Leg{bm25, dense}, Params{Method: RRF, K: 60, Alpha: 0.5}, 2, []int64{1, 3}},
		// The dense leg alone decides at alpha 1.
		{"rrf, alpha 1", [2]Leg{bm25, dense}, Params{Method: RRF, K: 60, Alpha: 1}, 3, []int64{3, 4, 1}},
		// bm25 norms: 1→1, 2→0.5, 3→0; dense norms: 3→1, 4→0.875, 1→0.
		// At 0.5: 1 = 0.5, 3 = 0.5, 4 = 0.4375, 2 = 0.25.
		{"convex", [2]Leg{bm25, dense}, Params{Method: Convex, Alpha: 0.5}, 10, []int64{1, 3, 4, 2}},
		{"convex, bm25 weighted", [2]Leg{bm25, dense}, Params{Method: Convex, Alpha: 0.2}, 10, []int64{1, 2, 3, 4}},
		{"one empty leg", [2]Leg{bm25, {}}, Params{Method: RRF, K: 60, Alpha: 0.5}, 10, []int64{1, 2, 3}},
		{"both empty", [2]Leg{}, Params{Method: Convex, Alpha: 0.5}, 10, []int64{}},
		{"n = 0", [2]Leg{bm25, dense}, Params{Method: RRF, K: 60, Alpha: 0.5}, 0, []int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.p.Validate(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ids(Fuse(tc.legs, tc.p, tc.n))); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestFuseScoresAndRanks(t *testing.T) {
	got := Fuse([2]Leg{leg(7, 3.0, 8, 1.0), leg(8, 0.5)}, Params{Method: RRF, K: 60, Alpha: 0.5}, 10)
	k, w := 60.0, 0.5 // float64 arithmetic, as Fuse's, not exact constants
	want := []Result{
		{ID: 8, Score: w/(k+2) + w/(k+1), Rank: [2]int{2, 1}, Leg: [2]float64{1, 0.5}},
		{ID: 7, Score: 0.5 / 61, Rank: [2]int{1, 0}, Leg: [2]float64{3, 0}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

// A leg whose candidates all score the same gives each the full weight.
func TestConvexEqualScores(t *testing.T) {
	got := Fuse([2]Leg{leg(5, 2.0, 6, 2.0), {}}, Params{Method: Convex, Alpha: 0.25}, 10)
	for _, r := range got {
		if r.Score != 0.75 {
			t.Errorf("id %d: %v, want 0.75", r.ID, r.Score)
		}
	}
}

// An id listed twice in a leg counts once, at its better place.
func TestDuplicateInLeg(t *testing.T) {
	got := Fuse([2]Leg{leg(1, 5.0, 1, 4.0), {}}, Params{Method: RRF, K: 60, Alpha: 0.5}, 10)
	if len(got) != 1 || got[0].Score != 0.5/61 || got[0].Rank[0] != 1 {
		t.Errorf("%+v", got)
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Params{
		{Method: "sum", Alpha: 0.5},
		{Method: RRF, K: 0, Alpha: 0.5},
		{Method: RRF, K: math.Inf(1), Alpha: 0.5},
		{Method: Convex, Alpha: 1.5},
		{Method: Convex, Alpha: math.NaN()},
	} {
		if p.Validate() == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}
