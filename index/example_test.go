package index_test

import (
	"context"
	"fmt"
	"log"
	"os"

	_ "gocloud.dev/blob/fileblob" // registers file:// for the blob store

	"github.com/escurel/escurel/index"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "escurel-example")
	defer os.RemoveAll(dir)

	ix, err := index.Open(ctx, dir, nil) // blobs in dir/blobs
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()

	doc := "---\ntitle: Deployment Guide\n---\n\n# Docker\n\nBuild the image with the provided Dockerfile.\n"
	if _, err := ix.Ingest(ctx, index.Input{Source: "/docs/deploy.md", Data: []byte(doc)}); err != nil {
		log.Fatal(err)
	}
	hits, err := ix.Search(ctx, "deployment image", &index.SearchOptions{K: 3})
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range hits {
		fmt.Printf("%s:%d-%d %s\n%s\n", h.Source, h.ByteStart, h.ByteEnd, h.Context, h.Body)
	}
	// Output:
	// /docs/deploy.md:43-88 [Deployment Guide › Docker]
	// Build the image with the provided Dockerfile.
}
