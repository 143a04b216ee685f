// Package subscribe follows quarry's lake: it delivers every committed
// record, once, in commit order, from any starting point, and then each new
// record as the committer commits it.
//
//	sub, err := subscribe.Subscribe(ctx, subscribe.Config{
//		Lake: "s3://logs/lake", JS: js, Tenant: "acme", Query: `level:error`,
//		From: subscribe.Beginning(),
//	})
//	defer sub.Close()
//	for {
//		rec, err := sub.Next(ctx)
//		if err != nil { ... }
//		// handle rec; save sub.Cursor().String() when it suits
//	}
//
// # Delivery contract
//
// The Delta log of the records table is the truth: a record is delivered
// only once the commit that added its file is durable, and only by the
// first commit whose high-water (the txn of appId "quarry") covers its WAL
// sequence. The committer commits an accepted report's files at once, also
// above the high-water: with several encoders a later WAL batch can be
// committed before an earlier one that another encoder reports after it.
// The high-water is the committer's promise that every WAL sequence at or
// below it is committed, so releasing a record only under it makes
// delivery follow the WAL: the subscriber holds files with rows above the
// high-water and releases their rows when a commit raises it. Commits are
// read in version order; a commit releases, tenant by tenant in name
// order, the rows with WAL sequences above the previous commit's
// high-water and at or below its own, from the files it adds and the files
// held, in (wal_seq, record_index) order. So each tenant's records arrive
// in WAL order whatever the number of encoders, and the order depends on
// the log alone, so a resumed subscription delivers the same. (Across
// tenants the order is that of the commits, then of the tenants' names.)
// Files without WAL sequences (no quarry.seqs tag) are released whole by
// the commit that adds them. A file read for a release whose other rows
// (above the high-water) use a template version not committed yet is read
// again once the high-water covers the file.
// Adds with dataChange=false (compaction rewrites) carry rows already
// delivered and are skipped; removes deliver nothing.
//
// A Cursor (version, file, row) names the position after the last record
// Next returned: the commit that released it, the tenant's index among
// the tenants that commit releases (in name order) and the row's index in
// that tenant's released rows. A subscription started After(cursor)
// rebuilds the files held before the cursor's version from the table as
// of the version before it, and delivers exactly the records after it:
// no gap, no duplicate, whether the position is in the lake's past or at
// its live edge, across restarts of the subscriber, the committer or NATS.
// A version whose predecessor the log no longer reaches (cleaned up) is
// ErrExpired.
//
// Below the newest committed version the subscriber reads the Delta log
// commit by commit. At the live edge it waits for the committer's commit
// notices (streams.NoticeStream, format notice/1) and takes each commit's
// adds from its notice; a notice for a later version than the one it needs
// (a gap: notices lost to a crash, or aged out of the stream) makes it read
// the missing versions from the Delta log, and without notices (no NATS, or
// a quiet stream) it looks at the log every PollInterval. While its notice
// consumer cannot be started (NATS down or restarting) it looks at the log
// and tries again after a backoff (100ms doubling to 5s, never longer than
// PollInterval). A notice only says when and where to read: correctness
// never depends on it.
//
// A file removed by a later commit and vacuumed before the subscriber
// reached it is found through that commit: a compaction (removes with
// dataChange=false) moved its rows into the files it added, and the
// subscriber reads them there, selected by the file's WAL sequences (its
// quarry.seqs tag); a retention removal (dataChange=true) took its rows
// away, and it is skipped with a warning, but for the rows a retention
// rewrite of the same commit kept (an add with dataChange=false, when
// retention cut a file of a table partitioned by tenant), read there. Any other unreadable file is an
// error from Next, and the cursor stays before it.
package subscribe
