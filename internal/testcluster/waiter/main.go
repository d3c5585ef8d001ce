// Command waiter is the one process of the images that real nodes run
// (testcluster.WaiterImage, and the pause image of every pod sandbox): it
// blocks until SIGTERM or SIGINT, says so, waits EXIT_DELAY (a Go duration,
// default none) and exits 0. With RELEASE_FILE set it also waits, after
// SIGTERM, until that file exists, so that a test decides when the pod ends.
// With SIGNAL_LOG set it also appends each of those lines to that file, so a
// test can read them after the pod is gone. With ONCE set it does not wait:
// it says its line (ONCE's value, e.g. a step's work) and exits 0, as a
// Job's container does.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	delay, err := time.ParseDuration(envOr("EXIT_DELAY", "0s"))
	if err != nil {
		say("bad EXIT_DELAY: %v", err)
		os.Exit(2)
	}
	if once := os.Getenv("ONCE"); once != "" {
		say("%s", once)
		return
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	say("waiting for SIGTERM")
	got := <-sigs
	start := time.Now()
	name := "SIGTERM"
	if got == syscall.SIGINT {
		name = "SIGINT"
	}
	release := os.Getenv("RELEASE_FILE")
	if release == "" {
		say("got %s, exiting in %s", name, delay)
	} else {
		say("got %s, exiting in %s once %s exists", name, delay, release)
	}
	time.Sleep(delay)
	for release != "" {
		if _, err := os.Stat(release); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	say("exiting after %s", time.Since(start).Round(time.Millisecond))
}

func say(format string, args ...any) {
	line := fmt.Sprintf("%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	fmt.Print(line)
	if path := os.Getenv("SIGNAL_LOG"); path != "" {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			_, _ = f.WriteString(line)
			_ = f.Close()
		}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
