package extract

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/escurel/escurel/internal/span"
)

// checkHTMLDoc returns an error when d breaks the promises HTML makes: valid
// UTF-8 text; units and headings that are trimmed, non-empty, ordered,
// non-overlapping spans of it at rune boundaries; heading text equal to its
// span; units and headings not overlapping (unless the units are the
// headings, for a document with nothing else); every byte of text outside
// them white space; no pages.
func checkHTMLDoc(d *Doc) error {
	text := d.Text
	if !utf8.ValidString(text) {
		return fmt.Errorf("text is not valid UTF-8")
	}
	if d.Pages != 0 {
		return fmt.Errorf("Pages = %d, want 0", d.Pages)
	}
	if len(d.Units) == 0 {
		return fmt.Errorf("no units")
	}
	checkSpan := func(what string, start, end, prevEnd int) error {
		if start < prevEnd || start >= end || end > len(text) {
			return fmt.Errorf("%s [%d,%d) out of order or out of range (previous end %d, text %d bytes)", what, start, end, prevEnd, len(text))
		}
		if s, e := span.Trim(text, start, end); s != start || e != end {
			return fmt.Errorf("%s [%d,%d) %q is not trimmed", what, start, end, text[start:end])
		}
		if !utf8.RuneStart(text[start]) || (end < len(text) && !utf8.RuneStart(text[end])) {
			return fmt.Errorf("%s [%d,%d) cuts a rune", what, start, end)
		}
		return nil
	}
	covered := make([]bool, len(text))
	prev := 0
	for i, u := range d.Units {
		if err := checkSpan(fmt.Sprintf("unit %d", i), u.Start, u.End, prev); err != nil {
			return err
		}
		if u.Page != 0 {
			return fmt.Errorf("unit %d: Page = %d, want 0", i, u.Page)
		}
		prev = u.End
		for j := u.Start; j < u.End; j++ {
			covered[j] = true
		}
	}
	// A heading over an empty section is a unit of exactly its span.
	unitSpans := map[[2]int]bool{}
	for _, u := range d.Units {
		unitSpans[[2]int{u.Start, u.End}] = true
	}
	prev = 0
	for i, h := range d.Headings {
		if err := checkSpan(fmt.Sprintf("heading %d", i), h.Start, h.End, prev); err != nil {
			return err
		}
		prev = h.End
		if h.Level < 1 || h.Level > 6 {
			return fmt.Errorf("heading %d: level %d", i, h.Level)
		}
		if got := text[h.Start:h.End]; ClipHeading(got) != h.Text {
			return fmt.Errorf("heading %d: Text %q, span holds %q", i, h.Text, got)
		}
	}
	for i, h := range d.Headings {
		headingUnit := unitSpans[[2]int{h.Start, h.End}]
		if headingUnit {
			end := len(text) // of the heading's section
			for _, n := range d.Headings[i+1:] {
				if n.Level <= h.Level {
					end = n.Start
					break
				}
			}
			heads := map[int]bool{}
			for _, n := range d.Headings {
				heads[n.Start] = true
			}
			for _, u := range d.Units {
				if u.Start >= h.End && u.Start < end && !heads[u.Start] {
					return fmt.Errorf("heading %d %q is a unit over a section with content", i, h.Text)
				}
			}
		}
		for j := h.Start; j < h.End; j++ {
			if covered[j] && !headingUnit {
				return fmt.Errorf("heading %d %q overlaps a unit", i, h.Text)
			}
			covered[j] = true
		}
	}
	for i := range len(text) {
		if !covered[i] && !span.IsSpace(text[i]) {
			return fmt.Errorf("byte %d (%q) of the text is in no unit or heading", i, text[i])
		}
	}
	return nil
}

// TestCheckHTMLDoc makes sure the invariant check that FuzzHTML relies on
// rejects broken documents.
func TestCheckHTMLDoc(t *testing.T) {
	good := func() *Doc {
		return &Doc{Text: "Head\n\nBody text\n\nMore",
			Headings: []Heading{{Level: 2, Text: "Head", Start: 0, End: 4}},
			Units:    []Unit{{Start: 6, End: 15}, {Start: 17, End: 21}}}
	}
	if err := checkHTMLDoc(good()); err != nil {
		t.Fatalf("good doc rejected: %v", err)
	}
	for name, breakIt := range map[string]func(d *Doc){
		"untrimmed":       func(d *Doc) { d.Units[0].Start-- },
		"overlap":         func(d *Doc) { d.Units[1].Start = 10 },
		"uncovered":       func(d *Doc) { d.Units = d.Units[:1] },
		"heading text":    func(d *Doc) { d.Headings[0].Text = "Heed" },
		"heading in unit": func(d *Doc) { d.Units = append([]Unit{{Start: 0, End: 4}}, d.Units...) },
		"out of range":    func(d *Doc) { d.Units[1].End = 99 },
		"empty unit":      func(d *Doc) { d.Units[1].End = d.Units[1].Start },
		"page":            func(d *Doc) { d.Units[0].Page = 1 },
		"level":           func(d *Doc) { d.Headings[0].Level = 7 },
		"cut rune":        func(d *Doc) { d.Text = "Head\n\nBody text\n\nMor\u00e9"; d.Units[1].End = 21 },
		"invalid UTF-8":   func(d *Doc) { d.Text = d.Text[:20] + "\xff" },
		"no units":        func(d *Doc) { d.Units = nil },
	} {
		d := good()
		breakIt(d)
		if err := checkHTMLDoc(d); err == nil {
			t.Errorf("%s: broken doc accepted", name)
		}
	}
}

// htmlDoc extracts src as name, failing the test on an error or a broken
// invariant.
func htmlDoc(t *testing.T, name, src string) *Doc {
	t.Helper()
	d, err := HTML(name, []byte(src))
	if err != nil {
		t.Fatalf("HTML(%s): %v", name, err)
	}
	if err := checkHTMLDoc(d); err != nil {
		t.Fatalf("HTML(%s): %v\ntext: %q", name, err, d.Text)
	}
	return d
}

const realisticPage = `<!DOCTYPE html>
<html lang="en-US">
<head>
  <meta charset="utf-8">
  <title>  Widgets &amp; Gadgets &mdash;
     A Guide </title>
  <meta name="description" content="Not text">
  <style>body { color: red } p::before { content: "styled" }</style>
  <script>var x = "<p>not text</p>";</script>
</head>
<body>
  <nav><ul><li><a href="/">Home</a></li><li><a href="/about">About</a></li></ul></nav>
  <header class="site"><h1>Site Banner</h1><p>Tagline</p></header>
  <main>
    <article>
      <header><h1>Widgets   <em>and</em>
        Gadgets</h1><p class="byline">By Ada</p></header>
      <p>Widgets are <a href="/w">small</a>,
         <em>useful</em> things; call <code>widget.New()</code> to make one.</p>
      <div hidden>Secret hidden text</div>
      <p>Visible<span aria-hidden="true"> ICON</span> text.<!-- a comment --></p>
      <p><img src="w.png" alt="A widget"></p>
      <h2>Kinds</h2>
      <ul>
        <li>Round widgets</li>
        <li>Square <strong>widgets</strong>
          <ul><li>Small squares</li></ul>
        </li>
      </ul>
      <h3 id="sizes">Sizes</h3>
      <table>
        <caption>Widget sizes</caption>
        <thead><tr><th>Name</th><th>Width</th></tr></thead>
        <tbody>
          <tr><td>Small</td><td>1 cm</td></tr>
          <tr><td>Large</td><td>10&nbsp;cm</td></tr>
        </tbody>
      </table>
      <h2>Usage</h2>
      <pre><code>func main() {
    w := widget.New()
    w.Spin()
}</code></pre>
      <p>Line one<br>Line two</p>
      <div style="display: none">Invisible</div>
      <p style="color: red; visibility:hidden">Also invisible</p>
      <blockquote><p>Quoted wisdom.</p></blockquote>
      <footer><p>Article footer note</p></footer>
    </article>
  </main>
  <footer><p>&copy; 2024 Example Corp</p></footer>
  <script>trackPageView();</script>
</body>
</html>
`

func TestHTMLRealisticPage(t *testing.T) {
	d := htmlDoc(t, "site/widgets.html", realisticPage)
	if d.Title != "Widgets & Gadgets — A Guide" {
		t.Errorf("title %q", d.Title)
	}
	if d.Language != "en-US" {
		t.Errorf("language %q", d.Language)
	}
	wantHeadings := []string{"# Widgets and Gadgets", "## Kinds", "### Sizes", "## Usage"}
	if diff := cmp.Diff(wantHeadings, headings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	wantUnits := []string{
		"By Ada",
		"Widgets are small, useful things; call widget.New() to make one.",
		"Visible text.",
		"Round widgets",
		"Square widgets",
		"Small squares",
		"Widget sizes\nName | Width\nSmall | 1 cm\nLarge | 10 cm",
		"func main() {\n    w := widget.New()\n    w.Spin()\n}",
		"Line one\nLine two",
		"Quoted wisdom.",
		"Article footer note",
	}
	if diff := cmp.Diff(wantUnits, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	// The text is the headings and units, in order, as paragraphs.
	wantText := "Widgets and Gadgets\n\nBy Ada\n\n" + wantUnits[1] + "\n\n" + wantUnits[2] +
		"\n\nKinds\n\n" + strings.Join(wantUnits[3:6], "\n\n") +
		"\n\nSizes\n\n" + wantUnits[6] +
		"\n\nUsage\n\n" + strings.Join(wantUnits[7:], "\n\n")
	if diff := cmp.Diff(wantText, d.Text); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
	for _, dropped := range []string{"Home", "Site Banner", "Tagline", "styled", "not text", "Secret", "ICON", "Invisible", "comment", "A widget", "Example Corp", "track"} {
		if strings.Contains(d.Text, dropped) {
			t.Errorf("text holds %q", dropped)
		}
	}
	// Same bytes, same Doc.
	if diff := cmp.Diff(d, htmlDoc(t, "site/widgets.html", realisticPage)); diff != "" {
		t.Errorf("second extraction differs:\n%s", diff)
	}
}

func TestHTMLExtract(t *testing.T) {
	mt, err := MediaType("page.htm")
	if err != nil || mt != MediaHTML {
		t.Fatalf("MediaType(page.htm) = %q, %v", mt, err)
	}
	d, err := Extract(context.Background(), mt, "page.htm", []byte("<p>Hello <b>world</b></p>"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := units(d); len(got) != 1 || got[0] != "Hello world" || d.Title != "page" {
		t.Errorf("units %q title %q", got, d.Title)
	}
}

func TestHTMLWhitespace(t *testing.T) {
	d := htmlDoc(t, "w.html", "<p>  Hello,\n\t  <b>big</b>   <i> wide </i>world&nbsp;&nbsp;!\r\n</p>"+
		"<p>no<span>space</span>join</p><p>&nbsp;</p><p>\u200b</p><div> \n </div>"+
		"<p>tab\there</p>")
	want := []string{"Hello, big wide world !", "nospacejoin", "tab here"}
	if diff := cmp.Diff(want, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	if d.Text != strings.Join(want, "\n\n") {
		t.Errorf("text %q", d.Text)
	}
}

func TestHTMLBreaks(t *testing.T) {
	d := htmlDoc(t, "b.html", "<h2>Head<br>ing</h2><p><br>a<br>b<br><br><br><br>c <br> d<br></p>text<br>after")
	if diff := cmp.Diff([]string{"## Head ing"}, headings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a\nb\n\nc\nd", "text\nafter"}, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
}

func TestHTMLBlocks(t *testing.T) {
	d := htmlDoc(t, "b.html", "loose <b>text</b><div>in div<section>in section</section>div tail</div>"+
		"<figure><img src=x><figcaption>Caption</figcaption></figure>"+
		"<details><summary>More</summary>Hidden until opened</details>"+
		"<address>1 Main St</address><hr>after rule<span>inline</span>"+
		"<fieldset><legend>Legend</legend>field text</fieldset><p>a <custom-el>custom</custom-el>-inline</p>")
	want := []string{"loose text", "in div", "in section", "div tail", "Caption", "More", "Hidden until opened",
		"1 Main St", "after ruleinline", "Legend", "field text", "a custom-inline"}
	if diff := cmp.Diff(want, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
}

func TestHTMLLists(t *testing.T) {
	d := htmlDoc(t, "l.html", `<ul>
 <li><p>First para</p><p>second para</p></li>
 <li>Parent
   <ol><li>Child one</li><li>Child <ul><li>Grandchild</li></ul></li></ol>
   tail text
 </li>
 <li><h3>Heading in item</h3>item body</li>
</ul>
<dl><dt>Term</dt><dd>Definition <b>text</b></dd></dl>
<blockquote><h2>Quoted heading</h2><p>Quote one</p><ul><li>quoted item</li></ul></blockquote>`)
	want := []string{"First para\nsecond para", "Parent", "Child one", "Child", "Grandchild", "tail text",
		"Heading in item\nitem body", "Term", "Definition text", "Quoted heading", "Quote one", "quoted item"}
	if diff := cmp.Diff(want, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	if len(d.Headings) != 0 {
		t.Errorf("headings inside lists and quotes are content, got %v", headings(d))
	}
}

func TestHTMLPre(t *testing.T) {
	d := htmlDoc(t, "p.html", "<p>Intro</p><pre>\n  indented\n\n    <b>more</b>\n\n</pre>"+
		"<ul><li>Run:<pre>go test\n  ./...</pre>done</li></ul>"+
		"<pre><div>line 1</div><div>line 2</div>x<br>y</pre>"+
		"<textarea>  keep\n   this </textarea><xmp><p>literal</p></xmp>")
	want := []string{"Intro", "indented\n\n    more", "Run:\ngo test\n  ./...\ndone", "line 1\nline 2\nx\ny",
		"keep\n   this", "<p>literal</p>"}
	if diff := cmp.Diff(want, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	// The first line's indentation stays in the text, outside the unit.
	if !strings.HasPrefix(d.Text, "Intro\n\n  indented\n") || !strings.Contains(d.Text, "\n\n  keep\n") {
		t.Errorf("text %q", d.Text)
	}
}

func TestHTMLTables(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		units     []string
		headings  []string
	}{
		{"empty cells", "<table><tr><td></td><th>Q1</th><th>Q2</th></tr><tr><th>Sales</th><td>1</td><td> </td></tr><tr><td> </td><td></td></tr></table>",
			[]string{"| Q1 | Q2\nSales | 1 |"}, nil},
		{"blocks in cells", "<table><tr><td><p>a</p><p>b</p></td><td>x<br>y</td><td><ul><li>i</li><li>j</li></ul></td><td><pre>p  q</pre></td></tr></table>",
			[]string{"a b | x y | i j | p q"}, nil},
		{"layout", "<table><tr><td><h2>Side</h2><p>one</p></td><td><p>two</p><table><tr><td>c</td><td>d</td></tr></table></td></tr></table>",
			[]string{"one", "two", "c | d"}, []string{"## Side"}},
		{"presentation", "<table role=presentation><tr><td>left</td><td>right</td></tr></table>",
			[]string{"left", "right"}, nil},
		{"in list item", "<ul><li>Sizes:<table><tr><td>S</td><td>1</td></tr></table>end</li></ul>",
			[]string{"Sizes:\nS | 1\nend"}, nil},
		{"in heading", "<h2>A <table><tr><td>b</td><td>c</td></tr></table></h2><p>x</p>",
			[]string{"x"}, []string{"## A b c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := htmlDoc(t, "t.html", tc.src)
			if diff := cmp.Diff(tc.units, units(d)); diff != "" {
				t.Errorf("units (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.headings, headings(d)); diff != "" {
				t.Errorf("headings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTMLMalformed(t *testing.T) {
	d := htmlDoc(t, "m.html", "<html><body><p>one<p>two</span><div>three<li>four <b>five</div>"+
		"<table><tr><td>a<td>b</table><h2>Unclosed <i>heading</h2><p>after &amp &lt;tag&gt; &#169; &bogus;")
	if diff := cmp.Diff([]string{"## Unclosed heading"}, headings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	want := []string{"one", "two", "three", "four five", "a | b", "after & <tag> © &bogus;"}
	if diff := cmp.Diff(want, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
}

func TestHTMLDropped(t *testing.T) {
	d := htmlDoc(t, "d.html", `<p>keep</p>
<script>script</script><style>style</style><noscript>noscript</noscript>
<template><p>template</p></template><svg><text>svg text</text><title>svg title</title></svg>
<iframe>iframe</iframe><object>object</object><canvas>canvas</canvas><video>video</video>
<select><option>option</option></select><button>button</button><input value="input">
<dialog>closed dialog</dialog><dialog open>open dialog</dialog>
<p hidden>hidden</p><p aria-hidden=TRUE>aria</p><p aria-hidden="false">not aria hidden</p>
<p style="DISPLAY:none !important">display</p><p style="visibility: collapse">collapse</p>
<p style="display:none; display:block">shown again</p><div hidden="until-found">findable</div>
<p>Formula <math alttext="x^2"><mi>x</mi><msup><mn>2</mn></msup></math> here, <math><mi>y</mi></math>plain</p>
<h3><button aria-expanded="false">Accordion question</button></h3>
<form><label>Email <input name=e></label><button>Go</button></form>
<p><ruby>漢<rp>(</rp><rt>kan</rt><rp>)</rp>字<rt>ji</rt></ruby></p>
<p><img src=x alt="alt text">after image</p>`)
	want := []string{"keep", "open dialog", "not aria hidden", "shown again", "findable",
		"Formula x^2 here, plain", "Email", "漢字", "after image"}
	if diff := cmp.Diff(want, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"### Accordion question"}, headings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
}

func TestHTMLChrome(t *testing.T) {
	d := htmlDoc(t, "c.html", `<nav><a>Home</a></nav><header><p>Site</p></header>
<main><section><header><h2>Sec</h2></header><p>Body</p><footer>Sec foot</footer></section>
<header>Main header</header></main>
<aside><footer>Aside foot</footer></aside><div role="region"><header>Region header</header></div>
<footer>Page foot</footer><div role="navigation">Menu</div><div role="contentinfo banner">Info</div>
<article><header role="banner">Banner role</header></article>`)
	if diff := cmp.Diff([]string{"## Sec"}, headings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	want := []string{"Body", "Sec foot", "Main header", "Aside foot", "Region header"}
	if diff := cmp.Diff(want, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}

	// A page of nothing but navigation keeps it rather than being empty.
	d = htmlDoc(t, "nav.html", "<nav><ul><li>Home</li><li>About</li></ul></nav><footer>&copy; me</footer>")
	if diff := cmp.Diff([]string{"Home", "About", "© me"}, units(d)); diff != "" {
		t.Errorf("nav-only units (-want +got):\n%s", diff)
	}
}

func TestHTMLHeadingsOnly(t *testing.T) {
	d := htmlDoc(t, "h.html", "<h1>Only</h1><h2> Heads </h2><h3></h3><h4><img src=x></h4>")
	if diff := cmp.Diff([]string{"# Only", "## Heads"}, headings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Only", "Heads"}, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	if d.Text != "Only\n\nHeads" || d.Title != "Only" {
		t.Errorf("text %q title %q", d.Text, d.Title)
	}
}

func TestHTMLTitle(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"<title> </title><h2>x</h2><h1>First <b>H1</b></h1><h1>Second</h1>", "First H1"},
		{"<p>text</p>", "page"},
		{"<svg><title>icon</title></svg><p>text</p>", "page"},
		{"<body><p>text</p><title>Late\ntitle</title>", "Late title"},
		{"<ul><li><h1>In a list</h1></li></ul>", "page"},
	} {
		d := htmlDoc(t, "dir/page.html", tc.src)
		if d.Title != tc.want {
			t.Errorf("%q: title %q, want %q", tc.src, d.Title, tc.want)
		}
		// <title> is the title, never body text; the svg title is neither.
		if strings.Contains(d.Text, "title") || strings.Contains(d.Text, "icon") {
			t.Errorf("%q: text %q", tc.src, d.Text)
		}
	}
}

func TestHTMLLanguage(t *testing.T) {
	for _, tc := range []struct{ attrs, want string }{
		{`lang="en-US"`, "en-US"},
		{`lang=" fr "`, "fr"},
		{`lang="en_GB"`, "en-GB"},
		{`lang="zh-Hant-TW"`, "zh-Hant-TW"},
		{`lang="de-CH-1901"`, "de-CH-1901"},
		{`lang="x-klingon"`, "x-klingon"},
		{`lang=""`, ""},
		{`lang="not a language"`, ""},
		{`lang="e"`, ""},
		{`lang="en-"`, ""},
		{`lang="12"`, ""},
		{`lang="en-toolongsubtag"`, ""},
		{`xml:lang="pt-BR"`, "pt-BR"},
		{`lang="it" xml:lang="pt"`, "it"},
		{``, ""},
	} {
		d := htmlDoc(t, "l.html", "<html "+tc.attrs+"><p>text</p></html>")
		if d.Language != tc.want {
			t.Errorf("<html %s>: language %q, want %q", tc.attrs, d.Language, tc.want)
		}
	}
}

// utf16LE encodes s as UTF-16LE with a byte order mark.
func utf16LEWithBOM(s string) string {
	b := []byte{0xFF, 0xFE}
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return string(b)
}

func TestHTMLCharset(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"meta charset", `<meta charset="windows-1252"><p>caf` + "\xe9 \x93quoted\x94</p>", "café “quoted”"},
		{"http-equiv", `<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1"><p>na` + "\xefve</p>", "naïve"},
		{"http-equiv quoted", `<head><title>t</title><META HTTP-EQUIV=content-type CONTENT='text/html;charset="latin1"'></head><p>` + "\xc0 la carte</p>", "À la carte"},
		{"shift_jis", `<meta charset="Shift_JIS"><p>` + "\x93\xfa\x96\x7b</p>", "日本"},
		{"utf-8 BOM beats meta", "\xef\xbb\xbf<meta charset=windows-1252><p>café</p>", "café"},
		{"utf-16 BOM", utf16LEWithBOM("<p>héllo wörld</p>"), "héllo wörld"},
		{"meta utf-16 means utf-8", `<meta charset="utf-16"><p>café</p>`, "café"},
		{"http-equiv without pragma", `<meta content="text/html; charset=windows-1252"><p>café</p>`, "café"},
		{"unknown label, UTF-8 bytes", `<meta charset="klingon-8"><p>café</p>`, "café"},
		{"meta after body content", "<p>caf\xc3\xa9</p><meta charset=windows-1252>", "café"},
		{"meta inside script", "<script>'<meta charset=windows-1252>'</script><p>caf\xc3\xa9</p>", "café"},
	} {
		d, err := HTML("c.html", []byte(tc.src))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := units(d); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: units %q, want [%q]", tc.name, got, tc.want)
		}
	}
}

func TestHTMLBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      error
		msg       string
	}{
		{"empty", "", ErrEmpty, "0 bytes"},
		{"blank", " \n\t", ErrEmpty, "no text"},
		{"markup only", "<!DOCTYPE html><html><head><title>T</title></head><body> <p> </p> </body></html>", ErrEmpty, "no visible text"},
		{"script and comment", "<script>alert(1)</script><!-- c --><style>p{}</style>", ErrEmpty, "no visible text"},
		{"all hidden", "<body hidden><p>x</p></body>", ErrEmpty, "no visible text"},
		{"NUL", "<p>a\x00b</p>", ErrBinary, "offset 4"},
		{"latin-1 undeclared", "<p>caf\xe9</p>", ErrInvalidUTF8, "offset 6"},
		{"latin-1 declared utf-8", "<meta charset=utf-8><p>caf\xe9</p>", ErrInvalidUTF8, "offset"},
		{"unknown charset", `<meta charset="klingon-8"><p>caf` + "\xe9</p>", ErrInvalidUTF8, `"klingon-8"`},
		{"replacement charset", `<meta charset="iso-2022-kr"><p>x</p>`, ErrInvalidUTF8, `"iso-2022-kr"`},
		{"NUL after decoding", "<meta charset=windows-1252><p>a\x00\xe9</p>", ErrBinary, "windows-1252"},
		{"nested too deep", strings.Repeat("<div>", 600) + "x", ErrCorrupt, "512"},
	} {
		_, err := HTML("bad.html", []byte(tc.src))
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v, want %v mentioning %q", tc.name, err, tc.want, tc.msg)
		}
	}
}

// TestHTMLGoDocs extracts the HTML documents shipped with Go: real pages
// with code, tables, lists and escaped markup.
func TestHTMLGoDocs(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(runtime.GOROOT(), "doc", "*.html"))
	if len(files) == 0 {
		t.Skip("no HTML under $GOROOT/doc")
	}
	tag := regexp.MustCompile(`</?(?:p|a|h[1-6]|pre|code|div|span|ul|ol|li|table|tr|td|th|b|i|em|br|dl|dt|dd|style|script)\b[^>]*>`)
	headingTag := regexp.MustCompile(`<h([1-6])\b`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := htmlDoc(t, f, string(src))
		base := strings.TrimSuffix(filepath.Base(f), ".html")
		if d.Title != base { // the pages have neither <title> nor <h1>
			t.Errorf("%s: title %q, want %q", base, d.Title, base)
		}
		if m := tag.FindString(d.Text); m != "" {
			t.Errorf("%s: markup %q leaked into the text", base, m)
		}
		if strings.Contains(d.Text, "&lt;") || strings.Contains(d.Text, "&mdash;") {
			t.Errorf("%s: undecoded character reference", base)
		}
		// Every heading of the source is a section heading, in order.
		var want []int
		for _, m := range headingTag.FindAllStringSubmatch(string(src), -1) {
			want = append(want, int(m[1][0]-'0'))
		}
		var got []int
		for _, h := range d.Headings {
			got = append(got, h.Level)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: heading levels (-want +got):\n%s", base, diff)
		}
		if len(d.Units) < 2*len(d.Headings) {
			t.Errorf("%s: %d units for %d headings", base, len(d.Units), len(d.Headings))
		}
	}
}

func FuzzHTML(f *testing.F) {
	for _, s := range []string{
		realisticPage,
		"<p>one<p>two<div>three<li>four <b>five</div><table><tr><td>a<td>b</table><h2>x<i>y",
		"<pre>\n  a\n\n b</pre><ul><li>x<ul><li>y</ul>z</ul>",
		"<h1>Only</h1><h2>Heads</h2>",
		"<meta charset=windows-1252><p>caf\xe9</p>",
		utf16LEWithBOM("<p>x</p>"),
		"<table><tr><td><h2>a</h2><td><table><tr><td>b</table></table>",
		"<p>a<br><br><br>b&nbsp;<math alttext=q></math></p><nav>n</nav>",
		"\xef\xbb\xbf<title>t</title><textarea> x </textarea>",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		d, err := HTML("fuzz.html", []byte(src))
		if err != nil {
			for _, known := range []error{ErrEmpty, ErrBinary, ErrInvalidUTF8, ErrCorrupt} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("unexpected error %v", err)
		}
		if err := checkHTMLDoc(d); err != nil {
			t.Fatalf("%v\ntext: %q", err, d.Text)
		}
		if d.Title == "" {
			t.Fatal("empty title")
		}
		again, err := HTML("fuzz.html", []byte(src))
		if err != nil {
			t.Fatalf("second extraction: %v", err)
		}
		if diff := cmp.Diff(d, again); diff != "" {
			t.Fatalf("not deterministic:\n%s", diff)
		}
	})
}
