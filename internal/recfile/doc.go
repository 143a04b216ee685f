// Package recfile writes and reads records data files in format records v3
// (and v4: v3 with the kinds marker r below, written when it is smaller;
// v5: with kinds items d, below):
// one Parquet file per (tenant, date, WAL range), as today, but with each
// record's parameters split by kind into typed columns, the timestamp kept
// once (in ts) and every byte of every line kept, UTF-8 or not. It is a
// library: no I/O beyond the bytes it is given. Encode is deterministic for
// a given input, so a retried encode writes the same file.
//
// # Schema (records v3; v2 is lake.RecordRow)
//
// Rows are ordered by (template_id, template_version, wal_seq,
// record_index), or, in a file of one row group written at zstd's best
// level where that is smaller, in WAL order (encode's last trial); WAL
// order is restored by sorting on (wal_seq, record_index), which readers
// do whatever the file's order. One row group per file below 2*groupRows rows (16,384);
// a larger file is cut into row groups between templates, each of at least
// groupRows rows, so DecodeProjected skips the row groups whose
// template_id statistics hold no kept version. In such a file the versions
// of fewer than 64 rows (rareRows, those whose summary entry has no byte
// set) come last, in the same order, as a row group of their own: a text
// term, which keeps them, reads that one and not a few rows of each; the
// footer's TailKey (quarry.records.tail) says so, so the skip looks for a
// rare version in that row group only and for the others elsewhere. One page per column chunk,
// version 1 data pages without a CRC or statistics (not even the empty
// statistics parquet-go writes: marshalPageHeader). The footer is trimmed: no page index
// (column and offset indexes), chunk statistics only for wal_seq, ts,
// template_id and date and only in a file of several row groups (a file's
// bounds are in its add action's stats: statsColumns), created_by
// "quarry"; all are optional in Parquet and readers
// without them read every page of the file, which they do anyway for a file
// this size. A file of a few rows is written for its fixed cost: a column of
// fewer than 32 bytes of values is not compressed, nor one that zstd did
// not make smaller (dropChecksums), source, kinds and
// ts_source are PLAIN below 64 rows (dictionary from 64), a p<k> column is
// dictionary-encoded when its distinct values (estimated: stringNode) are at
// most a quarter of its values and DELTA_LENGTH_BYTE_ARRAY otherwise (PLAIN
// where that compresses smaller, in a file written at zstd's best level:
// encoder.choosePlain), and a slot column
// fewer than 16 rows use is left out (its values in more).
// Every DELTA_BINARY_PACKED column, and the lengths of every
// DELTA_LENGTH_BYTE_ARRAY one, is written with each miniblock's bit width
// rounded up to whole bytes (bytedelta.go: zstd models bytes, not 5- or
// 11-bit fields; any reader unpacks the width a miniblock gives). In a
// file written at zstd's best level the more column's items are PLAIN,
// or written as more_text (PLAIN, records v7) where that compresses
// smaller and no item holds the byte 0x1E (chooseMoreText),
// and in such a file of one row group kinds is PLAIN where smaller than
// its dictionary (chooseKinds).
// The footer's key-value metadata holds quarry.records.version = 3 (4 in
// a file with rows marked r, 5 in one with d items, 6 in one with w or y
// items, 7 in one with the more_text column, 8 in one with rows whose kinds
// value is empty though their template has wildcards) and
// the file's template summary (SummaryKey, Summary: per template version
// its row count and the bytes its parameters use), which readers
// use to skip templates and files and to count without reading rows; a
// file of several row groups at zstd's best level also holds each
// version's pairs of adjacent bytes (PairsKey, Pairs), which narrow the
// same skip.
//
//	column            Parquet type                 meaning
//	wal_seq           INT64                        WAL sequence of the record's frame
//	record_index      INT32 (DELTA_BINARY_PACKED)  the record's position in its frame
//	ts                INT64 TIMESTAMP(ms|us, UTC)  event time; milliseconds when every ts of the file is whole ms
//	template_id       INT64 (DELTA_BINARY_PACKED)  template
//	template_version  INT32 (DELTA_BINARY_PACKED)  template version the record renders with
//	source            STRING (dictionary)          the line source
//	kinds             STRING (dictionary)          one item per parameter, see below
//	ts_residue        BYTE_ARRAY, optional         eventtime residue of the timestamp parameter
//	p<k>, k < 32      STRING, optional             the record's k-th parameter of kind s, u or d (dictionary where values repeat)
//	n<k>, k < 32      INT64, optional              the record's k-th parameter of kind i, f, a, x or w (a y item: one per time), then its d items' runs
//	b<k>, k < 32      BYTE_ARRAY, optional         the record's k-th parameter of kind b (not UTF-8)
//	more              LIST<BYTE_ARRAY>, optional   the exact text of parameters without a column value, in order
//	more_text         BYTE_ARRAY, optional         the same items joined by 0x1E, one value a row (records v7; a file has more or more_text, not both)
//	attrs             MAP<STRING,STRING>, optional record attributes (CDC), in input order
//	date              INT32 DATE (DELTA_BINARY_PACKED; a dictionary when few days: fewDaysOf) the UTC day of ts (WithDate; Day)
//
// A file holds only the optional columns some row of it uses; Delta readers
// read a column a file lacks as null. The partition column tenant is in the
// Delta add action, and so is date in a table partitioned by it (then the
// file is written without WithDate and has no date column; lake.Layout
// decides). Decoders read files with and without the date column.
// SchemaString() is the table's Delta schema.
//
// kinds has one item per wildcard of the template, in order:
//
//	s       UTF-8 text, in p<k>
//	b       bytes that are not valid UTF-8, in b<k> (BYTE_ARRAY without the
//	        UTF8 annotation, so other readers see the exact bytes as binary)
//	i       a canonical decimal integer ("0", or [-][1-9][0-9]*, fitting
//	        int64; "007", "+5", "-0" are s), in n<k>
//	f<d>    a canonical decimal [-]I.F with d = 1..9 fraction digits, in
//	        n<k> unscaled: "1.50" is f2 with 150
//	a       a dotted IPv4 address with canonical octets, in n<k> as the
//	        32-bit value a<<24|b<<16|c<<8|d
//	x       1-16 lowercase hex digits, no leading zero, at least one letter
//	        and one digit, in n<k> as the 64-bit pattern
//	t<L>    the record's timestamp: L is 'A'+eventtime.LayoutID; the text
//	        is eventtime.Render(ts, layout, ts_residue). Nothing else stored.
//	c       covered by the timestamp item (t or w) before it: this parameter and the
//	        template text before it are part of the timestamp's text
//
//	u<L><O> a UTF-8 parameter that holds the record's timestamp inside it,
//	        not all of it: L as for t, O is '0'+offset (offset <= 78). The
//	        parameter without the timestamp's text is in p<k>; the text is
//	        p<k>[:offset] + eventtime.Render(ts, layout, ts_residue) +
//	        p<k>[offset:]. Typical: a log header the miner kept as one
//	        parameter, "081109 203615 148 INFO dfs.FSNamesystem:" is uF0
//	        with " 148 INFO dfs.FSNamesystem:" in p<k>.
//
//	r       first, not an item (records v4): the row's p<k> are numbered
//	        from its last s or u parameter (the last in p0), on rows of 2
//	        to 31 of them. The encoder marks every such row of a file when
//	        its distinct p values, estimated as for the dictionaries,
//	        numbered from the right are at most rightShare (0.9) of those
//	        numbered from the left (alignRight): templates that share
//	        trailing parameters, as dpkg.log's "status installed
//	        libfoo:amd64 1.2-3" and "configure libfoo:amd64 1.2-3 <none>".
//
//	d<k>    UTF-8 text split at k = 1..9 digit runs (records v5): each
//	        run that is a canonical decimal integer ("0" or [1-9][0-9]*,
//	        fitting int64; "007" and a 20-digit run stay text) up to the
//	        9th is replaced by the byte 0x11 (runMarker) in the text, which
//	        goes to the next p<k> like an s; the runs, in order, go to the
//	        n columns after the row's numeric (i, f, a, x) parameters, the
//	        row's first d item's first run in n<m> where m counts those,
//	        so they keep their columns whatever a row's strings split
//	        into. A value containing 0x11 is never split. The text is the
//	        p value with each 0x11 replaced by the next run's decimal. The
//	        encoder splits only in a file written at zstd's best level
//	        (WithHighCompression), only the parameters pickSplits picks
//	        from the first write's counts, and only when the file comes
//	        out splitGain (3%) smaller so (it writes both; a split file
//	        renders slower): "134681 node-246 unix.hw
//	        state_change.unavailable" is d2 with "\x11 node-\x11 unix.hw
//	        state_change.unavailable", a value of a small dictionary.
//	v<L><O><k> a u parameter whose p<k> text (without the timestamp) is
//	        split as d's: the text is p<k> with its runs in place, then the
//	        timestamp inserted at offset O as for u. HPC's, Linux's and
//	        HDFS's header parameters are u: " 148 INFO dfs.DataNode:" is
//	        vF01 with " \x11 INFO dfs.DataNode:".
//
//	w<L><R> another time of the line than its timestamp (records v6): all
//	        of a parameter one timestamp of layout L ('A'+LayoutID) whose
//	        residue R is at most 9 printable bytes, written '0'+length
//	        and the bytes, within two days of ts or of ts moved to the
//	        time's year (an inferred one: a syslog header has none); or,
//	        followed by c items as t is, this and the next parameters with
//	        the template text between them. Its n column (numbered
//	        with i, f, a and x) holds the steps n of the layout
//	        (eventtime.Step: a day, a second, a fraction digit) from the
//	        step ts falls in; the text is eventtime.Render(ts's step + n
//	        steps, L, R) (shifted). BGL's local date "2005.06.03" beside
//	        the epoch 1117838570 is wR0 with 0; the day before, -1.
//	y<L><O><k>{<L><O><R>}k a u parameter with k = 1..9 other times of
//	        the line inside it (records v6): the line's timestamp at
//	        offset O as for u, then each other time's layout, offset and
//	        residue as for w, by offset; offsets are in the parameter's
//	        text. p<k> holds the text without any of the times; the times'
//	        steps are in the n columns as k w items at this place. The
//	        text is p<k> with the times inserted in order of offset. BGL's
//	        header "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11
//	        2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO"
//	        is yM22R=0Q\0 with "-   R02-M1-N0-C:J12-U11  R02-M1-N0-C:J12-U11
//	        RAS KERNEL INFO" in p<k> and two n values, the local date's 0
//	        days and the local time's steps of a microsecond from ts.
//	        The n columns of w and y items are never left out for more
//	        (a y item's times have no text there).
//
// A parameter is t only when the line's timestamp (eventtime.Parser, auto,
// UTC) starts exactly at a parameter and ends exactly at one, u when it lies
// inside one UTF-8 parameter, and either only when the timestamp renders
// back from the row's ts byte for byte; otherwise its parameters are typed
// one by one. A typed value always renders back to the exact original text.
// Columns are numbered per kind, not per parameter position: the record's
// first s parameter is in p0, its second in p1, its first numeric one in n0
// and so on, so a file has as many p columns as its widest record has s
// parameters. A record's 33rd and later numeric parameters are typed s or b.
// A file leaves out a slot column fewer than 1/16 of its rows, or fewer
// than 16 rows, would use (each row costs a column a value, null or not,
// and each column its page header and footer entry), and a file written at
// zstd's best level also one fewer than a quarter of its rows (or 128),
// then half, then three quarters of them, would use, while each step makes
// the file smaller
// (encode writes it again per step, sparseSteps); those parameters, and
// the 33rd and later of a kind, are in more: their exact text (for u, the
// text without the timestamp), in parameter order. So a parameter whose
// column value is null (or absent) is the next item of more; a d item's
// exact text is there when its p value or any of its runs' n values is.
// A row's d runs and numeric parameters together take at most 32 n
// columns: a string past that is not split, a number is s.
//
// An empty kinds value on a row whose template has wildcards (records v8)
// is one s item per wildcard (stringSlots). At zstd's best level the
// encoder writes it for the rows whose items are s only, and for those
// whose parameters are all in more with kinds s, i, f, a, x or b, which
// read as s take more's items, their exact text (emptyKinds).
//
// To reconstruct a line without this package: split the template text on
// "<*>"; read an empty kinds of a template with wildcards as one s a
// wildcard; for each item j of kinds (after a leading r) write piece j (unless
// the item is c), then the parameter as its kind says (skip c), taking the
// next p (s, u, d, v; counted from the right after r), n or b column (d, v: its
// runs' n columns, after the row's numeric ones), or, when that column's value is null, the next item of more
// (or of the row's more_text value split at 0x1E) as the parameter's text;
// then the last piece.
//
// # Measurements
//
// Loghub 2k lines with headers (../shared/loghub2k), frames of 256 lines.
// "per-dataset" sums 11 files, one tenant per dataset (2,000 lines each);
// "all-one" is all 22,000 lines as one tenant in one file. Records bytes
// only (the templates file is extra: 50,079 bytes per-dataset, 23,742
// all-one, as the encoder writes it today). Levers, each measured against
// the default of its time (TestSizeLevers, RECFILE_LEVERS=1):
//
//	variant                              per-dataset  all-one
//	first version (dict/delta by         331,903      262,447
//	  distinct ratio, DELTA ints, ts and
//	  wal_seq DELTA, page stats, zstd 7)
//	rows in WAL order instead            358,902      291,475
//	strings all dictionary               335,765      261,796
//	strings all DELTA_BYTE_ARRAY         343,013      266,428
//	strings PLAIN                        331,077      255,228  chosen
//	n<j> PLAIN instead of DELTA          325,293      257,012  chosen
//	no page statistics                   308,102      259,762  chosen
//	page buffer 64 KiB instead of 1 MiB  332,142      271,592
//	zstd best instead of better          326,122      253,049  slow
//	with the choices above               300,655      247,113
//	  ts, wal_seq PLAIN                  300,054      245,595  chosen
//	  record_index PLAIN                 worse: 18,367 vs 16,410 for the column
//	  zstd default (3) instead of 7      298,207      248,591  chosen (faster)
//	(the harness's miner and timestamp parser changed since: the same
//	default measured 363,943 and 313,852 when tuning began)
//	slot columns per kind, not position  350,501      309,797  chosen
//	trimmed footer (see Schema)          323,693      305,637  chosen
//	digit runs of s parameters split     341,841      315,249  rejected
//	  into a shape (p) and numbers (n):
//	  1, 2, 8, 32 runs at most           326,835 .. 346,188, all worse
//	  (a line's fields repeat each other, "R02-M1-N0-C:J12-U11 ...
//	  R02-M1-N0-C:J12-U11"; zstd finds that in text, not across columns)
//	  (2026-12-06, with dictionaries and at zstd's best level, the
//	  file written both ways and the smaller kept: taken, kind d; see
//	  docs/benchmarks.md "Digit runs split out of string parameters")
//	every parameter s (no typed ints)    330,374      312,618  rejected
//	timestamp inside a parameter cut     273,284      255,455  chosen
//	  out (kind u)
//	then, each against that default:
//	  n<k> DELTA_BINARY_PACKED           280,816      261,186
//	  ts DELTA_BINARY_PACKED             277,586      258,706
//	  wal_seq DELTA_BINARY_PACKED        274,161      255,824
//	  record_index PLAIN                 279,767      259,797
//	  strings all dictionary             279,470      270,707
//	  untrimmed footer                   299,762      259,546
//	  zstd better (klauspost level 3)    263,149      243,874  2x encode time
//	  zstd fastest                       297,211      273,606
//	  p<k> dictionary when distinct      268,557      257,289  rejected: small,
//	    values <= 1/4 of values, else                          mixed, and the
//	    PLAIN (1/16: 271,672 / 255,455)                        distinct count
//	                                                           costs encode time
//	slot columns fewer than 1/16 of the  266,970      252,026  chosen (fewer
//	  rows use left out, values in more                        columns, faster)
//	  1/64: 267,947 252,760; 1/256: 271,987 254,314; 1/8: 264,626 251,598;
//	  1/4: 263,999 255,173 (1/8 and 1/4 leave more parameters untyped)
//	ts TIMESTAMP(MILLIS) when every ts   253,896      239,536  chosen
//	  is whole milliseconds (ts 56,693
//	  to 44,203 all-one; DELTA on it
//	  257,849 243,153)
//	  n<k> INT32 when its values fit     254,788      239,536  rejected
//	p<k> dictionary when distinct        249,896      244,189  chosen
//	  values <= 1/4 (estimated), else    (PLAIN 254,941 / 243,224; the
//	  PLAIN; 2026-12-05, on main then    pipeline's Loghub lake 289,239 to
//	  (1/2: 251,285 252,719; 1/8:        284,194, dpkg.log 1.51 to 1.21 of
//	  252,377 243,224)                   zstd -3; encode +3.6% instructions)
//
// quarry run writes one file per event-time date, and the Loghub samples
// spread over months and years: 769 files for the 11 datasets (HPC 545,
// BGL 166, Linux 44), most of a few rows, so a file's fixed cost (about
// 1.4 KB for 3 rows) decides the lake. Levers for it, measured as above
// plus "per-date" (one file per dataset and UTC date, 769 files):
//
//	variant                              per-dataset  per-date   all-one
//	default then                         255,556      1,513,520  239,691
//	version 1 data pages                 255,235      1,478,978  238,922
//	  + PLAIN under 64 rows, columns     255,235      1,383,410  238,922  chosen
//	    under 32 bytes uncompressed
//	    (raw under 16/64/128 B: 1,391,586 / 1,389,473 / 1,466,972;
//	    dictionary from 16/256 rows: 1,393,855 / 1,388,382 with raw 64)
//	  + page headers without CRC         253,934      1,328,701  238,794  chosen
//	  + slot columns used by fewer than  253,934      1,215,213  238,794  chosen
//	    16 rows left out (2: 1,293,779;
//	    4: 1,253,393; 8: 1,232,396;
//	    32: 1,204,627)
//	  p<k> zstd better (others default)  244,051      1,323,344  228,183  rejected:
//	    (best: 235,647 1,318,894 220,353)                                encode CPU
//	                                                                     +15-25%
//	                                                                     (best +40%)
//	  ts or n<k> zstd better / best      under 1% each (252,737 default:
//	                                     ts 252,508 / 250,579, n 252,358 /
//	                                     251,359): not taken
//	  footer schema without type_length  per-date 1,215,213 -> 1,162,300
//	    and INT annotations on integer   (records); chosen
//	    columns, created_by "quarry"
//
// The templates file (written by the encoder) dropped its page index, page
// statistics and all chunk statistics but template_id's and wal_seq's, and
// uses version 1 pages: 50,101 to 40,964 bytes over the 11 datasets.
// Writing no previous text (derivable from the row of version-1) would
// save 4,000 more (TestSizeTemplates); done since (templates v2, below).
// Lake bytes (records + templates file) against the raw lines
// (TestSizeLoghub, go test -run TestSizeLoghub -v ./internal/recfile/),
// before the small-file levers above:
//
//	dataset      raw      v2+tpl  v3+tpl  zstd-3  zstd-19 gzip-6  v3/zstd-3
//	Android      279,076  39,761  28,798  21,665  16,430  25,637  1.33
//	Apache       169,240  21,884  10,812  10,675   7,184   9,958  1.01
//	BGL          315,151  79,296  67,100  61,854  43,623  57,508  1.08
//	HDFS         285,848  73,826  48,494  54,091  42,755  55,045  0.90
//	HPC          149,178  45,469  31,499  26,686  19,779  26,562  1.18
//	Hadoop       382,949  30,708  20,961  17,334  13,390  18,911  1.21
//	Linux        214,486  26,129  21,160  14,929  11,299  16,914  1.42
//	OpenSSH      223,217  27,382  15,805  16,744  10,948  16,386  0.94
//	Proxifier    236,962  42,065  27,416  25,263  18,602  22,895  1.09
//	Spark        194,268  24,336  16,376  13,957  10,016  14,291  1.17
//	Windows      283,434  21,976  15,554  12,266   9,221  14,517  1.27
//	sum        2,733,809 432,832 303,975 275,464 203,247 278,624  1.10
//	all-one    2,733,809 386,985 263,278 279,849 203,257 281,789  0.94
//
// With them and the trimmed templates file: sum 293,514 (1.07 of zstd
// -3), all-one 261,288 (0.93), per-date 1,203,077 (4.37). TestSizeLoghub
// fails above 1.09 for the sum and 1.0 for all-one.
// Of the per-dataset sum, 50,079 bytes were the templates files. Their
// footers trimmed with TrimFooter they are 41,194 (sum 1.07); written with
// only created/changed templates, no previous text, and trimmed, 28,170
// (sum 1.02; TestSizeTemplates).
// In the all-one file: p* 45%, n* 17%, ts 17%, record_index 6%, more 2%;
// a small file's fixed cost (footer, schema) is about 1 KB.
//
// With the date column (WithDate) the per-dataset sum was 1.094. Rewrites
// (compaction, retention) now encode WithHighCompression: each column
// chunk at zstd best or default, whichever frame is smaller, and the
// templates files use ZstdHigh (an idle encoder's; a busy one's use
// ZstdBetter since 2026-12-05): per-dataset 1.090 as the encoder writes,
// 1.003 as compaction rewrites (all-one 0.96 and 0.88), for 2.6 times the
// encode CPU of a rewrite (TestEncodeLevelsCPU); zstd better on the ingest
// path would cost 15-21%. Levers measured and not taken are in
// docs/benchmarks.md ("Encoding: higher zstd levels").
//
// Templates v2 (docs/formats.md): the templates file without previous
// text, without page statistics (parquet-go wrote each page's min and max
// text in its header), with DELTA_BINARY_PACKED integer columns and no
// page CRCs (TrimFooter): per-dataset sum 1.090 to 1.054 as the encoder
// writes, 1.003 to 0.967 as compaction rewrites (all-one 0.95, 0.87);
// TestSizeLoghub fails above 1.06 and 0.975. Measured and not taken then
// (docs/benchmarks.md): rows of a template group sorted by ts (records
// 260,684 to 261,012: the logs are nearly in time order already), rows in
// WAL order (288,754: ts 43.0 to 35.4 KB and record_index 16.9 to 0.9 KB,
// but p and n 166 to 206 KB and template_id 1.5 to 10.6 KB), a WAL-ordinal
// gap per template group instead of record_index (13.5 KB against 17.0
// KB, and a schema change), ts DELTA per file when smaller (870 bytes).
//
// Speed against records v2 on the same 22,000 lines, v3 time over v2 time
// (BenchmarkRatio alternates the two in one loop, each step on a collected
// heap; the machine is shared and runs vary by about ±0.4): encode 1.5-2.5,
// median 1.8
// (3-7 when tuning began: a zstd codec per file, a comparison sort, page
// bounds for every column, a null in every sparse column), decode 0.6-0.9
// (1.2-1.4 before: reading column by column instead of through parquet
// rows). Run separately (BenchmarkEncodeV3 against BenchmarkEncodeV2, each
// paying its own garbage collection) the ratios are about 2.0-2.5 and
// 1.0-1.4.
// Since then encode is about 1.55 (median of 5 alternated runs, 1.50-1.83;
// the version before measured 1.83 in the same runs), EncodeV3 alone about
// 23% faster (39 to 30 ms for the 22,000 lines), with byte-identical
// files: slot and required columns built in write order, required values
// without levels, the numeric parsers skipped by a parameter's first byte,
// one Render per distinct timestamp. It is still slower than v2: about
// 40% of its time is parquet-go's per-value column buffers and page
// encoding and zstd (ColumnWriter takes only []parquet.Value, no typed
// writes), 13% finding the timestamp, 9% classifying. The timestamp parse
// is not skipped per template: the parser infers a missing year from the
// line before, so skipping a parse could change a later line's kinds.
// Later, with the same bytes (TestEncodePinned, TestEncodeLoghubReference):
// classify sorts a parameter's bytes into classes in one pass and runs at
// most one numeric parser (35% fewer instructions in it), and the zstd
// encoders are kept in a free list (Zstd) instead of a sync.Pool that every
// garbage collection emptied, each new encoder allocating 18 MB, and the
// per-row arrays are kept for the next file (BenchmarkEncodeV3 8 instead
// of 15 MB/op); 16-21% fewer instructions per line with GC on. In one pair
// of quarry runs under load Encode went from 2.97 to 2.33 µs of CPU per
// line (docs/benchmarks.md).
//
// DecodeProjected reads template_id and template_version first and then
// only the columns its projection needs, for the kept rows' lines only: a
// count by template (no lines, source or attrs) 26 to 6.3 ms for the
// 22,000 lines, the lines of a tenth of the templates 27 to 12.6 ms, all
// 26 to 23 ms (BenchmarkDecodeProjected). A Reader (OpenAt) does the same
// from an io.ReaderAt (an object of the store) after reading the footer
// once: each read of a row group's columns fetches only their column
// chunks, adjacent ones (up to 16 KB apart) with one ReadAt, where
// DecodeProjected of the whole file needs every byte in memory first.
// Records of several row groups are put in WAL order by slot (wal_seq's
// range, then record_index), without a comparison sort. Lines rendered in
// bulk (Lines.Select, LineRenderer.AppendLines) are rendered in runs, each
// run's rows in the file's stored order, so that a template's rows read
// its columns front to back, and each line is copied to its WAL place: a
// full render 0.885 of the CPU of rendering row by row in WAL order
// (docs/benchmarks.md, branch render12e).
//
// Column chunks are decoded here from their bytes (chunkPages: page
// headers by pqfile.ReadPageHeader, zstd, repetition and definition
// levels), not by parquet-go, whose v0.32 takes a page header's value
// count over what the page decodes to (filling the difference from a
// pooled buffer's past) and expands an RLE level run whole, whatever the
// page's count (a few bytes stating 2^40 levels cost 2^40 bytes): integer
// columns by readInts (PLAIN, DELTA_BINARY_PACKED by deltaValues, which
// refuses a run whose miniblocks are cut short where parquet-go's decoder
// returns stale values for them, and dictionary values),
// byte array columns by readBytes (PLAIN, DELTA_LENGTH_BYTE_ARRAY and
// dictionary values, the values left in the decompressed page) and
// repeated ones (more, attrs) by readLists. A page that decodes to more or
// fewer values than its header and levels state, or whose runs state more
// than it holds, is ErrCorrupt; a repeated column's page may state at most
// 65,536 levels a row (maxListItems: a line has no more parameters). A
// chunk of a codec or encoding quarry never wrote (snappy, BYTE_STREAM_SPLIT,
// a dictionary that fell back to plain pages) is still parquet-go's.
package recfile
