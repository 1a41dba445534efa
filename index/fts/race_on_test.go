//go:build race

package fts

// raceEnabled: the race detector's instrumentation allocates, so
// allocation counts (testing.AllocsPerRun) are not the program's.
const raceEnabled = true
