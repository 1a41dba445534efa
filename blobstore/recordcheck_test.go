package blobstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestEncodeRecordAcceptsWhatReadsBack: a record is stored (encodeRecordAs
// succeeds) exactly when its bytes read back as a record of its document
// (decodeRecordOf), in both layouts, for good records and for each way a
// record can be bad; and what is stored reads back equal.
func TestEncodeRecordAcceptsWhatReadsBack(t *testing.T) {
	src := "/docs/a.md"
	good := func() *Record {
		return &Record{DocID: DocID(src), Source: src, MediaType: "text/markdown", Title: "A <b> & \"c\"", Sensitivity: "internal",
			BlobID: BlobID([]byte("x")), Language: "en", IngestedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), Bytes: 1, SourceMTime: 7}
	}
	bad := string([]byte{0xff, 0xfe})
	cases := map[string]func(r *Record){
		"good":                     func(r *Record) {},
		"title given":              func(r *Record) { r.TitleGiven = true },
		"meta":                     func(r *Record) { r.Meta = `{"a":1,"b":["x"]}` },
		"meta null":                func(r *Record) { r.Meta = "null" },
		"meta empty object":        func(r *Record) { r.Meta = "{}" },
		"failed, no blob":          func(r *Record) { r.BlobID, r.Error = "", "over the size cap" },
		"title not UTF-8":          func(r *Record) { r.Title = "t" + bad }, // stored with U+FFFD, as before
		"zoned time":               func(r *Record) { r.IngestedAt = r.IngestedAt.In(time.FixedZone("x", 3600+30)) },
		"source not UTF-8":         func(r *Record) { r.Source = src + bad; r.DocID = DocID(r.Source) },
		"empty source":             func(r *Record) { r.Source = ""; r.DocID = DocID("") },
		"source of another doc":    func(r *Record) { r.Source = "/docs/b.md" },
		"doc id upper case":        func(r *Record) { r.DocID = strings.ToUpper(r.DocID) },
		"doc id short":             func(r *Record) { r.DocID = r.DocID[:31] },
		"sensitivity unknown":      func(r *Record) { r.Sensitivity = "secret" },
		"sensitivity empty":        func(r *Record) { r.Sensitivity = "" },
		"sensitivity not UTF-8":    func(r *Record) { r.Sensitivity = "public" + bad },
		"blob id bad":              func(r *Record) { r.BlobID = "sha256:xyz" },
		"no blob, no error":        func(r *Record) { r.BlobID = "" },
		"meta an array":            func(r *Record) { r.Meta = "[1]" },
		"meta not JSON":            func(r *Record) { r.Meta = "{" },
		"meta a string":            func(r *Record) { r.Meta = `"a"` },
		"time past year 9999":      func(r *Record) { r.IngestedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"error not UTF-8, no blob": func(r *Record) { r.BlobID, r.Error = "", bad },
	}
	refused := 0
	for name, change := range cases {
		for _, packed := range []bool{false, true} {
			r := good()
			change(r)
			// What the stored bytes would be, had nothing been checked.
			var raw []byte
			var merr error
			if packed {
				raw, merr = json.Marshal(r)
			} else {
				raw, merr = json.MarshalIndent(r, "", "  ")
			}
			readsBack := merr == nil
			var back *Record
			if readsBack {
				var err error
				back, err = decodeRecordOf(r.DocID, raw)
				readsBack = err == nil
			}
			_, data, err := encodeRecordAs(r, packed)
			if (err == nil) != readsBack {
				t.Errorf("%s (packed %v): encodeRecordAs error %v, but reads back: %v", name, packed, err, readsBack)
				continue
			}
			if err != nil {
				refused++
				if !strings.Contains(err.Error(), "put record") {
					t.Errorf("%s: error %q does not say what failed", name, err)
				}
				continue
			}
			if string(data) != string(raw)+"\n" {
				t.Errorf("%s (packed %v): stored %q, want %q", name, packed, data, raw)
			}
			got, err := decodeRecordOf(r.DocID, data)
			if err != nil || *got != *back {
				t.Errorf("%s (packed %v): reads back %+v, %v; want %+v", name, packed, got, err, back)
			}
		}
	}
	if refused == 0 {
		t.Fatal("no case was refused: the test checks nothing")
	}
}

// BenchmarkStageRecords1000: staging a batch's 1,000 records in the pack
// layout (encoded and checked; no I/O).
func BenchmarkStageRecords1000(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, "file://"+b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := make([]*Record, 1000)
	for i := range recs {
		src := fmt.Sprintf("bench://p%d", i)
		recs[i] = &Record{DocID: DocID(src), Source: src, MediaType: "text/plain", Title: "A title of a passage", TitleGiven: true,
			Sensitivity: "public", BlobID: BlobID([]byte(src)), Language: "en", IngestedAt: time.Now().UTC(), Bytes: 900}
	}
	b.ResetTimer()
	for range b.N {
		bt := s.NewBatch()
		for _, r := range recs {
			if err := bt.StageRecord(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		bt.Abort()
	}
}
