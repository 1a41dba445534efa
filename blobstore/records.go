package blobstore

// Listing the document records, and telling the damaged ones apart.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// DamagedRecord is a stored record that cannot be used: empty,
// truncated, not JSON, missing a field it needs, or naming another
// document than its key, or a source that does not hash to its doc id.
type DamagedRecord struct {
	Key   string `json:"key"`    // its bucket key: documents/<doc_id>.json
	DocID string `json:"doc_id"` // from the key
	// Source is the document's source when it could still be read from
	// the damaged bytes and hashes to DocID (so it is the document's);
	// else "" (an index's row may know it).
	Source string `json:"source,omitempty"`
	Reason string `json:"reason"` // what decoding found, e.g. "decode: unexpected end of JSON input"
}

// DamagedRecordsError is Records refusing to answer because records are
// damaged (Records lists every one, sorted by key). It wraps ErrCorrupt.
type DamagedRecordsError struct {
	Records []DamagedRecord
}

func (e *DamagedRecordsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d damaged document records:", len(e.Records))
	for _, d := range e.Records {
		src := d.Source
		if src == "" {
			src = "source unknown"
		}
		fmt.Fprintf(&b, " %s (%s): %s;", d.Key, strconv.Quote(src), d.Reason)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Unwrap returns ErrCorrupt.
func (e *DamagedRecordsError) Unwrap() error { return ErrCorrupt }

// Records returns every document record, ordered by doc id. Objects under
// documents/ that are not records (such as a crashed write's temporary file)
// are ignored. When any record is damaged it returns a
// *DamagedRecordsError listing all of them (and no records): a caller that
// can go on without them calls ScanRecords.
func (s *Store) Records(ctx context.Context) ([]*Record, error) {
	recs, damaged, err := s.ScanRecords(ctx)
	if err != nil {
		return nil, err
	}
	if len(damaged) > 0 {
		return nil, fmt.Errorf("list records: %w", &DamagedRecordsError{Records: damaged})
	}
	return recs, nil
}

// ScanRecords returns every document record that decodes, ordered by doc
// id, and every damaged one (DamagedRecord), ordered by key: one damaged
// record does not hide the others. The error is for a failure to list or
// read.
func (s *Store) ScanRecords(ctx context.Context) ([]*Record, []DamagedRecord, error) {
	sc, err := s.scanRecords(ctx, nil, false)
	if err != nil {
		return nil, nil, err
	}
	return sc.Records, sc.Damaged, nil
}

// RecordScan is a read of every record (ScanRecordsSince): what
// ScanRecords returns, and what a later scan needs to read only the
// records written since.
type RecordScan struct {
	// Records are the records that decode, ordered by doc id; Damaged,
	// those that do not, ordered by key (as ScanRecords).
	Records []*Record
	Damaged []DamagedRecord
	// packed are the packed records read, by key: their entry's length
	// and CRC-32C, and the record decoded from those bytes.
	packed packedRecords
}

// packedRecord is a packed record as a scan read it.
type packedRecord struct {
	n, crc uint32
	rec    *Record
}

// ScanRecordsSince is ScanRecords, except that a packed record whose
// entry (the length and CRC-32C of its bytes) is the one prev read is
// taken from prev, not read again: after a scan of 1M records (5.7 s on
// a local disk here), a scan that follows reads only the records written
// since, and walks the lists of entries in memory (0.2-0.7 s). A reused
// record's bytes are not read again: one damaged in its pack since prev
// (or moved by a repack that wrote it wrong) is not reported; prev is
// for a scan that follows it within seconds, not a cache. Loose records are read
// again, as is every record in the loose layout. The records returned
// may be prev's (*Record values shared, not copied: treat them as read-
// only). prev nil: a full scan.
func (s *Store) ScanRecordsSince(ctx context.Context, prev *RecordScan) (*RecordScan, error) {
	return s.scanRecords(ctx, prev, true)
}

// scanRecords is ScanRecordsSince; keep false leaves out of the result
// what a later scan would reuse (the packed records by key: 40 bytes a
// record), for a caller that keeps only the records.
func (s *Store) scanRecords(ctx context.Context, prev *RecordScan, keep bool) (*RecordScan, error) {
	var ids []string
	err := s.list(ctx, "documents/", false, func(name string, _ int64, _ time.Time) {
		if id, ok := strings.CutSuffix(name, ".json"); ok && docIDPattern.MatchString(id) {
			ids = append(ids, id)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	if s.px != nil {
		sc, err := s.scanPacked(ctx, ids, prev, keep)
		if errors.Is(err, ErrNotFound) { // a pack rewritten (Repack) meanwhile: once more
			sc, err = s.scanPacked(ctx, ids, prev, keep)
		}
		return sc, err
	}
	recs, damaged, err := s.scanLoose(ctx, ids)
	if err != nil {
		return nil, err
	}
	return &RecordScan{Records: recs, Damaged: damaged}, nil
}

// scanLoose reads the loose records of ids (documents/<doc_id>.json).
func (s *Store) scanLoose(ctx context.Context, ids []string) ([]*Record, []DamagedRecord, error) {
	// Read them several at a time: each is a small object, and its cost is
	// the round trip (a file open, an S3 GET).
	recs := make([]*Record, len(ids))
	damaged := make([]*DamagedRecord, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, id := range ids {
		g.Go(func() error {
			key, _ := RecordKey(id)
			data, err := s.read(gctx, key)
			if errors.Is(err, ErrNotFound) {
				return nil // deleted since the listing: not a record any more
			}
			if err != nil {
				return fmt.Errorf("list records: read %s: %w", key, err)
			}
			rec, err := decodeRecordOf(id, data)
			if err != nil {
				damaged[i] = &DamagedRecord{Key: key, DocID: id, Source: salvageSource(id, data), Reason: strings.TrimSuffix(err.Error(), ": "+ErrCorrupt.Error())}
				return nil
			}
			recs[i] = rec
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	var bad []DamagedRecord
	for _, d := range damaged {
		if d != nil {
			bad = append(bad, *d)
		}
	}
	return slices.DeleteFunc(recs, func(r *Record) bool { return r == nil }), bad, nil
}

// salvageSource returns the source a damaged record still names, when its
// bytes hold a complete "source" string that hashes to docID; else "".
func salvageSource(docID string, data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return ""
		}
		var src string
		if t == "source" && json.Unmarshal(v, &src) == nil && DocID(src) == docID {
			return src
		}
	}
	return ""
}
