package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The build children read the corpus from a file that the parent writes
// once per -n, in batches, instead of holding all of it: a corpus in the
// child's heap (about 1.1 GB at 1,000,000 passages) would raise the Go
// collector's heap goal (twice the live heap with GOGC=100) by as much
// again, which an engine that allocates pays in RSS and one that does not
// never reaches; the peak RSS over the baseline measured that, not the
// engine. A user ingesting files holds one batch at a time.
//
// Format: per passage, ID, Title and Body, each a uvarint length and the
// bytes.

// writeCorpusFile writes ps to path (through a temporary file renamed
// into place, so a file at path is whole).
func writeCorpusFile(path string, ps []Passage) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var n [binary.MaxVarintLen64]byte
	for _, p := range ps {
		for _, s := range []string{p.ID, p.Title, p.Body} {
			w.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
			w.WriteString(s)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readCorpusFile calls fn with the passages of path in order, size at a
// time (the last batch may be shorter); fn must not keep the slice.
func readCorpusFile(path string, size int, fn func([]Passage) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	field := func() (string, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return "", err
		}
		if n > 1<<30 {
			return "", fmt.Errorf("%s: field of %d bytes", path, n)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return string(b), nil
	}
	batch := make([]Passage, 0, size)
	for {
		id, err := field()
		if err == io.EOF {
			break
		}
		var title, body string
		if err == nil {
			title, err = field()
		}
		if err == nil {
			body, err = field()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if batch = append(batch, Passage{ID: id, Title: title, Body: body}); len(batch) == size {
			if err := fn(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		return fn(batch)
	}
	return nil
}

// buildArgs returns the flags a build child takes (-n, -shared, -corpus),
// writing the corpus file of *nFlag passages into dir first unless an
// earlier run with -work left it there. The corpus is written by a
// child: a child's peak RSS starts at its parent's RSS when it execs
// (Linux keeps the old mm's high-water mark, and Go's fork shares the
// parent's), so the parent stays small until the builds are done.
func buildArgs(dir string) ([]string, error) {
	cfile := filepath.Join(dir, fmt.Sprintf("corpus-%d.bin", *nFlag))
	if _, err := os.Stat(cfile); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if _, _, err := child("-child", "corpus", "-n", fmt.Sprint(*nFlag), "-shared", *shared, "-corpus", cfile); err != nil {
			return nil, err
		}
	}
	return []string{"-n", fmt.Sprint(*nFlag), "-shared", *shared, "-corpus", cfile}, nil
}
