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

// PDF writes a PDF of the given pages, each one text line per string
// (no text layer when a page is ""). With encrypt, the trailer names a
// standard security handler whose user password is not empty.
func PDF(pages []string, encrypt bool) []byte {
	var b bytes.Buffer
	var offs []int
	obj := func(body string) int {
		offs = append(offs, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offs), body)
		return len(offs)
	}
	b.WriteString("%PDF-1.4\n")
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	obj(fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for _, p := range pages {
		stream := ""
		if p != "" {
			stream = "BT /F1 12 Tf 72 720 Td (" + p + ") Tj ET"
		}
		obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", len(offs)+2))
		obj(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream))
	}
	trailer := fmt.Sprintf("/Size %d /Root 1 0 R", len(offs)+1)
	if encrypt {
		id := strings.Repeat("ab", 16)
		enc := obj("<< /Filter /Standard /V 1 /R 2 /Length 40 /P -4 /O <" + strings.Repeat("11", 32) + "> /U <" + strings.Repeat("22", 32) + "> >>")
		trailer = fmt.Sprintf("/Size %d /Root 1 0 R /Encrypt %d 0 R /ID [<%s> <%s>]", len(offs)+1, enc, id, id)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n", trailer, xref)
	return b.Bytes()
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
	var b bytes.Buffer
	var offs []int
	obj := func(body string) {
		offs = append(offs, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offs), body)
	}
	b.WriteString("%PDF-1.4\n")
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj("<< /Type /Pages /Kids [4 0 R] /Count 1 >>")
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>")
	obj(fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes()))
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offs)+1, xref)
	return b.Bytes()
}
