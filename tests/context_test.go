package tests

import (
	"strings"
	"testing"

	"github.com/escurel/escurel/index"
)

const guide = `---
title: Zanzibar Operations Guide
---

Read this first. It explains the layout of the runbook.

# Installing

## Debian packages

Run the package manager with the repository key configured.

## From source

Build with make and copy the binary into place.
`

// A token that appears only in the title retrieves the block through its
// context, and the returned body stays clean: no context prefix.
func TestTitleTokenRetrievesBlockWithoutIt(t *testing.T) {
	e := newEnv(t, index.Options{})
	e.ingest("/docs/ops.md", guide)
	hits := e.search("zanzibar", 10)
	if len(hits) != 3 {
		t.Fatalf("query zanzibar: %d hits, want all 3 blocks (the title is in every context)", len(hits))
	}
	for _, h := range hits {
		if strings.Contains(strings.ToLower(h.Body), "zanzibar") || strings.HasPrefix(h.Body, "[") {
			t.Errorf("body carries the context: %q", h.Body)
		}
		if !strings.HasPrefix(h.Context, "[Zanzibar Operations Guide") {
			t.Errorf("context %q lacks the title", h.Context)
		}
	}
}

// The stored body is verbatim source and the stored context is the pinned
// format: [<title> › <heading path>].
func TestBodyVerbatimContextPinned(t *testing.T) {
	e := newEnv(t, index.Options{})
	e.ingest("/docs/ops.md", guide)
	hits := e.search("repository key", 1)
	if len(hits) != 1 {
		t.Fatal("no hit")
	}
	h := hits[0]
	if h.Body != "Run the package manager with the repository key configured." {
		t.Errorf("body %q", h.Body)
	}
	if h.Context != "[Zanzibar Operations Guide › Installing › Debian packages]" {
		t.Errorf("context %q", h.Context)
	}
	if got := strings.Join(h.HeadingPath, "|"); got != "Installing|Debian packages" {
		t.Errorf("heading path %q", got)
	}
	if guide[h.ByteStart:h.ByteEnd] != h.Body || h.Page != 0 || h.Source != "/docs/ops.md" || h.Title != "Zanzibar Operations Guide" {
		t.Errorf("hit %+v", h)
	}
	// Text before any heading has the title alone as context.
	first := e.search("layout runbook", 1)[0]
	if first.Context != "[Zanzibar Operations Guide]" || len(first.HeadingPath) != 0 {
		t.Errorf("first block context %q path %q", first.Context, first.HeadingPath)
	}
	if n := e.checkVerbatim(); n != 3 {
		t.Errorf("%d blocks, want 3", n)
	}
}

func TestContextualizeOffStoresEmptyContext(t *testing.T) {
	e := newEnv(t, index.Options{Contextualize: index.ContextOff})
	e.ingest("/docs/ops.md", guide)
	all := e.search("package binary layout", 10)
	if len(all) == 0 {
		t.Fatal("no hits")
	}
	for _, h := range all {
		if h.Context != "" {
			t.Errorf("context %q, want empty", h.Context)
		}
	}
	if hits := e.search("zanzibar", 10); len(hits) != 0 {
		t.Errorf("title token retrieved %d blocks with contextualize off", len(hits))
	}
	// Heading paths are structure, kept whatever the context mode.
	if h := e.search("repository key", 1)[0]; strings.Join(h.HeadingPath, "|") != "Installing|Debian packages" {
		t.Errorf("heading path %q", h.HeadingPath)
	}
}

// Two blocks with near-identical bodies under different headings: a query
// naming a heading ranks that heading's block first.
func TestHeadingContextDisambiguates(t *testing.T) {
	doc := "# Database settings\n\n## PostgreSQL\n\nSet the connection timeout to 30 seconds in the configuration file.\n\n" +
		"## MySQL\n\nSet the connection timeout to 30 seconds in the config file.\n"
	e := newEnv(t, index.Options{})
	e.ingest("/docs/db.md", doc)
	for _, tc := range []struct{ query, heading string }{
		{"mysql connection timeout", "MySQL"},
		{"postgresql connection timeout", "PostgreSQL"},
	} {
		hits := e.search(tc.query, 2)
		if len(hits) != 2 {
			t.Fatalf("%q: %d hits", tc.query, len(hits))
		}
		if last := hits[0].HeadingPath[len(hits[0].HeadingPath)-1]; last != tc.heading {
			t.Errorf("%q: first hit is under %q, want %q (scores %.4f, %.4f)", tc.query, last, tc.heading, hits[0].Score, hits[1].Score)
		}
	}
}
