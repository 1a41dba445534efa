package fts

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/escurel/escurel/internal/duck"
)

// saveImage saves ix's image to the file path, read in one transaction,
// and reports whether SaveImage saved one.
func saveImage(t *testing.T, ix *Index, db *sql.DB, path string) bool {
	t.Helper()
	ctx := context.Background()
	tx, err := duck.Begin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	saved, err := ix.SaveImage(ctx, tx, path)
	if err != nil {
		t.Fatal(err)
	}
	return saved
}

// imageFile is a path for an image in a test's own directory.
func imageFile(t *testing.T) string { return filepath.Join(t.TempDir(), "fts-image") }

// savedImage is a new database holding n random blocks drawn from rng,
// its index, and the image SaveImage saved of it; it fails the test when
// none was saved.
func savedImage(t *testing.T, rng *rand.Rand, n int) (*sql.DB, *Index, string) {
	t.Helper()
	db := newDB(t)
	img := imageFile(t)
	ix, _ := Load(context.Background(), db)
	write(t, ix, db, randomCorpus(rng, 1, n), nil)
	if !saveImage(t, ix, db, img) {
		t.Fatal("SaveImage saved nothing")
	}
	return db, ix, img
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

// loadBoth loads db's index through LoadFrom the image at path and from
// its tables alone, and fails unless the two hold the same; it returns
// LoadFrom's.
func loadBoth(t *testing.T, db *sql.DB, path string) *Index {
	t.Helper()
	ctx := context.Background()
	got, err := LoadFrom(ctx, db, path)
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
	img := imageFile(t)
	ix, _ := LoadFrom(ctx, db, img)
	if ix.fromImage || ix.ImageCurrent() {
		t.Fatal("an index without an image file loaded an image")
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
		if !saveImage(t, ix, db, img) {
			t.Fatalf("round %d: SaveImage saved nothing", round)
		}
		if !ix.ImageCurrent() {
			t.Fatalf("round %d: the image just saved is not current", round)
		}
		loaded := loadBoth(t, db, img)
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
		if again := loadBoth(t, db, img); again.fromImage {
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
		img := imageFile(t)
		ix, _ := Load(ctx, db)
		rng := rand.New(rand.NewPCG(5, 6))
		bs := randomCorpus(rng, 1, 20)
		write(t, ix, db, bs, nil)
		write(t, ix, db, nil, bs[10:12])
		if !saveImage(t, ix, db, img) {
			t.Fatal("SaveImage saved nothing")
		}
		if got := loadBoth(t, db, img); !got.fromImage {
			t.Fatal("Load did not read the image just saved")
		}
		if _, err := db.Exec(change); err != nil {
			t.Fatalf("%s: %v", change, err)
		}
		if got := loadBoth(t, db, img); got.fromImage {
			t.Errorf("after %s: Load read the image", change)
		}
	}
}

// A current image that cannot be read (a bit flipped, the file cut short
// or grown, a header of another version or of nothing, a payload size of
// 2^62, a directory where the file should be) is not used: LoadFrom reads
// the tables.
func TestImageDamaged(t *testing.T) {
	ctx := context.Background()
	edit := func(f func(b []byte) []byte) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, f(b), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"flip", edit(func(b []byte) []byte { b[len(b)-len(b)/4] ^= 4; return b })},
		{"cut", edit(func(b []byte) []byte { return b[:len(b)-1] })},
		{"grown", edit(func(b []byte) []byte { return append(b, 0) })},
		{"empty", edit(func([]byte) []byte { return nil })},
		{"magic only", edit(func([]byte) []byte { return []byte(imageMagic) })},
		{"another version", edit(func(b []byte) []byte { return append([]byte("escurel fts image 1\n"), b[len(imageMagic):]...) })},
		{"something else", edit(func([]byte) []byte { return []byte("an image of something else") })},
		{"huge size", func(t *testing.T, path string) {
			// The current fingerprint and a payload size of 2^62 bytes.
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fp, _, _, payload, err := decodeImageHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			h := append([]byte(imageMagic), binary.AppendUvarint(nil, uint64(len(fp)))...)
			h = binary.AppendUvarint(append(h, fp...), 1<<62)
			h = append(h, make([]byte, 32)...)
			if err := os.WriteFile(path, append(h, payload...), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"a directory", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		db, _, img := savedImage(t, rand.New(rand.NewPCG(1, 2)), 30)
		if _, err := loadImage(ctx, db, img); err != nil {
			t.Fatalf("%s: the image before the damage: %v", c.name, err)
		}
		c.damage(t, img)
		if _, err := loadImage(ctx, db, img); !errors.Is(err, errImage) {
			t.Errorf("after %s: loadImage returned %v, want errImage", c.name, err)
		}
		if got := loadBoth(t, db, img); got.fromImage {
			t.Errorf("after %s: LoadFrom read the image", c.name)
		}
	}
}

// SaveImage saves nothing when memory may not be what the tables hold:
// after a failed commit, or when the rows' counts differ from memory's.
func TestSaveImageRefusesUncertainMemory(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	img := imageFile(t)
	ix, _ := Load(ctx, db)
	write(t, ix, db, randomCorpus(rand.New(rand.NewPCG(9, 9)), 1, 10), nil)
	if _, err := db.Exec(`DELETE FROM fts_blocks WHERE block_id = 3`); err != nil {
		t.Fatal(err)
	}
	if saveImage(t, ix, db, img) {
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
	if saveImage(t, ix, db, img) {
		t.Error("SaveImage saved an image after a failed commit")
	}
	if _, err := os.Stat(img); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an image file after two refusals: %v", err)
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

// A commit that changes nothing in the full-text index still makes the
// image no longer current (CommitWith: a commit may write rows Load
// reads), so the next writer's Close saves one again.
func TestImageNotCurrentAfterEmptyCommit(t *testing.T) {
	ctx := context.Background()
	db, _, img := savedImage(t, rand.New(rand.NewPCG(4, 4)), 10)
	loaded := loadBoth(t, db, img)
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
		t.Fatal("the image is current after a commit")
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

// loadImage's errors keep their order although the fingerprint is
// computed while the payload is decoded: a stale image is stale even
// when its payload is damaged too (no warning for what would not be read
// anyway), and the database's error comes before either.
func TestImageErrorOrder(t *testing.T) {
	ctx := context.Background()
	db, ix, img := savedImage(t, rand.New(rand.NewPCG(7, 7)), 20)
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(img, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadImage(ctx, db, img); !errors.Is(err, errImage) {
		t.Fatalf("a damaged current image: %v, want errImage", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := loadImage(cancelled, db, img); err == nil || errors.Is(err, errImage) || errors.Is(err, errStale) {
		t.Fatalf("a cancelled fingerprint: %v, want the database's error", err)
	}
	write(t, ix, db, randomCorpus(rand.New(rand.NewPCG(8, 8)), 100, 3), nil)
	if _, err := loadImage(ctx, db, img); !errors.Is(err, errStale) {
		t.Fatalf("a damaged stale image: %v, want errStale", err)
	}
}

// An index loaded from its image or from its tables has room for the
// next writes: a small add after the load copies none of the dictionary's
// arrays, the document frequencies or the blocks, and the hash slots are
// sized for the room. The copies were most of a process's first add (110
// of 310 ms at 100k passages, bench-fts -writes 1). Once an add has used
// the blocks' room, the next ones leave len(blocks), which sizes every
// search's accumulator (getAcc), as it is.
func TestLoadLeavesRoomToAdd(t *testing.T) {
	ctx := context.Background()
	for _, from := range []string{"tables", "image"} {
		t.Run(from, func(t *testing.T) {
			// Each its own database: the two write the same ids.
			db, _, img := savedImage(t, rand.New(rand.NewPCG(9, 9)), 2000)
			var ix *Index
			var err error
			if from == "tables" {
				ix, err = loadTables(ctx, db)
			} else if ix, err = LoadFrom(ctx, db, img); err == nil && !ix.fromImage {
				t.Fatal("LoadFrom did not read the image")
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := ix.ids; len(d.slots)*3 < (withRoom(d.n)+1)*4 {
				t.Errorf("%d slots for %d terms: no room for the next writes' terms", len(d.slots), d.n)
			}
			type arrays struct {
				arena *byte
				loc   *uint64
				slots *int32
				df    *df
				block *blockInfo
			}
			at := func() arrays {
				return arrays{unsafe.SliceData(ix.ids.arena), unsafe.SliceData(ix.ids.loc),
					unsafe.SliceData(ix.ids.slots), unsafe.SliceData(ix.df), unsafe.SliceData(ix.blocks)}
			}
			before, terms, blocks := at(), ix.nextTerm, len(ix.blocks)
			// A few new terms and blocks past the last, as the next ingest
			// brings.
			var add []Block
			for i := range 20 {
				add = append(add, blk(int64(blocks+i), fmt.Sprintf("new%d new%d-b w1", i, i), "w2"))
			}
			write(t, ix, db, add, nil)
			if ix.nextTerm < terms+40 {
				t.Fatalf("the add gave %d new terms, want 40", ix.nextTerm-terms)
			}
			if got := at(); got != before {
				t.Errorf("the first add after the load reallocated (before %+v, after %+v)", before, got)
			}
			for i, b := range add {
				if hits := search(t, ix, db, Query{Terms: []string{fmt.Sprintf("new%d", i)}, K: 10, Params: DefaultParams}); len(hits) != 1 || hits[0].Block != b.ID {
					t.Fatalf("new%d: hits %v, want block %d", i, ids(hits), b.ID)
				}
			}
			sized := len(ix.blocks)
			write(t, ix, db, []Block{blk(int64(blocks+20), "later", "")}, nil)
			if len(ix.blocks) != sized {
				t.Errorf("a second add moved len(blocks) from %d to %d: every search's accumulator is sized again", sized, len(ix.blocks))
			}
		})
	}
}
