package index

import (
	"context"
	"fmt"
)

// Pages without text. A PDF page whose text layer is empty (a scan:
// escurel does no OCR) yields no unit and so no block, while every page
// with text has at least one (the PDF extractor gives a page whose only
// text is headings a unit of its own). So the pages without text of a
// document are its pages on which no block lies: derived from the rows,
// with no column of their own, and equal after a rebuild.

// textlessSQL is a document's pages on which no block lies, as an SQL
// expression over documents d (0 for a failed document: no pages).
const textlessSQL = `greatest(d.pages - (SELECT count(DISTINCT b.page) FROM blocks b WHERE b.doc_id = d.doc_id AND b.page > 0), 0)`

// textlessPages is textlessSQL for a derived document of pages pages.
func textlessPages(pages int, blocks []block) int {
	seen := map[int]bool{}
	for _, b := range blocks {
		if b.Page > 0 {
			seen[b.Page] = true
		}
	}
	return max(pages-len(seen), 0)
}

// TextlessDocument is a document with pages on which no block lies: pages
// without a text layer (scanned), whose words a search cannot find.
type TextlessDocument struct {
	DocID         string `json:"doc_id"`
	Source        string `json:"source"`
	Pages         int    `json:"pages"`
	TextlessPages int    `json:"textless_pages"`
}

// TextlessDocuments lists the documents with pages without text, by
// source, at every sensitivity: like Index.Failed, it shows sources and
// counts, no text.
func (ix *Index) TextlessDocuments(ctx context.Context) ([]TextlessDocument, error) {
	s, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer s.unref()
	rows, err := s.db.QueryContext(ctx, `SELECT doc_id, source, pages, n FROM
		(SELECT d.doc_id, d.source, d.pages, `+textlessSQL+` AS n FROM documents d) WHERE n > 0 ORDER BY source`)
	if err != nil {
		return nil, fmt.Errorf("textless documents: %w", err)
	}
	defer rows.Close()
	out := []TextlessDocument{}
	for rows.Next() {
		var d TextlessDocument
		if err := rows.Scan(&d.DocID, &d.Source, &d.Pages, &d.TextlessPages); err != nil {
			return nil, fmt.Errorf("textless documents: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
