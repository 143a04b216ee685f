package subscribe_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/subscribe"
)

// Example is the program of docs/subscribers.md: it follows tenant acme's
// errors and keeps its cursor in a file, so that a restart resumes exactly
// after the last record it handled.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	nc, err := nats.Connect("nats://localhost:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}

	const cursorFile = "acme-errors.cursor"
	from := subscribe.Beginning()
	if b, err := os.ReadFile(cursorFile); err == nil {
		c, err := subscribe.ParseCursor(strings.TrimSpace(string(b)))
		if err != nil {
			log.Fatal(err)
		}
		from = subscribe.After(c)
	}

	sub, err := subscribe.Subscribe(ctx, subscribe.Config{
		Lake:   "s3://logs/lake", // or file:///var/lib/quarry/lake
		JS:     js,
		Tenant: "acme",
		Query:  "error -timeout",
		From:   from,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	for {
		rec, err := sub.Next(ctx)
		if errors.Is(err, context.Canceled) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %s %s\n", rec.TS.Format("15:04:05"), rec.Source, rec.Line)
		// Save after handling: a crash before this line delivers the
		// record again (at least once for this program); save before
		// handling for at most once.
		if err := os.WriteFile(cursorFile, []byte(sub.Cursor().String()+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
