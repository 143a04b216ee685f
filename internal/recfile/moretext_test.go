package recfile

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// aptCorpus is made-up lines of apt's term.log shape: per package a
// Selecting, a Preparing and an Unpacking line (three templates, the name
// in each) in turn, then a Setting up line per package in another order.
// Of 200 packages, a file is smallest with every parameter in more in WAL
// order, though in template order the columns are smaller than every
// parameter in more, by less than nearLoss (TestInMoreInWALOrder checks it
// still is so), and its more list is smaller than its more_text
// (TestMoreText).
func aptCorpus(packages int) *corpus {
	c := &corpus{name: "apt", tpl: Templates{
		{1, 1}: "Selecting previously unselected package <*>.",
		{2, 1}: "Preparing to unpack .../<*>-<*>_<*>_amd64.deb ...",
		{3, 1}: "Unpacking <*> (<*>) ...",
		{4, 1}: "Setting up <*> (<*>) ...",
	}}
	rng := rand.New(rand.NewPCG(11, 12))
	ts := ns("2026-11-29T00:00:00Z")
	add := func(k uint64, params ...string) {
		i := len(c.rows)
		c.rows = append(c.rows, Row{WALSeq: uint64(1 + i/256), Index: uint32(i % 256), TS: ts, TemplateID: k, TemplateVersion: 1,
			Source: "file:term.log", Params: params})
		pieces := strings.Split(c.tpl[Key{k, 1}], "<*>")
		var b strings.Builder
		for j, p := range params {
			b.WriteString(pieces[j])
			b.WriteString(p)
		}
		b.WriteString(pieces[len(pieces)-1])
		c.lines = append(c.lines, b.String())
	}
	syl := []string{"lib", "py", "thon", "gtk", "x", "cb", "font", "config", "perl", "ssl", "gnu", "tls", "core", "util", "data", "dev", "common", "bin", "3", "6", "-"}
	var setup [][2]string
	for n := range packages {
		name := ""
		for len(name) < 6+rng.IntN(12) {
			name += syl[rng.IntN(len(syl))]
		}
		ver := fmt.Sprintf("%d.%d.%d-%d+deb12u%d", rng.IntN(9), rng.IntN(40), rng.IntN(20), 1+rng.IntN(3), rng.IntN(5))
		add(1, name+":amd64")
		add(2, fmt.Sprintf("%03d", n), name, ver)
		add(3, name+":amd64", ver)
		setup = append(setup, [2]string{name + ":amd64", ver})
	}
	rng.Shuffle(len(setup), func(i, j int) { setup[i], setup[j] = setup[j], setup[i] })
	for _, s := range setup {
		add(4, s[0], s[1])
	}
	return c
}

// TestMoreText: at zstd's best level a file writes more's items as one
// more_text value a row (records v7) where that is smaller than the more
// list: lines of 64 parameters (the 33rd and later in more) take
// more_text, apt's lines (one or two short items a row, all in more) keep
// the list; either way the file is no larger than written the other way,
// and reads back exactly through Decode, DecodeRows and a LineRenderer.
// The default level always writes the list.
func TestMoreText(t *testing.T) {
	flags := &corpus{name: "flags", tpl: Templates{{1, 1}: "flags" + strings.Repeat(" <*>", 64)}}
	rng := rand.New(rand.NewPCG(13, 14))
	for i := range 400 {
		params := make([]string, 64)
		for j := range params {
			params[j] = []string{"on", "off", "auto", "", fmt.Sprint(rng.IntN(1000))}[rng.IntN(5)]
		}
		flags.rows = append(flags.rows, Row{WALSeq: 1, Index: uint32(i), TS: ns("2026-11-29T00:00:00Z") + int64(i)*1e9, TemplateID: 1, TemplateVersion: 1,
			Source: "s", Params: params})
		flags.lines = append(flags.lines, "flags "+strings.Join(params, " "))
	}
	for _, c := range []struct {
		c    *corpus
		text bool // more_text, not the list
	}{{flags, true}, {aptCorpus(200), false}} {
		t.Run(c.c.name, func(t *testing.T) {
			// Every row's kinds written out: the version says more_text
			// alone (an empty kinds value makes a file v8).
			ho := defaultOptions()
			WithHighCompression(true)(&ho)
			ho.fullKinds = true
			hi, err := encode(c.c.rows, c.c.tpl, &ho)
			if err != nil {
				t.Fatal(err)
			}
			cols := fileColumns(t, hi.Data)
			if cols[colMoreText] != c.text || cols[colMore] == c.text {
				t.Fatalf("best level: columns %v, want more_text %v", cols, c.text)
			}
			pf, err := parquet.OpenFile(bytes.NewReader(hi.Data), int64(len(hi.Data)))
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := pf.Lookup("quarry.records.version"); (v == "7") != c.text {
				t.Errorf("records version %q, more_text %v", v, c.text)
			}
			o := defaultOptions()
			WithHighCompression(true)(&o)
			o.moreText = "on"
			if c.text {
				o.moreText = "off"
			}
			other, err := encode(c.c.rows, c.c.tpl, &o)
			if err != nil {
				t.Fatal(err)
			}
			if len(hi.Data) > len(other.Data) {
				t.Errorf("%d bytes, %d with more %q", len(hi.Data), len(other.Data), o.moreText)
			}
			checkLines(t, hi, c.c)
			checkLines(t, other, c.c)
			busy, err := Encode(c.c.rows, c.c.tpl)
			if err != nil {
				t.Fatal(err)
			}
			if cols := fileColumns(t, busy.Data); cols[colMoreText] {
				t.Errorf("default level: columns %v, want no more_text", cols)
			}
			checkLines(t, busy, c.c)
		})
	}
}

// TestInMoreInWALOrder: the best level's trials include every parameter
// in more with the rows in WAL order, where every parameter in more lost
// in template order by a little (apt's package names repeat next to
// themselves only in WAL order): Encode's file is as small as that layout
// written once.
func TestInMoreInWALOrder(t *testing.T) {
	c := aptCorpus(200)
	hi, err := Encode(c.rows, c.tpl, WithHighCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	WithHighCompression(true)(&o)
	columns, _, err := encodeOnce(c.rows, c.tpl, &o, splitNone, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.slotMin = everyToMore
	inMore, _, err := encodeOnce(c.rows, c.tpl, &o, splitNone, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.sortByTpl = false
	walInMore, _, err := encodeOnce(c.rows, c.tpl, &o, splitNone, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(inMore.Data) < len(columns.Data) || len(walInMore.Data) >= len(columns.Data) {
		t.Fatalf("the corpus does not test the trial: columns %d bytes, all in more %d, in WAL order %d", len(columns.Data), len(inMore.Data), len(walInMore.Data))
	}
	if len(hi.Data) > len(walInMore.Data) {
		t.Errorf("Encode %d bytes, every parameter in more in WAL order %d", len(hi.Data), len(walInMore.Data))
	}
}

// moreTextRow is a records v7 row written by hand (parquet-go alone).
type moreTextRow struct {
	WALSeq   int64     `parquet:"wal_seq"`
	Index    int32     `parquet:"record_index"`
	TS       time.Time `parquet:"ts,timestamp(microsecond)"`
	ID       int64     `parquet:"template_id"`
	Version  int32     `parquet:"template_version"`
	Source   string    `parquet:"source"`
	Kinds    string    `parquet:"kinds"`
	MoreText *[]byte   `parquet:"more_text,optional"`
}

// TestMoreTextDamaged: a more_text value with more or fewer items than
// the row's parameters without a column is ErrCorrupt from Decode and
// DecodeRows; empty items and a parameter holding the separator's
// neighbours read back.
func TestMoreTextDamaged(t *testing.T) {
	tpl := Templates{{1, 1}: "a <*> b <*> c"}
	text := func(s string) *[]byte { b := []byte(s); return &b }
	for _, c := range []struct {
		name string
		more *[]byte
		want string // the line; "" for ErrCorrupt
	}{
		{"two items", text("x\x1ey"), "a x b y c"},
		{"two empty items", text("\x1e"), "a  b  c"},
		{"bytes around the separator", text("\x1d\x1e\x1f"), "a \x1d b \x1f c"},
		{"one item", text("x"), ""},
		{"three items", text("x\x1ey\x1ez"), ""},
		{"no value", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := handFile(t, "7", moreTextRow{WALSeq: 1, TS: time.Unix(1117838570, 0), ID: 1, Version: 1, Source: "s",
				Kinds: "ss", MoreText: c.more})
			rows := checkHand(t, data, tpl, c.want)
			if c.want != "" && strings.Join(rows[0].Params, "|") != strings.ReplaceAll(string(*c.more), "\x1e", "|") {
				t.Fatalf("DecodeRows params %q, want the items of %q", rows[0].Params, *c.more)
			}
		})
	}
}
