package extract

import (
	"archive/zip"
	"bytes"
	"fmt"
)

// DOCX extracts an Office Open XML word-processing document. (Stub: the
// extractor is being written.)
func DOCX(name string, data []byte, lim Limits) (*Doc, error) {
	return nil, fmt.Errorf("%w: DOCX not implemented yet", ErrUnsupported)
}

// isDOCX reports whether data is a zip holding word/document.xml.
func isDOCX(data []byte) bool {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return false
	}
	for _, f := range zr.File {
		if f.Name == "word/document.xml" {
			return true
		}
	}
	return false
}
