package index

import (
	"regexp"
	"strconv"
)

// How an index file is opened in DuckDB: its data source and settings.

// memoryLimit is the form Options.MemoryLimit must take (DuckDB's sizes).
var memoryLimit = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$`)

// memoryBytes is a memory limit of memoryLimit's form in bytes; 0 for
// any other string.
func memoryBytes(limit string) int64 {
	m := memoryLimit.FindStringSubmatch(limit)
	if m == nil {
		return 0
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0
	}
	unit := map[string]float64{"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	return int64(n * unit)
}

// checkpointThreshold is the write-ahead log size at which a DuckDB commit
// checkpoints (DuckDB's default is 16 MB). A checkpoint rewrites the
// changed row groups and the tables' indexes (the ART on fts_postings'
// term_id, the keys of blocks and documents), which at 100k passages
// costs about as much as the write itself; at 16 MB nearly every
// 1,000-passage batch paid one. Close checkpoints from
// closeCheckpointBytes (state.go). The next open replays the log (after a
// crash, or a Close that left it): every acknowledged commit is in it, so
// nothing acknowledged is lost, only that open takes longer.
const checkpointThreshold = "1GB"

// allocatorSettings make DuckDB's allocator hand freed memory back sooner:
// by default each thread keeps up to 128 MiB of freed memory cached (and
// 512 MiB after a bulk deallocation) before flushing it, memory that
// memory_limit does not count and the process's RSS does.
const allocatorSettings = "&allocator_flush_threshold=8MB&allocator_bulk_deallocation_flush_threshold=8MB&allocator_background_threads=true"

// storageVersion is the DuckDB storage format of the files DuckDB creates
// (a generation's first open, a rebuild's, purge's and compaction's
// rewrites); a file keeps the format it was created with. DuckDB's
// default, v0.10.2, compresses strings and blobs with FSST, Dictionary or
// not at all, chosen by an analysis that samples a random quarter of a
// row group's vectors and multiplies what it saw by four: when a small row
// group's every vector is drawn the estimate doubles and the column is
// stored uncompressed (blocks.body of 4,000 rows took 12 blocks instead of
// 5, in about one rewrite of 50), so the same rows made files of different
// sizes. From v1.3.0 strings are stored as DICT_FSST, analyzed over every
// value: the same rows give the same file, and a smaller one (posting
// lists are blobs). Every escurel build links DuckDB 1.5, which reads it.
const storageVersion = "v1.3.0"

// defaultDuckDBThreads is DuckDB's worker threads per index file when
// Options.DuckDBThreads is 0. escurel runs its own work in parallel
// (derivation workers, the full-text inversion, searches on their
// callers' goroutines), and its statements are point lookups, appends and
// key-range scans. With more than one thread DuckDB hands each statement
// to a worker that its caller then waits on: on 2 cores (load 6-13,
// 100k passages, alternating runs) one thread cut a delete's CPU from
// 14.1-16.8 ms to 8.6-9.1 (its commit from 3.8-4.6 to 1.1), an add of
// 1,000 from 670-1,478 ms to 441-472, and verify and export ran faster
// as well (28.8 and 16.7 s against 38.9 and 40.1; 11.0 and 4.7 against
// 13.4 and 7.3).
const defaultDuckDBThreads = 1

// dsn is the DuckDB data source for an index file, with DuckDB's worker
// threads. Extensions are never installed or loaded on demand: nothing
// may reach the network.
func dsn(path string, threads int) string {
	return path + "?autoinstall_known_extensions=false&autoload_known_extensions=false&checkpoint_threshold=" + checkpointThreshold +
		"&storage_compatibility_version=" + storageVersion + allocatorSettings + "&threads=" + strconv.Itoa(threads)
}

// sideDSN is dsn with the default memory_limit, for the opens that read an
// index file without an Index (inspect, rowRecords): opening replays the
// write-ahead log (up to checkpointThreshold), which without a limit may
// take DuckDB's default, 80 % of the machine's memory.
func sideDSN(path string) string {
	return dsn(path, defaultDuckDBThreads) + "&memory_limit=" + DefaultMemoryLimit
}
