package client_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/escurel/escurel/client"
)

// Search a running escurel serve (the README's example; compiled, not
// run: it needs a server).
func ExampleClient_Search() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:7700", &client.Options{Token: os.Getenv("ESCUREL_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Search(ctx, &client.SearchRequest{Query: "path parameters with types", K: 3})
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range res.Hits {
		fmt.Println(h.BlockID, h.Source, h.ByteStart, h.ByteEnd, h.Body)
	}
}
