// Package recfile writes and reads records data files in format records v3:
// one Parquet file per (tenant, date, WAL range), as today, but with each
// record's parameters split by kind into typed columns, the timestamp kept
// once (in ts) and every byte of every line kept, UTF-8 or not. It is a
// library: no I/O beyond the bytes it is given. Encode is deterministic for
// a given input, so a retried encode writes the same file.
//
// # Schema (records v3; v2 is lake.RecordRow)
//
// Rows are ordered by (template_id, template_version, wal_seq,
// record_index); WAL order is restored by sorting on (wal_seq,
// record_index). One row group per file.
//
//	column            Parquet type                 meaning
//	wal_seq           INT64                        WAL sequence of the record's frame
//	record_index      INT32 (DELTA_BINARY_PACKED)  the record's position in its frame
//	ts                INT64 TIMESTAMP(us, UTC)     event time
//	template_id       INT64 (DELTA_BINARY_PACKED)  template
//	template_version  INT32 (DELTA_BINARY_PACKED)  template version the record renders with
//	source            STRING (dictionary)          the line source
//	kinds             STRING (dictionary)          one item per parameter, see below
//	ts_residue        BYTE_ARRAY, optional         eventtime residue of the timestamp parameter
//	p<k>, k < 32      STRING, optional             the record's k-th parameter of kind s
//	n<k>, k < 32      INT64, optional              the record's k-th parameter of kind i, f, a or x
//	b<k>, k < 32      BYTE_ARRAY, optional         the record's k-th parameter of kind b (not UTF-8)
//	more              LIST<BYTE_ARRAY>, optional   the 33rd and later parameters of kind s or b, raw bytes
//	attrs             MAP<STRING,STRING>, optional record attributes (CDC), in input order
//
// A file holds only the optional columns some row of it uses; Delta readers
// read a column a file lacks as null. The partition columns tenant and date
// are in the Delta add action. SchemaString is the table's Delta schema.
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
//	c       covered by the timestamp item before it: this parameter and the
//	        template text before it are part of the timestamp's text
//
// A parameter is t only when the line's timestamp (eventtime.Parser, auto,
// UTC) starts exactly at a parameter and ends exactly at one, and renders
// back from the row's ts byte for byte; otherwise its parameters are typed
// one by one. A typed value always renders back to the exact original text.
// Columns are numbered per kind, not per parameter position: the record's
// first s parameter is in p0, its second in p1, its first numeric one in n0
// and so on, so a file has as many p columns as its widest record has s
// parameters. A record's 33rd and later numeric parameters are typed s or b.
//
// To reconstruct a line without this package: split the template text on
// "<*>"; for each item j of kinds write piece j (unless the item is c), then
// the parameter as its kind says (skip c), taking the next p, n or b column
// (or, past the 32nd of its kind, the next item of more); then the last
// piece.
//
// # Measurements
//
// Loghub 2k lines with headers, all 11 sets mined as one tenant, frames of
// 256 lines; records bytes only (templates are 31,416 bytes more);
// "per-dataset" sums 11 files, one tenant each. Levers, each against the
// default of the time:
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
//
// Today's records v2 file for the same rows: 366,398 bytes (all-one).
// TestSizeLoghub prints the per-dataset table; TestSizeLevers
// (RECFILE_LEVERS=1) the variants.
package recfile
