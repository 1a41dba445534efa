// Package testdocs builds documents for tests: PDFs with or without a text
// layer or a password, and DOCX zips, including a zip bomb.
package testdocs

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
)

// pdfWriter writes a PDF's numbered objects and, at the end, its cross
// reference table and trailer.
type pdfWriter struct {
	b    bytes.Buffer
	offs []int // byte offset of each object, object n at offs[n-1]
}

func newPDFWriter() *pdfWriter {
	w := &pdfWriter{}
	w.b.WriteString("%PDF-1.4\n")
	return w
}

// obj writes the next object and returns its number.
func (w *pdfWriter) obj(body string) int {
	w.offs = append(w.offs, w.b.Len())
	fmt.Fprintf(&w.b, "%d 0 obj\n%s\nendobj\n", len(w.offs), body)
	return len(w.offs)
}

// next is the number the next object will get.
func (w *pdfWriter) next() int { return len(w.offs) + 1 }

// finish writes the cross reference table and a trailer of /Size, /Root 1
// and extra entries, and returns the file.
func (w *pdfWriter) finish(extra string) []byte {
	xref := w.b.Len()
	fmt.Fprintf(&w.b, "xref\n0 %d\n0000000000 65535 f \n", len(w.offs)+1)
	for _, o := range w.offs {
		fmt.Fprintf(&w.b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&w.b, "trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n", len(w.offs)+1, extra, xref)
	return w.b.Bytes()
}

// PDF writes a PDF of the given pages, each one text line per string
// (no text layer when a page is ""). With encrypt, the trailer names a
// standard security handler whose user password is not empty.
func PDF(pages []string, encrypt bool) []byte {
	w := newPDFWriter()
	w.obj("<< /Type /Catalog /Pages 2 0 R >>")
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	w.obj(fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	w.obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for _, p := range pages {
		stream := ""
		if p != "" {
			stream = "BT /F1 12 Tf 72 720 Td (" + p + ") Tj ET"
		}
		w.obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", w.next()+1))
		w.obj(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream))
	}
	if !encrypt {
		return w.finish("")
	}
	id := strings.Repeat("ab", 16)
	enc := w.obj("<< /Filter /Standard /V 1 /R 2 /Length 40 /P -4 /O <" + strings.Repeat("11", 32) + "> /U <" + strings.Repeat("22", 32) + "> >>")
	return w.finish(fmt.Sprintf(" /Encrypt %d 0 R /ID [<%s> <%s>]", enc, id, id))
}

// ZipBomb returns a DOCX whose word/document.xml decompresses to n bytes
// (white space after an opening tag), compressed to a small fraction.
func ZipBomb(n int) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, part := range []struct{ name, body string }{
		{"[Content_Types].xml", `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`},
	} {
		w, _ := zw.Create(part.name)
		w.Write([]byte(part.body))
	}
	w, _ := zw.Create("word/document.xml")
	head := `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>`
	w.Write([]byte(head))
	chunk := bytes.Repeat([]byte(" "), 1<<16)
	for left := n - len(head); left > 0; left -= len(chunk) {
		w.Write(chunk[:min(left, len(chunk))])
	}
	zw.Close()
	return b.Bytes()
}

// FlateBombPDF returns a one-page PDF whose content stream is a
// FlateDecode stream inflating to n bytes (a line of text, then spaces):
// about n/1000 bytes on disk.
func FlateBombPDF(n int) []byte {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write([]byte("BT /F1 12 Tf 72 720 Td (Bomb text here) Tj ET\n"))
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for left := n; left > 0; left -= len(chunk) {
		zw.Write(chunk[:min(left, len(chunk))])
	}
	zw.Close()
	w := newPDFWriter()
	w.obj("<< /Type /Catalog /Pages 2 0 R >>")
	w.obj("<< /Type /Pages /Kids [4 0 R] /Count 1 >>")
	w.obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	w.obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>")
	w.obj(fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes()))
	return w.finish("")
}
