package fts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
)

// An image is the in-memory index (dictionary, document frequencies,
// every block's field lengths, level and state, the segment list) saved
// in a file beside the database (the index package names it), so that
// LoadFrom reads one file instead of scanning every row of the tables it
// was made from. At 1M passages that scan is 2.4M rows through
// database/sql, 1.4 s.
//
// An image is valid only for the rows it was made from: its header holds
// the fingerprint (fingerprintSQL) of every row Load reads, and LoadFrom
// uses the image only when the tables give the same fingerprint again.
// Any write since, by any process or version, changes the fingerprint and
// the tables are read, as they were before images existed. Like sqlite's
// stat tables, an image is derived: deleting the file costs the next open
// its speed, nothing else. It is a file, not rows of the database, so
// that saving one adds nothing to DuckDB's write-ahead log, which a Close
// after a small write leaves for the next open to replay (index/state.go,
// closeCheckpointBytes): 11 MB at 100k passages, 16 MB at 1M, replayed by
// every open.
//
// Layout: the header,
//
//	imageMagic
//	uvarint length, fingerprint
//	uvarint payload length
//	SHA-256 of the payload (32 bytes)
//
// then the payload:
//
//	uvarint nextTerm, nextSeg
//	for each term id below nextTerm: uvarint length (0: no term), bytes
//	for each term id below nextTerm: varint df, df_body, df_context
//	uvarint n: the block ids below n follow
//	for each: state byte; unless absent, uvarint len_body, len_context,
//	          and the level byte
//	uvarint segments; for each: varint id, blocks, min_block,
//	          max_block, bytes

const imageMagic = "escurel fts image 2\n"

// fingerprintSQL fingerprints every row Load reads: per table, its row
// count and the sum (a HUGEINT: no overflow) of DuckDB's 64-bit hash of
// each row's columns. A sum does not depend on the rows' order, and any
// changed, added or removed row changes it but for a hash collision.
// Postings are fingerprinted without their posting lists, which Load does
// not read. DuckDB's hash is not promised stable across its versions: a
// change makes every image stale, never a wrong one valid.
const fingerprintSQL = `SELECT concat_ws(';',
	(SELECT count(*) || ':' || coalesce(sum(hash(term_id, term)), 0) FROM fts_terms),
	(SELECT count(*) || ':' || coalesce(sum(hash(term_id, segment_id, df, df_body, df_context)), 0) FROM fts_postings),
	(SELECT count(*) || ':' || coalesce(sum(hash(term_id, df, df_body, df_context)), 0) FROM fts_df_deltas),
	(SELECT count(*) || ':' || coalesce(sum(hash(block_id, len_body, len_context, level)), 0) FROM fts_blocks),
	(SELECT count(*) || ':' || coalesce(sum(hash(block_id)), 0) FROM fts_tombstones),
	(SELECT count(*) || ':' || coalesce(sum(hash(data)), 0) FROM fts_removals),
	(SELECT count(*) || ':' || coalesce(sum(hash(segment_id, blocks, min_block, max_block, bytes)), 0) FROM fts_segments))`

// errStale: the image is not of the tables as they are.
var errStale = errors.New("fts image stale")

// errImage is wrapped by the errors of an image that cannot be used: a
// file that cannot be read, a damaged header or payload, or one that does
// not describe a consistent index. LoadFrom then reads the tables.
var errImage = errors.New("fts image damaged")

// loadImage returns the index the image in the file path holds, nil when
// there is none, errStale when it is stale (its fingerprint is not the
// tables'). An error wrapping errImage: the file cannot be read, or the
// image is current but cannot be decoded; any other error is the
// database's.
func loadImage(ctx context.Context, q Querier, path string) (*Index, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errImage, err)
	}
	fp, size, sum, payload, err := decodeImageHeader(data)
	if err != nil {
		return nil, err
	}
	// DuckDB computes the fingerprint while Go checks and decodes the
	// payload (at 1M passages 60-100 ms and 170 ms, on a machine with
	// more than one core); a stale image's decoding is thrown away.
	type fingerprint struct {
		now string
		err error
	}
	fpc := make(chan fingerprint, 1)
	go func() {
		var f fingerprint
		f.err = q.QueryRowContext(ctx, fingerprintSQL).Scan(&f.now)
		fpc <- f
	}()
	var ix *Index
	if uint64(len(payload)) != size || sha256.Sum256(payload) != sum {
		err = fmt.Errorf("%w: its payload (%d bytes, %d in its header) does not match the SHA-256 of its header", errImage, len(payload), size)
	} else if ix, err = decodeImage(payload); err != nil {
		err = fmt.Errorf("%w: %v", errImage, err)
	}
	f := <-fpc
	switch {
	case f.err != nil:
		return nil, f.err
	case f.now != fp:
		return nil, errStale
	case err != nil:
		return nil, err
	}
	ix.fromImage = true
	ix.imageCurrent.Store(true)
	return ix, nil
}

// decodeImageHeader splits an image file into its header's fields and
// the payload after it.
func decodeImageHeader(h []byte) (fp string, size uint64, sum [32]byte, payload []byte, err error) {
	d := &decoderBuf{b: h}
	if !bytes.HasPrefix(h, []byte(imageMagic)) {
		return "", 0, sum, nil, fmt.Errorf("%w: its header does not begin with %q", errImage, imageMagic)
	}
	d.b = d.b[len(imageMagic):]
	fp = string(d.bytes())
	size = d.uvarint()
	copy(sum[:], d.take(32))
	if d.err != nil {
		return "", 0, sum, nil, fmt.Errorf("%w: its header is truncated", errImage)
	}
	return fp, size, sum, d.b, nil
}

// SaveImage writes the index as it is in memory to the file path, as an
// image (a temporary file beside it, then renamed over it; not synced:
// a torn image fails its SHA-256 and the tables are read). q must be one
// snapshot (a transaction) that sees every write this Index applied, and
// no commit may run until SaveImage returns (the caller holds the
// writer's lock). It saves nothing, and returns false, when the in-memory
// index may not be what its tables hold: a commit of it failed (the
// transaction may have committed all the same), or the terms' count, or
// the blocks' count and field-length sums per level, differ from it.
// Errors are the database's or the file system's.
func (ix *Index) SaveImage(ctx context.Context, q Querier, path string) (bool, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.uncertain {
		return false, nil
	}
	// The rows against memory: the terms, and the blocks' count and
	// field-length sums per level (the statistics each clearance scores
	// with), what a wrong image would show first.
	var terms int64
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM fts_terms`).Scan(&terms); err != nil {
		return false, err
	}
	type levelSums struct{ blocks, body, context int64 }
	rowsAt := map[uint8]levelSums{}
	err := scan(ctx, q, `SELECT level, count(*), coalesce(sum(len_body), 0)::BIGINT, coalesce(sum(len_context), 0)::BIGINT
		FROM fts_blocks GROUP BY level`, func(r *sql.Rows) error {
		var l uint8
		var s levelSums
		if err := r.Scan(&l, &s.blocks, &s.body, &s.context); err != nil {
			return err
		}
		rowsAt[l] = s
		return nil
	})
	if err != nil {
		return false, err
	}
	heldAt := map[uint8]levelSums{}
	for _, b := range ix.blocks {
		if b.state != absent {
			s := heldAt[b.level]
			s.blocks++
			s.body += int64(b.len[Body])
			s.context += int64(b.len[Context])
			heldAt[b.level] = s
		}
	}
	if terms != int64(ix.ids.n) || len(ix.df) != int(ix.nextTerm) || !maps.Equal(rowsAt, heldAt) {
		return false, nil
	}
	var fp string
	if err := q.QueryRowContext(ctx, fingerprintSQL).Scan(&fp); err != nil {
		return false, err
	}
	payload := ix.encodeImage()
	sha := sha256.Sum256(payload)
	header := append([]byte(imageMagic), binary.AppendUvarint(nil, uint64(len(fp)))...)
	header = append(header, fp...)
	header = binary.AppendUvarint(header, uint64(len(payload)))
	header = append(header, sha[:]...)
	tmp := path + ".tmp"
	err = func() error {
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = f.Write(header)
		if err == nil {
			_, err = f.Write(payload)
		}
		return errors.Join(err, f.Close())
	}()
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("save fts image: %w", err)
	}
	ix.imageCurrent.Store(true)
	return true, nil
}

// encodeImage encodes the in-memory index (see the layout above). Call
// under ix.mu.
func (ix *Index) encodeImage() []byte {
	n := len(ix.blocks)
	for n > 0 && ix.blocks[n-1].state == absent {
		n--
	}
	out := make([]byte, 0, len(ix.ids.arena)+int(ix.nextTerm)*5+n*5+64)
	out = binary.AppendUvarint(out, uint64(ix.nextTerm))
	out = binary.AppendUvarint(out, uint64(ix.nextSeg))
	for id := range ix.nextTerm {
		if !ix.ids.has(id) {
			out = append(out, 0)
			continue
		}
		t := ix.ids.termBytes(id)
		out = binary.AppendUvarint(out, uint64(len(t)))
		out = append(out, t...)
	}
	for _, d := range ix.df[:ix.nextTerm] {
		for _, v := range d {
			out = binary.AppendVarint(out, int64(v))
		}
	}
	out = binary.AppendUvarint(out, uint64(n))
	for _, b := range ix.blocks[:n] {
		out = append(out, b.state)
		if b.state != absent {
			out = binary.AppendUvarint(out, uint64(b.len[Body]))
			out = binary.AppendUvarint(out, uint64(b.len[Context]))
			out = append(out, b.level)
		}
	}
	out = binary.AppendUvarint(out, uint64(len(ix.segments)))
	for _, s := range ix.segments {
		for _, v := range []int64{int64(s.id), int64(s.blocks), s.min, s.max, s.bytes} {
			out = binary.AppendVarint(out, v)
		}
	}
	return out
}

// decodeImage builds an Index from an image's payload, checking the
// lengths, states and ranges Load checks of the rows. It does not look
// for a term given twice (Load does): the payload's SHA-256 matched, so it
// is what SaveImage encoded from a dictionary.
func decodeImage(p []byte) (*Index, error) {
	d := &decoderBuf{b: p}
	ix := &Index{ids: newDict(), cache: newCache(DefaultCacheBytes)}
	nextTerm, nextSeg := d.uvarint(), d.uvarint()
	// A term id takes at least 4 bytes: its length and three frequencies.
	if d.err != nil || nextTerm > uint64(len(p))/4 || nextTerm > math32Max || nextSeg > math32Max {
		return nil, fmt.Errorf("next term id %d or segment id %d out of range", nextTerm, nextSeg)
	}
	ix.nextTerm, ix.nextSeg = int32(nextTerm), int32(nextSeg)
	// The terms' lengths first, to size the dictionary as Load does.
	start := *d
	terms, termBytes := 0, 0
	for range nextTerm {
		if n := d.uvarint(); n > 0 {
			if n > maxTermLen || n > uint64(len(d.b)) {
				return nil, fmt.Errorf("a term of %d bytes (at most %d, %d left)", n, maxTermLen, len(d.b))
			}
			terms++
			termBytes += int(n)
			d.take(int(n))
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	*d = start
	ix.ids.reserve(terms, termBytes, ix.nextTerm-1)
	for id := range ix.nextTerm {
		t := d.bytes()
		if len(t) == 0 {
			continue
		}
		if len(t) > maxTermLen {
			return nil, fmt.Errorf("term id %d: %d bytes (want 1 to %d)", id, len(t), maxTermLen)
		}
		ix.ids.putTrusted(t, id)
	}
	if d.err != nil {
		return nil, d.err
	}
	ix.df = make([]df, ix.nextTerm, withRoom(int(ix.nextTerm)))
	for id := range ix.df {
		for i := range ix.df[id] {
			v := d.varint()
			if v < math32Min || v > math32Max {
				return nil, fmt.Errorf("term id %d: document frequency %d out of range", id, v)
			}
			ix.df[id][i] = int32(v)
		}
	}
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		return nil, fmt.Errorf("%d blocks in %d bytes", n, len(d.b))
	}
	ix.blocks = make([]blockInfo, max(n, 1), withRoom(int(max(n, 1))))
	for id := range n {
		b := blockInfo{state: d.byte()}
		switch b.state {
		case absent:
			continue
		case live, dead:
		default:
			return nil, fmt.Errorf("block %d: state %d", id, b.state)
		}
		lb, lc := d.uvarint(), d.uvarint()
		if lb > math32Max || lc > math32Max {
			return nil, fmt.Errorf("block %d: field lengths %d, %d out of range", id, lb, lc)
		}
		b.len = [NumFields]uint32{uint32(lb), uint32(lc)}
		b.level = d.byte()
		ix.blocks[id] = b
		if b.state == live {
			ix.count(b, 1)
		} else {
			ix.tombstones++
		}
	}
	segs := d.uvarint()
	if d.err != nil || segs > uint64(len(d.b)) {
		return nil, fmt.Errorf("%d segments in %d bytes", segs, len(d.b))
	}
	for range segs {
		var v [5]int64
		for i := range v {
			v[i] = d.varint()
		}
		if v[0] < 0 || v[0] >= int64(ix.nextSeg) || v[1] < 0 || v[1] > math32Max {
			return nil, fmt.Errorf("segment %d of %d blocks out of range", v[0], v[1])
		}
		ix.segments = append(ix.segments, segment{id: int32(v[0]), blocks: int32(v[1]), min: v[2], max: v[3], bytes: v[4]})
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%d bytes past its end", len(d.b))
	}
	return ix, nil
}

const (
	math32Min = -1 << 31
	math32Max = 1<<31 - 1
)

// decoderBuf reads an image: the first error sticks, and every read
// after it returns zero values.
type decoderBuf struct {
	b   []byte
	err error
}

func (d *decoderBuf) fail() {
	if d.err == nil {
		d.err = errors.New("truncated")
	}
	d.b = nil
}

func (d *decoderBuf) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoderBuf) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoderBuf) byte() uint8 {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoderBuf) take(n int) []byte {
	if n < 0 || n > len(d.b) {
		d.fail()
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// bytes reads a uvarint length and that many bytes.
func (d *decoderBuf) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	return d.take(int(n))
}

// FromImage reports whether LoadFrom read this index from its image file
// (false: from the tables, the image missing, stale or damaged). It does
// not change after the load.
func (ix *Index) FromImage() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.fromImage
}

// ImageCurrent reports whether the image file this index was loaded
// from (LoadFrom) or last saved to (SaveImage) describes it: no commit
// has run since (CommitWith clears it, whatever the commit changed).
func (ix *Index) ImageCurrent() bool {
	return ix.imageCurrent.Load()
}
