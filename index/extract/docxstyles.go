package extract

// DOCX styles and numbering: which paragraphs are headings (style names,
// outline levels, basedOn chains) and the list labels numbering.xml
// defines.

import (
	"strconv"
	"strings"
)

// XML shapes of the parts of styles.xml, numbering.xml and core.xml that
// DOCX reads. Element names carry no namespace, so that transitional and
// strict documents both match.
type (
	xVal struct {
		Val *string `xml:"val,attr"`
	}
	xNumPr struct {
		Ilvl  *xVal `xml:"ilvl"`
		NumID *xVal `xml:"numId"`
	}
	xPPr struct {
		PStyle     *xVal   `xml:"pStyle"`
		NumPr      *xNumPr `xml:"numPr"`
		OutlineLvl *xVal   `xml:"outlineLvl"`
	}
	xStyle struct {
		Type    string `xml:"type,attr"`
		ID      string `xml:"styleId,attr"`
		Default string `xml:"default,attr"`
		Name    xVal   `xml:"name"`
		BasedOn xVal   `xml:"basedOn"`
		PPr     xPPr   `xml:"pPr"`
	}
	xStylesPart struct {
		Styles []xStyle `xml:"style"`
	}
	xLvl struct {
		Ilvl    string `xml:"ilvl,attr"`
		Start   xVal   `xml:"start"`
		NumFmt  xVal   `xml:"numFmt"`
		LvlText xVal   `xml:"lvlText"`
		PStyle  xVal   `xml:"pStyle"`
	}
	xAbstractNum struct {
		ID           string `xml:"abstractNumId,attr"`
		NumStyleLink xVal   `xml:"numStyleLink"`
		Lvls         []xLvl `xml:"lvl"`
	}
	xLvlOverride struct {
		Ilvl          string `xml:"ilvl,attr"`
		StartOverride *xVal  `xml:"startOverride"`
		Lvl           *xLvl  `xml:"lvl"`
	}
	xNum struct {
		ID            string         `xml:"numId,attr"`
		AbstractNumID xVal           `xml:"abstractNumId"`
		Overrides     []xLvlOverride `xml:"lvlOverride"`
	}
	xNumberingPart struct {
		Abstract []xAbstractNum `xml:"abstractNum"`
		Nums     []xNum         `xml:"num"`
	}
	xCorePart struct {
		Title string `xml:"http://purl.org/dc/elements/1.1/ title"`
	}
)

func (v *xVal) get() string {
	if v == nil || v.Val == nil {
		return ""
	}
	return *v.Val
}

// present returns v, or nil when it has no value.
func present(v *xVal) *xVal {
	if v.get() == "" {
		return nil
	}
	return v
}

// docxStyles are the paragraph and numbering styles of styles.xml, by id.
type docxStyles struct {
	byID        map[string]*xStyle
	defaultPara string // id of the default paragraph style
}

func newDocxStyles(x *xStylesPart) docxStyles {
	s := docxStyles{byID: make(map[string]*xStyle, len(x.Styles))}
	for i := range x.Styles {
		st := &x.Styles[i]
		if st.Type != "" && st.Type != "paragraph" && st.Type != "numbering" {
			continue
		}
		if _, dup := s.byID[st.ID]; dup {
			continue
		}
		s.byID[st.ID] = st
		if s.defaultPara == "" && st.Type != "numbering" && onOff(st.Default) {
			s.defaultPara = st.ID
		}
	}
	return s
}

// onOff reads a WordprocessingML boolean attribute.
func onOff(v string) bool { return v == "1" || v == "true" || v == "on" }

// paraProps are the properties of a paragraph that DOCX uses.
type paraProps struct {
	styleID string
	level   int  // heading level 1–9, or 0
	title   bool // a Title paragraph
	numID   string
	ilvl    int
	ilvlSet bool // ilvl was given, by the paragraph or a style
}

// resolve combines a paragraph's own properties with those of its style
// and the styles it is based on; the paragraph's own win, then the nearest
// style's.
func (s *docxStyles) resolve(ppr *xPPr) paraProps {
	pp := paraProps{styleID: ppr.PStyle.get(), level: -1}
	if pp.styleID == "" {
		pp.styleID = s.defaultPara
	}
	if ppr.OutlineLvl != nil {
		pp.level = outlineLevel(ppr.OutlineLvl.get())
	}
	var numID, ilvl *xVal
	if np := ppr.NumPr; np != nil {
		numID, ilvl = present(np.NumID), present(np.Ilvl)
	}
	id := pp.styleID
	for range docxMaxStyleChain {
		if id == "" {
			break
		}
		st := s.byID[id]
		if st == nil {
			// No styles.xml, or a style it lacks: the id may still say
			// "Heading2" or "Title".
			if pp.level < 0 && !pp.title {
				if l, title, ok := styleNameLevel(id); ok {
					pp.level, pp.title = l, title
				}
			}
			break
		}
		if pp.level < 0 && !pp.title {
			if l, title, ok := styleNameLevel(st.Name.get()); ok {
				pp.level, pp.title = l, title
			} else if st.PPr.OutlineLvl != nil {
				pp.level = outlineLevel(st.PPr.OutlineLvl.get())
			}
		}
		if np := st.PPr.NumPr; np != nil {
			if numID == nil {
				numID = present(np.NumID)
			}
			if ilvl == nil {
				ilvl = present(np.Ilvl)
			}
		}
		id = st.BasedOn.get()
	}
	if pp.title || pp.level < 0 {
		pp.level = 0
	}
	if id := numID.get(); id != "" && id != "0" { // numId 0: numbering removed
		pp.numID = id
		if ilvl != nil {
			pp.ilvl, pp.ilvlSet = clampLevel(ilvl.get()), true
		}
	}
	return pp
}

// styleNameLevel reads a style name (or id): "heading 1" to "heading 9" are
// levels 1 to 9 and "Title" is the title, case and spaces aside.
func styleNameLevel(name string) (level int, title, ok bool) {
	n := strings.ToLower(strings.Join(strings.Fields(name), ""))
	if n == "title" {
		return 0, true, true
	}
	if len(n) == len("heading1") && strings.HasPrefix(n, "heading") && n[7] >= '1' && n[7] <= '9' {
		return int(n[7] - '0'), false, true
	}
	return 0, false, false
}

// outlineLevel maps a w:outlineLvl value to a heading level: 0–8 are levels
// 1–9, anything else (9 is body text) 0.
func outlineLevel(v string) int {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 8 {
		return n + 1
	}
	return 0
}

// clampLevel reads a w:ilvl: 0 to 8, out-of-range values clamped.
func clampLevel(v string) int {
	n, _ := strconv.Atoi(v)
	return min(max(n, 0), 8)
}

// docxLvl is one level of a list definition.
type docxLvl struct {
	start  int
	format string // w:numFmt
	text   string // w:lvlText
	pStyle string // the paragraph style linked to the level
}

// docxNumbering renders list labels from numbering.xml and keeps the
// counters, per w:numId.
type docxNumbering struct {
	defs     map[string]*[9]docxLvl // by numId
	counters map[string]*docxCounter
}

type docxCounter struct {
	n   [9]int
	set [9]bool // the level has a value since the last restart
}

// defaultLvls is the list definition used when there is none: decimal,
// from 1, "%N.".
var defaultLvls = func() (d [9]docxLvl) {
	for k := range d {
		d[k] = docxLvl{start: 1, format: "decimal", text: "%" + strconv.Itoa(k+1) + "."}
	}
	return d
}()

func newDocxNumbering(x *xNumberingPart, styles *docxStyles) *docxNumbering {
	abstract := map[string]*xAbstractNum{}
	for i := range x.Abstract {
		if _, dup := abstract[x.Abstract[i].ID]; !dup {
			abstract[x.Abstract[i].ID] = &x.Abstract[i]
		}
	}
	absOfNum := map[string]string{}
	for _, n := range x.Nums {
		if _, dup := absOfNum[n.ID]; !dup {
			absOfNum[n.ID] = n.AbstractNumID.get()
		}
	}
	num := &docxNumbering{defs: map[string]*[9]docxLvl{}, counters: map[string]*docxCounter{}}
	for _, n := range x.Nums {
		if _, dup := num.defs[n.ID]; dup {
			continue
		}
		a := abstract[n.AbstractNumID.get()]
		if a != nil && a.NumStyleLink.get() != "" {
			// The definition lives with the numbering style's list.
			if st := styles.byID[a.NumStyleLink.get()]; st != nil && st.PPr.NumPr != nil {
				if linked := abstract[absOfNum[st.PPr.NumPr.NumID.get()]]; linked != nil {
					a = linked
				}
			}
		}
		def := defaultLvls
		if a != nil {
			for _, l := range a.Lvls {
				setLvl(&def, l.Ilvl, &l)
			}
		}
		for _, o := range n.Overrides {
			if o.Lvl != nil {
				setLvl(&def, o.Ilvl, o.Lvl)
			}
			if o.StartOverride != nil {
				if s, err := strconv.Atoi(o.StartOverride.get()); err == nil && s >= 0 {
					def[clampLevel(o.Ilvl)].start = s
				}
			}
		}
		num.defs[n.ID] = &def
	}
	return num
}

// setLvl sets level ilvl of def from l; values l leaves out stay as they
// were.
func setLvl(def *[9]docxLvl, ilvl string, l *xLvl) {
	k, err := strconv.Atoi(ilvl)
	if err != nil || k < 0 || k > 8 {
		return
	}
	d := &def[k]
	if s, err := strconv.Atoi(l.Start.get()); err == nil && s >= 0 {
		d.start = s
	}
	if f := l.NumFmt.get(); f != "" {
		d.format = f
	}
	if l.LvlText.Val != nil && len(*l.LvlText.Val) <= docxMaxLvlText {
		d.text = *l.LvlText.Val
	}
	d.pStyle = l.PStyle.get()
}

// levelOfStyle returns the level of list numID linked to paragraph style
// styleID, or 0.
func (n *docxNumbering) levelOfStyle(numID, styleID string) int {
	if def := n.defs[numID]; def != nil && styleID != "" {
		for k := range def {
			if def[k].pStyle == styleID {
				return k
			}
		}
	}
	return 0
}

// next counts a paragraph at level ilvl of list numID and returns its
// label, trimmed ("" when the level shows none).
func (n *docxNumbering) next(numID string, ilvl int) string {
	def := n.defs[numID]
	if def == nil {
		def = &defaultLvls
	}
	c := n.counters[numID]
	if c == nil {
		c = &docxCounter{}
		n.counters[numID] = c
	}
	if c.set[ilvl] {
		c.n[ilvl]++
	} else {
		c.n[ilvl], c.set[ilvl] = def[ilvl].start, true
	}
	for k := ilvl + 1; k < len(c.n); k++ {
		c.set[k] = false // deeper levels restart
	}
	for k := range ilvl {
		if !c.set[k] { // a level skipped on the way down counts as used
			c.n[k], c.set[k] = def[k].start, true
		}
	}
	if def[ilvl].format == "bullet" {
		return docxBullet
	}
	text := def[ilvl].text
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] == '%' && i+1 < len(text) && text[i+1] >= '1' && text[i+1] <= '9' {
			k := int(text[i+1] - '1')
			b.WriteString(formatListNumber(c.n[k], def[k].format))
			i++
			continue
		}
		b.WriteByte(text[i])
	}
	return strings.TrimSpace(b.String())
}

// formatListNumber writes n in a w:numFmt. Formats it does not know, and
// numbers a format cannot show, are decimal.
func formatListNumber(n int, format string) string {
	switch format {
	case "bullet":
		return docxBullet
	case "none":
		return ""
	case "decimalZero":
		if n >= 0 && n < 10 {
			return "0" + strconv.Itoa(n)
		}
	case "lowerLetter", "upperLetter":
		// Word's letters: a…z, then aa…zz, then aaa….
		if n >= 1 && n <= 26*docxMaxLetters {
			s := strings.Repeat(string(rune('a'+(n-1)%26)), (n-1)/26+1)
			if format == "upperLetter" {
				s = strings.ToUpper(s)
			}
			return s
		}
	case "lowerRoman", "upperRoman":
		if n >= 1 && n < 4000 {
			s := roman(n)
			if format == "lowerRoman" {
				s = strings.ToLower(s)
			}
			return s
		}
	}
	return strconv.Itoa(n)
}

// roman writes 1 ≤ n < 4000 in upper-case Roman numerals.
func roman(n int) string {
	values := [...]int{1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1}
	symbols := [...]string{"M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"}
	var b strings.Builder
	for i, v := range values {
		for n >= v {
			b.WriteString(symbols[i])
			n -= v
		}
	}
	return b.String()
}
