package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"
)

// writesBench times rounds k, k+1 and k+2 of writes on indexes built by an
// earlier run in dir (-work), in one process (the first round pays what an
// index loads on first use): the add of the round's 1,000 passages and the
// delete of one passage, per engine, each under its own CPU profile when
// -cpuprofile is set (FILE.ENGINE.add.R and FILE.ENGINE.delete.R for
// round R: the first round's shows what a process loads on first use).
// Rounds must not repeat on one directory (round 0 is the normal run's:
// run it first, then k ≥ 1).
func writesBench(dir string, k int) error {
	all := corpusTail(*shared, *nFlag+k*batchSize, *nFlag+(k+3)*batchSize)
	for _, name := range strings.Split(*enginesF, ",") {
		e, err := openEngine(name, filepath.Join(dir, name), *memBlobs)
		if err != nil {
			return err
		}
		prof := func(suffix string) func() {
			if *cpuProfile == "" {
				return func() {}
			}
			f, err := os.Create(*cpuProfile + "." + name + "." + suffix)
			if err != nil {
				return func() {}
			}
			pprof.StartCPUProfile(f)
			return func() { pprof.StopCPUProfile(); f.Close() }
		}
		for r := k; r < k+3; r++ {
			extra := all[(r-k)*batchSize : (r-k+1)*batchSize]
			stop := prof(fmt.Sprintf("add.%d", r))
			t0 := time.Now()
			if err := e.Add(extra); err != nil {
				return fmt.Errorf("%s: add: %w", name, err)
			}
			visible := time.Since(t0)
			if err := waitMerges(e); err != nil {
				return fmt.Errorf("%s: add: %w", name, err)
			}
			add := time.Since(t0)
			stop()
			stop = prof(fmt.Sprintf("delete.%d", r))
			t0 = time.Now()
			if err := e.Delete(fmt.Sprintf("p%d", *nFlag/2+deleteSamples+r)); err != nil {
				return fmt.Errorf("%s: delete: %w", name, err)
			}
			del := time.Since(t0)
			stop()
			fmt.Printf("%s round %d: add 1,000 %.1f ms (returned after %.1f), delete one %.2f ms\n", name, r, ms(add), ms(visible), ms(del))
		}
		t0 := time.Now()
		if err := e.Close(); err != nil {
			return err
		}
		fmt.Printf("%s close %.1f ms\n", name, ms(time.Since(t0)))
	}
	return nil
}
