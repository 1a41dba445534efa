package extract_test

import (
	"errors"
	"flag"
	"testing"

	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/extracttest"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/extractors.golden from the current extractors")

// TestExtractorsGolden pins what each extractor of this package makes of
// the shared Word files (and any other shared document whose extractor is
// linked in: not the PDFs, whose extractor package pins its own in
// pdf/testdata), under the extractor's ID. An extractor whose output
// changes must get a new version (the Version field in extract.go), so
// that indexes know which documents a rebuild would read differently:
// this test fails when the output changes and the ID does not. Rewrite
// the file with -update-golden after bumping.
func TestExtractorsGolden(t *testing.T) {
	extracttest.Golden{
		Keep: func(mediaType string) bool {
			_, err := extract.For(mediaType)
			return !errors.Is(err, extract.ErrNotLinked) // PDF: pinned by index/extract/pdf
		},
		Update: *updateGolden,
		Rerun:  "go test ./index/extract -run TestExtractorsGolden -update-golden",
		Bump:   "the {name} extractor's Version in extract.go",
	}.Check(t)
}
