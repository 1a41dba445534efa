package extract

import "fmt"

// HTML extracts an HTML document. (Stub: the extractor is being written.)
func HTML(name string, data []byte) (*Doc, error) {
	return nil, fmt.Errorf("%w: HTML not implemented yet", ErrUnsupported)
}
