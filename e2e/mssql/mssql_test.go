//go:build e2e

// Package mssql is the end-to-end test of quarry's SQL Server CDC producer
// against a real SQL Server (the official image, SQL Agent on) in Docker:
//
//	make e2e-mssql
//
// which is
//
//	docker image inspect mcr.microsoft.com/mssql/server:2022-latest >/dev/null 2>&1 || docker pull mcr.microsoft.com/mssql/server:2022-latest
//	TESTCONTAINERS_RYUK_DISABLED=true go test -tags e2e -count=1 -timeout 15m -v ./e2e/mssql/...
//
// Without Docker or without the image locally the test skips and says why.
// The image is linux/amd64 only.
package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/producer/cdc"
	"github.com/quarrylake/quarry/producer/sqlserver"
	"github.com/quarrylake/quarry/streams"
)

const (
	image    = "mcr.microsoft.com/mssql/server:2022-latest"
	password = "Quarry-e2e-Passw0rd!"
)

func startSQLServer(t *testing.T) (dsnMaster, dsnShop string) {
	t.Helper()
	t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Skipf("docker is not reachable (%v): this test needs Docker and the image %s", err, image)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		t.Skipf("docker is not reachable (%v): this test needs Docker and the image %s", err, image)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		t.Skipf("image %s is not present locally (docker pull %s, or run make e2e-mssql): %v", image, image, err)
	}
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithEnv(map[string]string{
			"ACCEPT_EULA":         "Y",
			"MSSQL_SA_PASSWORD":   password,
			"MSSQL_PID":           "Developer",
			"MSSQL_AGENT_ENABLED": "true",
		}),
		testcontainers.WithExposedPorts("1433/tcp"),
		testcontainers.WithWaitStrategy(wait.ForLog("SQL Server is now ready for client connections").WithStartupTimeout(4*time.Minute)),
	)
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatalf("start %s: %v", image, err)
	}
	hp, err := ctr.PortEndpoint(ctx, "1433/tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("sqlserver://sa:%s@%s", url.QueryEscape(password), hp)
	return base + "?database=master&encrypt=disable", base + "?database=shop&encrypt=disable"
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.ExecContext(ctx, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func openSQL(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return db
		}
		if time.Now().After(deadline) {
			t.Fatalf("sql server login: %v", err)
		}
		time.Sleep(time.Second)
	}
}

func records(t *testing.T, js jetstream.JetStream, subject string) []streams.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		t.Fatal(err)
	}
	var out []streams.Record
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := streams.DecodeFrame(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f.Records...)
		seq = m.Sequence + 1
	}
}

func attr(r streams.Record, k string) string {
	for _, a := range r.Attrs {
		if a.Key == k {
			return a.Value
		}
	}
	return ""
}

func waitRecords(t *testing.T, js jetstream.JetStream, subject string, n int) []streams.Record {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // the capture job polls every 5s
	for {
		recs := records(t, js, subject)
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d records, want %d", subject, len(recs), n)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func TestCDCProducerAgainstSQLServer(t *testing.T) {
	dsnMaster, dsnShop := startSQLServer(t)
	master := openSQL(t, dsnMaster)
	mustExec(t, master, "CREATE DATABASE shop")
	mustExec(t, master, "ALTER DATABASE shop SET ALLOW_SNAPSHOT_ISOLATION ON") // the bootstrap reads at SNAPSHOT isolation
	shop := openSQL(t, dsnShop)
	mustExec(t, shop, "EXEC sys.sp_cdc_enable_db")
	mustExec(t, shop, `CREATE TABLE dbo.orders (
		id int NOT NULL PRIMARY KEY, msg nvarchar(200) NULL, level varchar(10) NULL,
		amount decimal(10,2) NULL, price money NULL, ok bit NULL, ratio real NULL,
		g uniqueidentifier NULL, at datetime2(3) NULL, ts datetimeoffset(0) NULL, v sql_variant NULL, raw varbinary(8) NULL)`)
	mustExec(t, shop, `INSERT INTO dbo.orders (id, msg, level, amount, price, ok, ratio, g, at, ts, v, raw) VALUES
		(1, N'order 1 created', 'info', 12.50, 3.25, 1, 0.5, '6F9619FF-8B86-D011-B42D-00C04FC964FF', '2026-11-29T10:00:00.123', '2026-11-29T10:00:00+02:00', CAST(42 AS int), 0x00AB),
		(2, N'order 2 created', 'warn', NULL, NULL, 0, NULL, NULL, NULL, NULL, CAST(N'x' AS nvarchar(5)), NULL)`)
	mustExec(t, shop, `EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL, @capture_instance = N'dbo_orders'`)

	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := sqlserver.Open(ctx, dsnShop, sqlserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := cdc.Config{
		Database:            "shop",
		CaptureInstances:    []string{"dbo_orders"},
		TableDefaults:       cdc.TableConfig{Text: []string{"msg"}, Attrs: []string{"level", "amount", "price", "ok", "ratio", "g", "at", "ts", "v", "raw"}},
		PollInterval:        200 * time.Millisecond,
		SchemaCheckInterval: time.Second,
	}
	deps := cdc.Deps{JS: js, Source: src}
	g, err := cdc.Start(ctx, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	subj := streams.CDCSubject("shop", "dbo_orders")

	// Snapshot at a consistent LSN.
	recs := waitRecords(t, js, subj, 2)
	r := recs[0]
	want := map[string]string{"_op": "snapshot", "id": "1", "level": "info", "amount": "12.50", "price": "3.2500", "ok": "1", "ratio": "0.5",
		"g": "6F9619FF-8B86-D011-B42D-00C04FC964FF", "at": "2026-11-29T10:00:00.123", "ts": "2026-11-29T10:00:00+02:00", "v": "42", "raw": "0x00AB"}
	for k, v := range want {
		if got := attr(r, k); got != v {
			t.Errorf("snapshot attr %s = %q want %q (attrs %v)", k, got, v, r.Attrs)
		}
	}
	if r.Text != "order 1 created" || attr(recs[1], "v") != "x" {
		t.Errorf("snapshot records %v", recs)
	}

	// Changes: one transaction with several rows, an update, a delete.
	mustExec(t, shop, `BEGIN TRAN;
		INSERT INTO dbo.orders (id, msg, level) VALUES (3, N'order 3 created', 'info'), (4, N'order 4 created', 'info');
		UPDATE dbo.orders SET msg = N'order 1 shipped' WHERE id = 1;
		DELETE FROM dbo.orders WHERE id = 2;
		COMMIT`)
	recs = waitRecords(t, js, subj, 7)
	var ops []string
	for _, r := range recs[2:] {
		ops = append(ops, attr(r, "_op")+":"+r.Text)
	}
	if got := strings.Join(ops, ","); got != "insert:order 3 created,insert:order 4 created,update_before:order 1 created,update_after:order 1 shipped,delete:order 2 created" {
		t.Errorf("changes %s", got)
	}
	if attr(recs[2], "_lsn") != attr(recs[6], "_lsn") || recs[2].TS == 0 {
		t.Errorf("one transaction, one LSN and a commit time: %v %v", recs[2].Attrs, recs[6].Attrs)
	}

	// Restart: nothing twice.
	g.Stop()
	if errs := g.Wait(); len(errs) != 0 {
		t.Fatal(errs)
	}
	mustExec(t, shop, `INSERT INTO dbo.orders (id, msg) VALUES (5, N'order 5 created')`)
	g, err = cdc.Start(ctx, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	recs = waitRecords(t, js, subj, 8)
	time.Sleep(2 * time.Second)
	if n := len(records(t, js, subj)); n != 8 {
		t.Fatalf("after restart %d records, want 8", n)
	}

	// Schema change: a second capture instance takes over.
	mustExec(t, shop, `ALTER TABLE dbo.orders ADD region varchar(10) NULL`)
	mustExec(t, shop, `EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL, @capture_instance = N'dbo_orders_v2'`)
	mustExec(t, shop, `INSERT INTO dbo.orders (id, msg, region) VALUES (6, N'order 6 created', 'eu')`)
	v2 := waitRecords(t, js, streams.CDCSubject("shop", "dbo_orders_v2"), 1)
	if v2[0].Text != "order 6 created" {
		t.Errorf("v2 %v", v2)
	}
	if n := len(records(t, js, subj)); n != 8 {
		t.Errorf("v1 got %d records after the takeover", n)
	}

	// Purged range: the cleanup job removes changes the stopped stream has
	// not read.
	g.Stop()
	if errs := g.Wait(); len(errs) != 0 {
		t.Fatal(errs)
	}
	mustExec(t, shop, `INSERT INTO dbo.orders (id, msg) VALUES (7, N'order 7 created')`)
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		if err := shop.QueryRow(`SELECT COUNT(*) FROM cdc.dbo_orders_v2_CT WHERE id = 7`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("capture job did not capture id 7")
		}
		time.Sleep(500 * time.Millisecond)
	}
	mustExec(t, shop, `INSERT INTO dbo.orders (id, msg) VALUES (8, N'order 8 created')`)
	time.Sleep(7 * time.Second) // let the capture job log id 8 and move the max LSN
	mustExec(t, shop, `DECLARE @lw binary(10) = sys.fn_cdc_get_max_lsn();
		EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders_v2', @low_water_mark = @lw, @threshold = 100000`)
	g, err = cdc.Start(ctx, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for g.Streams()[0].Ready() == nil || !strings.Contains(g.Streams()[0].Ready().Error(), "stopped") {
		if time.Now().After(deadline) {
			t.Fatalf("no purge error; ready: %v", g.Streams()[0].Ready())
		}
		time.Sleep(200 * time.Millisecond)
	}
	g.Stop()
	errs := g.Wait()
	if !errors.Is(errs["dbo_orders"], cdc.ErrPurgedRange) {
		t.Fatalf("errors %v", errs)
	}
}
