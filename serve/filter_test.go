package serve_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/escurel/escurel/serve"
)

// TestSearchFilter: the filter field of POST /v1/search keeps hits to the
// matching documents within the token's clearance, and a malformed one is
// a 422 naming the column.
func TestSearchFilter(t *testing.T) {
	f := newFixture(t, serve.Options{})
	var out serve.SearchOutput
	f.get(t, "POST", "/v1/search", internalToken, map[string]any{"query": "lentil", "mode": "bm25", "filter": `folder = "/docs/" and title ^= "Kitchen"`}, &out)
	if len(out.Hits) != 1 || out.Hits[0].Source != "/docs/budget.md" {
		t.Errorf("filtered: %+v", out.Hits)
	}
	// The restricted memo matches the filter; a public caller never sees it.
	f.get(t, "POST", "/v1/search", "", map[string]any{"query": "lentil " + secret, "mode": "hybrid", "filter": `source ^= "/docs/` + secret + `"`}, &out)
	if len(out.Hits) != 0 {
		t.Errorf("a filter revealed a restricted block: %+v", out.Hits)
	}
	code, body := f.do(t, "POST", "/v1/search", "", map[string]any{"query": "lentil", "filter": `title ~ "x"`})
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), "column 7") || !strings.Contains(string(body), "unknown operator") {
		t.Errorf("bad filter: %d %s", code, body)
	}
}
