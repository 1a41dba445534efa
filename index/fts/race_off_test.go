//go:build !race

package fts

// raceEnabled: see race_on_test.go.
const raceEnabled = false
