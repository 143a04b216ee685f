// Command quarry is the one binary of the quarry pipeline: `quarry run` runs
// every stage in one process on an embedded NATS server, and each role also
// runs as its own process (`quarry producer`, `miner`, `encoder`,
// `committer`) against an external NATS cluster and lake.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	_ "github.com/quarrylake/quarry/internal/earlyheap" // huge pages for the heap the inits allocate
)

// env is what a subcommand may touch of the process.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// errUsage marks a command-line mistake: exit code 2.
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: quarry <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'quarry <command> -h' for a command's flags.")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runMain(ctx, &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:]))
}

func runMain(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "quarry: unknown command %q\n\n", args[0])
		usage(e.stderr)
		return 2
	}
	stopProfiles, err := startProfiles(e.getenv)
	if err != nil {
		fmt.Fprintf(e.stderr, "quarry %s: %v\n", c.name, err)
		return 1
	}
	err = c.run(ctx, e, args[1:])
	if perr := stopProfiles(); perr != nil {
		fmt.Fprintf(e.stderr, "quarry %s: profiles: %v\n", c.name, perr)
	}
	if err != nil {
		if _, ok := err.(errUsage); ok {
			fmt.Fprintf(e.stderr, "quarry %s: %v\n", c.name, err)
			return 2
		}
		if err == errHelp {
			return 0
		}
		fmt.Fprintf(e.stderr, "quarry %s: %v\n", c.name, err)
		return 1
	}
	return 0
}
