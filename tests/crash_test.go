package tests

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
)

// TestMain lets this test binary double as the child process that crash
// tests kill.
func TestMain(m *testing.M) {
	if dir := os.Getenv("ESCUREL_CRASH_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	if dir := os.Getenv("ESCUREL_REBUILD_CHILD"); dir != "" {
		rebuildChild(dir)
		return
	}
	os.Exit(m.Run())
}

// startChild starts this test binary as a child (see TestMain) with
// env=dir, and returns it with a scanner of its standard output.
func startChild(t *testing.T, env, dir string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out)
}

// crashChild ingests batches of 64 documents into dir until it is killed,
// printing "committed N" after each batch commits.
func crashChild(dir string) {
	ctx := context.Background()
	ix, err := index.Open(ctx, dir, nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	words := strings.Fields("quokka numbat wombat echidna bilby dingo platypus wallaby possum kookaburra")
	for batch := 0; ; batch++ {
		var ins []index.Input
		for d := 0; d < 64; d++ {
			var b strings.Builder
			fmt.Fprintf(&b, "# Doc %d-%d\n\ncrashmarker", batch, d)
			for i := 0; i < 300; i++ {
				b.WriteString(" " + words[(batch*7+d*3+i)%len(words)])
			}
			b.WriteString("\n")
			ins = append(ins, index.Input{Source: fmt.Sprintf("/crash/%d/%d.md", batch, d), Data: []byte(b.String())})
		}
		if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("committed %d\n", batch+1)
	}
}

// A process killed with SIGKILL in the middle of ingest batches (and of
// the segment merges they trigger) leaves an index that opens, whose
// full-text index matches its blocks exactly, and that holds every batch
// it reported committed and no part of any other.
// In the pack layout (the default) and the loose one: a batch's pack is
// published whole or not at all.
func TestCrashDuringIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, packs := range []bool{false, true} {
		t.Run(map[bool]string{false: "loose", true: "packs"}[packs], func(t *testing.T) { testCrashDuringIngest(t, packs) })
	}
}

func testCrashDuringIngest(t *testing.T, packs bool) {
	dir := t.TempDir()
	// The store made first, in the layout asked for (the child opens
	// it without options: the layout it records).
	s, err := blobstore.OpenWith(context.Background(), fileURL(filepath.Join(dir, "blobs")), &blobstore.OpenOptions{Loose: !packs})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	committed := 0
	for round := 0; round < 4; round++ {
		cmd, sc := startChild(t, "ESCUREL_CRASH_CHILD", dir)
		target := committed + 3 + rng.IntN(4)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "error") {
				t.Fatal(line)
			}
			fmt.Sscanf(line, "committed %d", &committed)
			if committed >= target {
				break
			}
		}
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond) // land inside the next batch
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		ctx := context.Background()
		ix, err := index.Open(ctx, dir, nil)
		if err != nil {
			t.Fatalf("round %d: open after kill: %v", round, err)
		}
		st, err := ix.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		docs := int(st.Documents)
		if docs%64 != 0 || docs/64 < committed || docs/64 > committed+1 {
			t.Fatalf("round %d: %d documents after %d reported batches of 64", round, docs, committed)
		}
		committed = docs / 64
		if st.FullText.Blocks != int(st.Blocks) || st.Embeddings != st.Blocks {
			t.Fatalf("round %d: %d blocks, %d in the full-text index, %d vectors", round, st.Blocks, st.FullText.Blocks, st.Embeddings)
		}
		hits, err := ix.Search(ctx, "crashmarker", &index.SearchOptions{K: index.MaxK})
		if err != nil || len(hits) != docs {
			t.Fatalf("round %d: %d hits (%v) for %d documents", round, len(hits), err, docs)
		}
		recs, err := ix.Blobs().Records(ctx)
		if err != nil || len(recs) < docs {
			t.Fatalf("round %d: %d records (%v) for %d documents", round, len(recs), err, docs)
		}
		if ix.Blobs().Packed() != packs {
			t.Fatalf("round %d: the store's layout changed", round)
		}
		v, err := ix.Verify(ctx, &index.VerifyOptions{Deep: true})
		if err != nil || len(v.RowsWithoutRecords) > 0 || len(v.RecordsWithoutBlobs) > 0 || len(v.DamagedRecords) > 0 || len(v.DamagedBlobs) > 0 {
			t.Fatalf("round %d: verify: %+v, %v", round, v, err)
		}
		ix.Close()
		t.Logf("round %d: killed after %d batches; %d documents, %d segments", round, committed, docs, st.FullText.Segments)
	}
}
