package fts

import (
	"context"
	"database/sql"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/escurel/escurel/internal/duck"
)

// saveImage saves ix's image in its own transaction and reports whether
// SaveImage saved one.
func saveImage(t *testing.T, ix *Index, db *sql.DB) bool {
	t.Helper()
	ctx := context.Background()
	tx, err := duck.Begin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	saved, err := ix.SaveImage(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return saved
}

// indexState is what an Index holds that a search or a write reads, in a
// form two Indexes can be compared by: the terms by id, the document
// frequencies of the terms, the blocks other than absent ones.
type indexState struct {
	Terms      map[int32]string
	DF         map[int32]df
	Blocks     map[int64]blockInfo
	Live       int
	LiveAt     map[int]int
	SumAt      map[int][NumFields]int64
	Tombstones int
	Segments   []segment
}

func stateOf(ix *Index) indexState {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	st := indexState{Terms: map[int32]string{}, DF: map[int32]df{}, Blocks: map[int64]blockInfo{},
		Live: ix.live, LiveAt: map[int]int{}, SumAt: map[int][NumFields]int64{}, Tombstones: ix.tombstones,
		Segments: append([]segment{}, ix.segments...)}
	ix.ids.each(func(term string, id int32) {
		st.Terms[id] = term
		st.DF[id] = ix.df[id]
	})
	for id, b := range ix.blocks {
		if b.state != absent {
			st.Blocks[int64(id)] = b
		}
	}
	for l := range numLevels {
		if ix.liveAt[l] != 0 || ix.sumAt[l] != [NumFields]int64{} {
			st.LiveAt[l], st.SumAt[l] = ix.liveAt[l], ix.sumAt[l]
		}
	}
	return st
}

// loadBoth loads db's index through Load and from its tables alone, and
// fails unless the two hold the same; it returns Load's.
func loadBoth(t *testing.T, db *sql.DB) *Index {
	t.Helper()
	ctx := context.Background()
	got, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	want, err := loadTables(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	opt := cmp.AllowUnexported(blockInfo{}, segment{})
	if diff := cmp.Diff(stateOf(want), stateOf(got), opt); diff != "" {
		t.Fatalf("Load (image %v) differs from the tables (-tables +Load):\n%s", got.fromImage, diff)
	}
	if got.nextTerm < want.nextTerm || got.nextSeg < want.nextSeg {
		t.Fatalf("Load gives next term %d, segment %d; the tables %d, %d: an id could be given twice", got.nextTerm, got.nextSeg, want.nextTerm, want.nextSeg)
	}
	return got
}

// An image saved after adds, merges, removals (tombstones and negative
// document frequencies) and a compaction (terms dropped) loads as the
// same index as its tables, and searches give the same hits and scores.
func TestImageEqualsTables(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, _ := Load(ctx, db)
	if ix.fromImage {
		t.Fatal("an empty file loaded an image")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var all []Block
	next := int64(1)
	queries := [][]string{{"w1"}, {"w2", "w3"}, {"w10", "w20", "w30"}, {"w1", "w500"}, {"w7"}}
	hits := func(ix *Index) [][]Hit {
		var out [][]Hit
		for _, q := range queries {
			for lvl := uint8(0); lvl < 3; lvl++ {
				out = append(out, search(t, ix, db, Query{Terms: q, K: 15, Params: DefaultParams, MaxLevel: lvl}))
			}
		}
		return out
	}
	for round := range 3 {
		for range 9 {
			bs := randomCorpus(rng, next, 1+rng.IntN(12))
			next += int64(len(bs))
			write(t, ix, db, bs, nil)
			all = append(all, bs...)
			if err := ix.Maintain(ctx, db, 0.99); err != nil {
				t.Fatal(err)
			}
		}
		var removed []Block
		for i := round; i < len(all); i += 4 {
			removed = append(removed, all[i])
		}
		write(t, ix, db, nil, removed)
		if round == 1 {
			// Drops the dead blocks and the terms only they held.
			if err := ix.Compact(ctx, db); err != nil {
				t.Fatal(err)
			}
		}
		if !saveImage(t, ix, db) {
			t.Fatalf("round %d: SaveImage saved nothing", round)
		}
		loaded := loadBoth(t, db)
		if !loaded.fromImage || !loaded.ImageCurrent() {
			t.Fatalf("round %d: Load did not read the image just saved", round)
		}
		if diff := cmp.Diff(hits(ix), hits(loaded)); diff != "" {
			t.Fatalf("round %d: hits from the image differ:\n%s", round, diff)
		}
		// A write through the loaded index: no longer current, and the
		// index it continues with is the one the tables hold.
		bs := randomCorpus(rng, next, 5)
		next += int64(len(bs))
		write(t, loaded, db, bs, nil)
		all = append(all, bs...)
		if loaded.ImageCurrent() {
			t.Fatalf("round %d: the image is current after a write", round)
		}
		var rows int
		db.QueryRow(`SELECT count(*) FROM fts_image`).Scan(&rows)
		if rows != 0 {
			t.Fatalf("round %d: %d image rows left by a write: the file holds an image of another state", round, rows)
		}
		if again := loadBoth(t, db); again.fromImage {
			t.Fatalf("round %d: Load read an image older than a write", round)
		}
		ix = loaded
	}
}

// A write to any table Load reads, by a path that knows nothing of
// images (another process, an older version), makes the image stale.
func TestImageStaleAfterAnyTableWrite(t *testing.T) {
	ctx := context.Background()
	for _, change := range []string{
		`UPDATE fts_blocks SET len_body = len_body + 1 WHERE block_id = 2`,
		`UPDATE fts_blocks SET level = 2 WHERE block_id = 3`,
		`UPDATE fts_terms SET term = 'zz' || term WHERE term_id = 0`,
		`UPDATE fts_postings SET df_body = df_body + 1 WHERE term_id = 1`,
		`INSERT INTO fts_df_deltas VALUES (1, -1, -1, 0)`,
		`INSERT INTO fts_tombstones VALUES (4)`,
		`INSERT INTO fts_removals SELECT data FROM fts_removals`,
		`UPDATE fts_segments SET max_block = max_block + 1`,
		`DELETE FROM fts_blocks WHERE block_id = 5`,
	} {
		db := newDB(t)
		ix, _ := Load(ctx, db)
		rng := rand.New(rand.NewPCG(5, 6))
		bs := randomCorpus(rng, 1, 20)
		write(t, ix, db, bs, nil)
		write(t, ix, db, nil, bs[10:12])
		if !saveImage(t, ix, db) {
			t.Fatal("SaveImage saved nothing")
		}
		if _, err := db.Exec(change); err != nil {
			t.Fatalf("%s: %v", change, err)
		}
		if got := loadBoth(t, db); got.fromImage {
			t.Errorf("after %s: Load read the image", change)
		}
	}
}

// A current image that cannot be read (a byte changed, a part lost, a
// header cut short) is not used: Load reads the tables.
func TestImageDamaged(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{
		"flip",
		"huge size",
		`DELETE FROM fts_image WHERE part = 1`,
		`UPDATE fts_image SET data = data || '\x00'::BLOB WHERE part = 1`,
		`UPDATE fts_image SET data = 'escurel fts image 1' WHERE part = 0`,
		`UPDATE fts_image SET data = 'an image of something else' WHERE part = 0`,
		`UPDATE fts_image SET part = 3 WHERE part = 1`,
		`INSERT INTO fts_image SELECT 2, data FROM fts_image WHERE part = 1`,
	} {
		db := newDB(t)
		ix, _ := Load(ctx, db)
		write(t, ix, db, randomCorpus(rand.New(rand.NewPCG(1, 2)), 1, 30), nil)
		if !saveImage(t, ix, db) {
			t.Fatal("SaveImage saved nothing")
		}
		if damage == "huge size" {
			// A current fingerprint and a payload size of 2^62 bytes.
			var fp string
			if err := db.QueryRow(fingerprintSQL).Scan(&fp); err != nil {
				t.Fatal(err)
			}
			h := append([]byte(imageMagic), binary.AppendUvarint(nil, uint64(len(fp)))...)
			h = binary.AppendUvarint(append(h, fp...), 1<<62)
			h = append(h, make([]byte, 32)...)
			if _, err := db.Exec(`UPDATE fts_image SET data = ? WHERE part = 0`, h); err != nil {
				t.Fatal(err)
			}
		} else if damage == "flip" {
			// One bit of the payload.
			var data []byte
			if err := db.QueryRow(`SELECT data FROM fts_image WHERE part = 1`).Scan(&data); err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 4
			if _, err := db.Exec(`UPDATE fts_image SET data = ? WHERE part = 1`, data); err != nil {
				t.Fatal(err)
			}
		} else if _, err := db.Exec(damage); err != nil {
			t.Fatalf("%s: %v", damage, err)
		}
		if _, err := loadImage(ctx, db); err == nil {
			t.Errorf("after %s: loadImage returned no error", damage)
		}
		if got := loadBoth(t, db); got.fromImage {
			t.Errorf("after %s: Load read the image", damage)
		}
	}
}

// SaveImage saves nothing when memory may not be what the tables hold:
// after a failed commit, or when the rows' counts differ from memory's.
func TestSaveImageRefusesUncertainMemory(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, _ := Load(ctx, db)
	write(t, ix, db, randomCorpus(rand.New(rand.NewPCG(9, 9)), 1, 10), nil)
	if _, err := db.Exec(`DELETE FROM fts_blocks WHERE block_id = 3`); err != nil {
		t.Fatal(err)
	}
	if saveImage(t, ix, db) {
		t.Error("SaveImage saved an image of blocks the table lost")
	}
	db = newDB(t)
	ix, _ = Load(ctx, db)
	tx, err := duck.Begin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := ix.Add(ctx, tx, randomCorpus(rand.New(rand.NewPCG(9, 9)), 1, 10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := ix.Commit(ctx, tx, ch); err == nil {
		t.Fatal("a commit of a transaction rolled back succeeded")
	}
	if saveImage(t, ix, db) {
		t.Error("SaveImage saved an image after a failed commit")
	}
	var rows int
	db.QueryRow(`SELECT count(*) FROM fts_image`).Scan(&rows)
	if rows != 0 {
		t.Errorf("%d image rows", rows)
	}
}

// The image's payload round-trips through decodeImage, empty index too.
func TestImageEncodeDecode(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, _ := Load(ctx, db)
	for _, n := range []int{0, 40} {
		if n > 0 {
			write(t, ix, db, randomCorpus(rand.New(rand.NewPCG(2, 3)), 1, n), nil)
		}
		got, err := decodeImage(ix.encodeImage())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(stateOf(ix), stateOf(got), cmp.AllowUnexported(blockInfo{}, segment{})); diff != "" {
			t.Fatalf("%d blocks: decoded image differs:\n%s", n, diff)
		}
		p := ix.encodeImage()
		// A term's length past the payload (the SHA-256 is no MAC).
		huge := binary.AppendUvarint(binary.AppendUvarint(nil, 1), 0)
		huge = append(binary.AppendUvarint(huge, 1<<62), make([]byte, 40)...)
		if _, err := decodeImage(huge); err == nil {
			t.Fatal("a term of 2^62 bytes decoded")
		}
		for cut := range len(p) {
			if _, err := decodeImage(p[:cut]); err == nil {
				t.Fatalf("%d blocks: a payload cut to %d of %d bytes decoded", n, cut, len(p))
			}
		}
	}
}

// A commit that changes nothing in the full-text index still deletes a
// current image (CommitWith): the image is then no longer current, so
// the next writer's Close saves one again.
func TestImageNotCurrentAfterEmptyCommit(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, _ := Load(ctx, db)
	write(t, ix, db, randomCorpus(rand.New(rand.NewPCG(4, 4)), 1, 10), nil)
	if !saveImage(t, ix, db) {
		t.Fatal("SaveImage saved nothing")
	}
	loaded := loadBoth(t, db)
	if !loaded.ImageCurrent() {
		t.Fatal("the image just read is not current")
	}
	tx, err := duck.Begin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if loaded.ImageCurrent() {
		t.Fatal("the image is current after a commit deleted it")
	}
}

// A negative block id in fts_blocks fails Load with an error naming it,
// where it panicked (review 16b).
func TestLoadRefusesNegativeBlockID(t *testing.T) {
	db := newDB(t)
	if _, err := db.Exec(`INSERT INTO fts_blocks VALUES (-5, 1, 0, 0), (3, 1, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), db); err == nil || !strings.Contains(err.Error(), "block id -5") {
		t.Fatalf("Load: %v, want an error naming block id -5", err)
	}
}
