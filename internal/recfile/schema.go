package recfile

import (
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// Version is the newest records file format this package writes and
// reads: records v8, which is v3 with rows whose kinds value is empty where
// their template has wildcards: that many s items (stringSlots). v7 is v3
// with a more_text column (a row's items of
// more joined by moreSep into one value, instead of the more list). v6 is
// v3 with kinds items 'w' and 'y' (other times
// of the line, as steps from ts), v5 v3 with kinds items 'd' (string
// parameters split at their digit runs), v4 v3 with rows whose p<k>
// columns are numbered from the record's last string parameter (kinds item
// 'r', alignRight); a file is of the highest version whose items it has,
// one with none of them v3. Version 2 is lake.RecordRow
// (params as list<string>, one row per record in WAL order).
const Version = 8

// MaxSlots is how many parameters of a record have columns of their own
// (p<j>, n<j>, b<j> for j < MaxSlots); the rest go to more.
const MaxSlots = 32

// Column names; see the package doc.
const (
	colWALSeq     = "wal_seq"
	colIndex      = "record_index"
	colTS         = "ts"
	colTSSource   = "ts_source"
	colTemplateID = "template_id"
	colVersion    = "template_version"
	colSource     = "source"
	colKinds      = "kinds"
	colResidue    = "ts_residue"
	colMore       = "more"
	colMoreText   = "more_text"
	colAttrs      = "attrs"
	colDate       = "date"
)

func slotName(prefix byte, j int) string { return string(prefix) + strconv.Itoa(j) }

// SchemaString is the Delta schemaString of the records v3 table. A data
// file holds only the slot columns (p<j>, n<j>, b<j>), ts_residue, more and
// attrs that some row of it uses; Delta readers read a column a file lacks
// as null, as they do after a column is added to a table. Built on first
// use, not at package initialisation: every process of the one binary runs
// every linked package's init, and most never need it.
var SchemaString = sync.OnceValue(buildSchemaString)

func buildSchemaString() string {
	var b strings.Builder
	b.Grow(12 << 10)
	b.WriteString(`{"type":"struct","fields":[`)
	field := func(name, typ string, nullable bool) {
		b.WriteString(`{"name":"` + name + `","type":` + typ + `,"nullable":` + strconv.FormatBool(nullable) + `,"metadata":{}},`)
	}
	field(colWALSeq, `"long"`, false)
	field(colIndex, `"integer"`, false)
	field(colTS, `"timestamp"`, false)
	field(colTSSource, `"integer"`, true)
	field(colTemplateID, `"long"`, false)
	field(colVersion, `"integer"`, false)
	field(colSource, `"string"`, false)
	field(colKinds, `"string"`, false)
	field(colResidue, `"binary"`, true)
	for j := 0; j < MaxSlots; j++ {
		field(slotName('p', j), `"string"`, true)
		field(slotName('n', j), `"long"`, true)
		field(slotName('b', j), `"binary"`, true)
	}
	field(colMore, `{"type":"array","elementType":"binary","containsNull":false}`, true)
	field(colMoreText, `"binary"`, true)
	field(colAttrs, `{"type":"map","keyType":"string","valueType":"string","valueContainsNull":false}`, true)
	field("tenant", `"string"`, false)
	b.WriteString(`{"name":"date","type":"date","nullable":false,"metadata":{}}]}`)
	return b.String()
}

// options are the writer's tunables, fixed by measurement (see the package
// doc); tests vary them.
type options struct {
	dictDays bool // the date column a dictionary when its days are few (fewDays)
	// rightShare: the rows' string parameters are numbered from the
	// right when that estimates at most this share of the distinct p
	// values numbered from the left (strings "auto"); 0: never.
	rightShare  float64
	level       zstd.Level
	strings     string  // "auto", "dict", "delta" or "plain" for p<j>
	dictShare   float64 // strings "auto": a dictionary when distinct values are at most this share of the values
	intTrial    bool    // with hiLevel: date, ts and n<j> PLAIN or DELTA_BINARY_PACKED, whichever compresses smaller (chooseDelta)
	moreText    string  // with hiLevel: more's items joined in more_text (records v7): "auto" where smaller (chooseMoreText), "on" or "off"; never where an item holds moreSep
	plainTrial  bool    // strings "auto" with hiLevel: each p<j> that is no dictionary PLAIN or DELTA_LENGTH_BYTE_ARRAY, whichever compresses smaller (choosePlain)
	ints        string  // "delta" or "plain" for n<j>
	pageBuffer  int
	sortByTpl   bool
	noPageStats bool
	indexPlain  bool       // record_index PLAIN instead of DELTA_BINARY_PACKED
	trimFooter  bool       // no page index, chunk statistics only for statsColumns (none in one row group)
	innerTime   bool       // a timestamp inside a parameter is cut out of it (kind u)
	slotMin     float64    // slot columns used by fewer rows than this share go to more
	tsMillis    bool       // ts TIMESTAMP(MILLIS) when every ts is whole milliseconds
	tsDelta     bool       // ts DELTA_BINARY_PACKED
	walDelta    bool       // wal_seq DELTA_BINARY_PACKED
	untyped     bool       // every parameter s or b (measurement only)
	shift       bool       // another time of the line as steps from ts (kind w)
	dictRows    int        // source, kinds, ts_source dictionary-encoded only from this many rows (PLAIN below)
	kinds       string     // "" (chooseKinds at zstd's best level), "plain" or "dict" (tests)
	rawBytes    int        // a column whose values take fewer bytes than this is not compressed
	pageVersion int        // data page header version, 1 or 2
	noCRC       bool       // page headers without their CRC
	slotRows    int        // slot columns used by fewer rows than this go to more
	pLevel      zstd.Level // p<j> columns' zstd level when set
	// classify replaces classify when set (tests: the reference chain).
	classify  func(string) (kind byte, digits uint8, v int64)
	groupRows int  // a row group is cut between templates once this many rows are gathered (0: one row group)
	rareRows  int  // with groupRows, the versions with fewer rows are written last, a row group of their own (rareLast)
	date      bool // the date column (WithDate)
	// hiLevel compresses the columns whose values take hiBytes or more
	// before compression (rawSize) when set; WithHighCompression sets
	// best from 0 bytes (from 1 KiB: the same bytes over the Loghub
	// datasets, 4 KiB 0.1% more, 16 KiB 2.4% more). Best goes through
	// highCodec (the smaller of best and default).
	hiLevel zstd.Level
	hiBytes int
	// digits: "trial" splits the string parameters at their digit runs
	// (kind d) in a file written at zstd's best level (hiLevel) when that
	// makes the file smaller (encode writes it both ways), "on" always,
	// anything else never.
	digits string
	// fullKinds writes every row's kinds items, never the empty value that
	// stands for s items only (records v8; tests).
	fullKinds bool
}

// statsColumns keep their chunk statistics in a trimmed footer of a file
// of several row groups: the columns a reader filters on.
//
// A file of one row group keeps none, and so no column_orders:
// its chunks' bounds are the file's, which its Delta add
// action holds (stats: wal_seq, ts, template_id, and date when the file
// has the column) and which every Delta reader prunes files by before it
// opens one; quarry's row group skip (rowGroupSkipper) reads template_id's
// only in a file of two or more row groups. About 140 bytes a file (four
// statistics and a column order per column): the records files of the 11
// Loghub lakes through quarry run, 228,948 to 227,366 bytes.
var statsColumns = map[string]bool{colWALSeq: true, colTS: true, colTemplateID: true, colDate: true}

func defaultOptions() options {
	return options{dictDays: true, rightShare: 0.9, level: zstd.SpeedDefault, strings: "auto", dictShare: 0.25, plainTrial: true, moreText: "auto", intTrial: true, ints: "plain", pageBuffer: 1 << 20, sortByTpl: true, noPageStats: true, trimFooter: true, innerTime: true, shift: true, slotMin: 1.0 / 16, tsMillis: true, pageVersion: 1, dictRows: 64, rawBytes: 32, noCRC: true, slotRows: 16, groupRows: 8192, rareRows: paramBytesMinRows, digits: "trial"}
}

// schemaFor builds the Parquet schema of a file using the given optional
// columns.
func schemaFor(u *usage, o *options) *parquet.Schema {
	bin := parquet.Leaf(parquet.ByteArrayType)
	index := parquet.Leaf(parquet.Int32Type)
	if !o.indexPlain {
		index = parquet.Encoded(index, deltaEnc)
	}
	g := parquet.Group{
		colWALSeq:     parquet.Leaf(parquet.Int64Type),
		colIndex:      index,
		colTS:         parquet.Timestamp(parquet.Microsecond),
		colTSSource:   dict(parquet.Leaf(parquet.Int32Type), u.rows, o),
		colTemplateID: parquet.Encoded(parquet.Leaf(parquet.Int64Type), deltaEnc),
		colVersion:    parquet.Encoded(parquet.Leaf(parquet.Int32Type), deltaEnc),
		colSource:     dict(parquet.String(), u.rows, o),
		colKinds:      dict(parquet.String(), u.rows, o),
	}
	if u.kindsPlain {
		g[colKinds] = parquet.Encoded(parquet.String(), &parquet.Plain)
	}
	if u.idPlain {
		g[colTemplateID] = parquet.Leaf(parquet.Int64Type)
	}
	if u.versionPlain {
		g[colVersion] = parquet.Leaf(parquet.Int32Type)
	}
	if u.tsMillis {
		g[colTS] = parquet.Timestamp(parquet.Millisecond)
	}
	if o.tsDelta || u.tsDelta {
		g[colTS] = parquet.Encoded(g[colTS], deltaEnc)
	}
	if o.walDelta {
		g[colWALSeq] = parquet.Encoded(g[colWALSeq], deltaEnc)
	}
	if o.date {
		g[colDate] = parquet.Encoded(parquet.Date(), deltaEnc)
		if u.fewDays {
			g[colDate] = parquet.Encoded(parquet.Date(), &parquet.RLEDictionary)
		} else if u.datePlain {
			g[colDate] = parquet.Encoded(parquet.Date(), &parquet.Plain)
		}
	}
	if u.residue {
		g[colResidue] = parquet.Optional(bin)
	}
	if u.more {
		// A list's codec is its leaf's (parquet.Compressed takes only a
		// leaf): at zstd's best level too (since 2026-12-05 late evening;
		// the default level before), where the small logs keep much of
		// their text (alternatives.log's more 1,425 to 1,310 bytes).
		item := bin
		if o.hiLevel != 0 {
			item = parquet.Compressed(parquet.Encoded(bin, &parquet.Plain), o.highCodec())
		}
		g[colMore] = parquet.Optional(parquet.List(item))
	}
	if u.moreText {
		// more's items as one value a row (records v7): PLAIN, each row's
		// items after one 4-byte length instead of one each.
		g[colMoreText] = parquet.Optional(parquet.Compressed(parquet.Encoded(bin, &parquet.Plain), o.highCodec()))
	}
	if u.attrs {
		g[colAttrs] = parquet.Optional(parquet.Map(parquet.String(), parquet.String()))
	}
	for j := 0; j < MaxSlots; j++ {
		if u.p[j].n > 0 {
			g[slotName('p', j)] = parquet.Optional(stringNode(&u.p[j], o))
			if o.pLevel != 0 {
				g[slotName('p', j)] = parquet.Compressed(g[slotName('p', j)], codec(o.pLevel))
			}
		}
		if u.n[j] > 0 {
			n := parquet.Leaf(parquet.Int64Type)
			if o.ints == "delta" || u.nDelta[j] {
				n = parquet.Encoded(n, deltaEnc)
			}
			g[slotName('n', j)] = parquet.Optional(n)
		}
		if u.b[j] > 0 {
			g[slotName('b', j)] = parquet.Optional(bin)
		}
	}
	for name, n := range g {
		switch size := u.rawSize(name); {
		case size < o.rawBytes:
			g[name] = parquet.Compressed(n, &parquet.Uncompressed)
		case o.hiLevel != 0 && size >= o.hiBytes && size < 1<<30: // not residue, more (its leaf above), attrs
			g[name] = parquet.Compressed(n, o.highCodec())
		}
	}
	return parquet.NewSchema("records", g)
}

// dict dictionary-encodes n when the file has o.dictRows rows or more: a
// dictionary page costs a page header, more than a few PLAIN values.
func dict(n parquet.Node, rows int, o *options) parquet.Node {
	if rows < o.dictRows {
		return n
	}
	return parquet.Encoded(n, &parquet.RLEDictionary)
}

// rawSize estimates the bytes of a column's values before compression.
func (u *usage) rawSize(name string) int {
	switch name {
	case colWALSeq, colTS, colTemplateID:
		return 8 * u.rows
	case colIndex, colTSSource, colVersion, colDate:
		return 4 * u.rows
	case colSource, colKinds:
		return u.textBytes[name]
	case colResidue, colMore, colAttrs:
		return 1 << 30 // rare: left compressed
	}
	var k int
	for i := 1; i < len(name); i++ {
		k = k*10 + int(name[i]-'0')
	}
	switch name[0] {
	case 'p':
		return u.p[k].bytes
	case 'n':
		return 8 * u.n[k]
	}
	return 1 << 30
}

// stringNode picks a p<j> column's encoding. "auto" (the default): a
// dictionary (RLE_DICTIONARY) when the column's distinct values are at most
// o.dictShare of its values, else PLAIN. Where values repeat (a package
// name, a status word, a host) the dictionary's indexes compress far
// better than the repeated text; where they do not, the dictionary is a
// second copy of the values. docs/benchmarks.md, "String columns: a
// dictionary where values repeat".
func stringNode(s *strStats, o *options) parquet.Node {
	n := parquet.String()
	switch o.strings {
	case "dict":
		return parquet.Encoded(n, &parquet.RLEDictionary)
	case "delta":
		return parquet.Encoded(n, &parquet.DeltaByteArray)
	case "plain":
		return n
	}
	if s.dict(o) {
		return parquet.Encoded(n, &parquet.RLEDictionary)
	}
	if s.plain {
		return parquet.Encoded(n, &parquet.Plain)
	}
	return n
}

// dict reports whether strings "auto" writes the column as a dictionary:
// its distinct values (estimated) are at most o.dictShare of its values.
func (s *strStats) dict(o *options) bool {
	return s.words > 0 && s.distinct() <= o.dictShare*float64(s.n)
}

// usage records which optional columns a file needs.
type usage struct {
	residue, more, attrs bool
	// moreText: more's items are written joined by moreSep, one value a
	// row, in the more_text column (records v7), and more is not written.
	moreText  bool
	tsMillis  bool // ts is written in milliseconds
	rows      int
	textBytes map[string]int // source, kinds: bytes of their values
	p         [MaxSlots]strStats
	n, b      [MaxSlots]int // values per column
	// pr estimates the p columns as they would be with the rows' string
	// parameters numbered from the right (alignRight); right says the
	// file is written so.
	pr    [MaxSlots]strStats
	right bool
	// digits: some row has a parameter split at its digit runs (kind d,
	// records v5).
	digits bool
	// emptyKinds: some row of a template with wildcards has the empty
	// kinds value, its parameters s items (records v8).
	emptyKinds bool
	// shift: some row has another time of its line as steps from its ts
	// (kind w, records v6).
	shift  bool
	nShift [MaxSlots]int // values per n column that are kind w
	// fewDays: the rows' ts fall on at most maxDictDays UTC days; the
	// date column is then a dictionary (fewDaysOf).
	fewDays bool
	// Written at zstd's best level (encoder.chooseDelta): date PLAIN
	// instead of DELTA_BINARY_PACKED, ts and n<j> DELTA_BINARY_PACKED
	// instead of PLAIN, where that compresses smaller.
	datePlain, tsDelta bool
	// kindsPlain: kinds PLAIN instead of a dictionary (chooseKinds).
	kindsPlain bool
	// idPlain, versionPlain: template_id and template_version PLAIN
	// instead of DELTA_BINARY_PACKED (chooseDelta).
	idPlain, versionPlain bool
	nDelta                [MaxSlots]bool
}

// maxDictDays is the most distinct dates a file's date column is
// dictionary-encoded for (from dictRows rows): RLE_DICTIONARY is smaller than
// DELTA_BINARY_PACKED for a column of a few values however they
// interleave (rows are sorted by template, not time), DELTA for one of many
// (Loghub 2k BGL, 166 days; Linux 44; HPC 545 in no order).
const maxDictDays = 16

// fewDaysOf reports whether rows' ts fall on at most maxDictDays days.
func fewDaysOf(rows []Row) bool {
	var days [maxDictDays]int32
	n := 0
	last, has := int32(0), false
	for i := range rows {
		d := Day(rows[i].TS)
		if has && d == last {
			continue
		}
		last, has = d, true
		if slices.Contains(days[:n], d) {
			continue
		}
		if n == maxDictDays {
			return false
		}
		days[n] = d
		n++
	}
	return true
}

// strStats counts a string column's values and their bytes and, when words
// is set (strings "auto"), estimates its distinct values by linear
// counting: each value sets the bit its hash picks in a bitmap of words
// 64-bit words, and m bits of which z are clear hold about -m*ln(z/m)
// distinct values. A map of the values cost twice the encode CPU of this
// (parquet-go builds its own dictionary only once the column is chosen).
type strStats struct {
	n, bytes int
	words    int      // bitmap size; 0: no estimate
	bits     []uint64 // made at the first value
	last     string   // a run of equal values sets its bit once
	// plain: the column is PLAIN (each value after its 4-byte length),
	// not DELTA_LENGTH_BYTE_ARRAY (every length first, then the bytes);
	// encoder.choosePlain.
	plain bool
}

func (s *strStats) add(v string) {
	if s.count(v) {
		s.set(xxhash.Sum64String(v))
	}
}

// count counts v and reports whether its hash is to be set: an estimate
// is kept and v does not repeat the value before it.
func (s *strStats) count(v string) bool {
	s.n++
	s.bytes += 4 + len(v)
	if s.words == 0 || (s.n > 1 && v == s.last) {
		return false
	}
	s.last = v
	return true
}

// set sets the bit of a value's hash h.
func (s *strStats) set(h uint64) { s.setBit(s.bit(h)) }

// bit is the bit a value's hash h sets: the same in every column of a
// file (all have words words), so one division serves both numberings
// (encoder.addP, addRight).
func (s *strStats) bit(h uint64) uint64 { return h % uint64(64*s.words) }

// setBit sets bit i.
func (s *strStats) setBit(i uint64) {
	if s.bits == nil {
		s.bits = make([]uint64, s.words)
	}
	s.bits[i/64] |= 1 << (i % 64)
}

// sumDistinct is the estimated distinct values of the columns st, summed.
func sumDistinct(st *[MaxSlots]strStats) float64 {
	var d float64
	for k := range st {
		if st[k].n > 0 {
			d += st[k].distinct()
		}
	}
	return d
}

// distinct estimates the distinct values added (linear counting).
func (s *strStats) distinct() float64 {
	if len(s.bits) == 0 {
		return 0
	}
	m := 64 * len(s.bits)
	set := 0
	for _, w := range s.bits {
		set += bits.OnesCount64(w)
	}
	if set == m {
		return float64(s.n) // saturated: as if every value were distinct
	}
	return -float64(m) * math.Log(float64(m-set)/float64(m))
}

// distinctWords sizes a column's bitmap for a file of rows rows: two bits
// a row (at least 1,024 bits), so the estimate stays within a few percent
// up to every row distinct.
func distinctWords(rows int) int {
	return max(16, (2*rows+63)/64)
}

// highCodec is the codec a column of at least o.hiBytes is written with:
// highCodec (the smaller of best and default) for zstd's best level.
func (o *options) highCodec() compress.Codec {
	if o.hiLevel == zstd.SpeedBestCompression {
		return highCodec
	}
	return codec(o.hiLevel)
}
