package extract

import (
	"context"
	"fmt"
)

// pdfExtract extracts a PDF. (Stub.)
func pdfExtract(ctx context.Context, name string, data []byte, lim Limits) (*Doc, error) {
	return nil, fmt.Errorf("%w: PDF not implemented yet", ErrUnsupported)
}
