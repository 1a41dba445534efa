package index

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Prewarm racing ingests (commits, merges), a switch (Reload) and Close:
// nothing deadlocks, Close returns, and searches after the switch answer.
func TestPrewarmRacesWritesSwitchClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		body := fmt.Sprintf("# T%d\n\napples and pears w%d w%d w%d\n", i, i, i%7, i%13)
		if _, err := ix.Ingest(ctx, Input{Source: fmt.Sprintf("/d%d.md", i), Data: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 100)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := ix.Prewarm(ctx); err != nil {
				if !errors.Is(err, ErrClosed) {
					errs <- err
				}
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := ix.Search(ctx, "apples w3", nil); err != nil {
				if !errors.Is(err, ErrClosed) {
					errs <- err
				}
				return
			}
		}
	}()
	for i := 60; i < 90; i++ {
		body := fmt.Sprintf("# T%d\n\napples and pears w%d w%d\n", i, i, i%7)
		if _, err := ix.Ingest(ctx, Input{Source: fmt.Sprintf("/d%d.md", i), Data: []byte(body)}); err != nil {
			t.Fatal(err)
		}
		if i == 75 {
			reloadCopy(t, ix)
		}
	}
	done := make(chan error, 1)
	go func() { done <- ix.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return in 60 s with Prewarm running")
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
