package pdf

import (
	"flag"
	"testing"

	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/extracttest"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/extractors.golden from the current PDF extractor")

// TestExtractorGolden pins what the PDF extractor makes of the shared PDFs
// (the damaged ones included), under its ID. When its output changes it
// must get a new version (version in pdf.go), so that indexes know which
// documents a rebuild would read differently: this test fails when the
// output changes and the ID does not. Rewrite the file with
// -update-golden after bumping. The other extractors' goldens are in
// ../testdata.
func TestExtractorGolden(t *testing.T) {
	extracttest.Golden{
		Keep:   func(mediaType string) bool { return mediaType == extract.MediaPDF },
		Update: *updateGolden,
		Rerun:  "go test ./index/extract/pdf -run TestExtractorGolden -update-golden",
		Bump:   "version in pdf.go",
	}.Check(t)
}
