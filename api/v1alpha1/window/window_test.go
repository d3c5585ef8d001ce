package window

import (
	"strings"
	"testing"
	"time"
)

// at is an instant written as a wall clock of a zone (with its offset, so
// that ambiguous times of a fall-back day are exact).
func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse("2006-01-02 15:04 -0700", s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustNew(t *testing.T, days []string, start, end, zone string) *Window {
	t.Helper()
	w, err := New(days, start, end, zone)
	if err != nil {
		t.Fatalf("New(%v, %s, %s, %s): %v", days, start, end, zone, err)
	}
	return w
}

type probe struct {
	at   string // "2006-01-02 15:04 -0700"
	open bool
	next string // when closed: the next opening
}

func checkProbes(t *testing.T, w *Window, probes []probe) {
	t.Helper()
	for _, p := range probes {
		now := at(t, p.at)
		if got := w.Open(now); got != p.open {
			t.Errorf("%s: Open(%s) = %v, want %v", w, p.at, got, p.open)
		}
		want := now
		if !p.open {
			want = at(t, p.next)
		}
		if got := w.Next(now); !got.Equal(want) {
			t.Errorf("%s: Next(%s) = %s, want %s", w, p.at, got.In(w.Location()), want.In(w.Location()))
		}
	}
}

// 2026-12-07 is a Monday.
func TestWindowCrossingMidnightBelongsToTheDayItStarts(t *testing.T) {
	monday := mustNew(t, []string{"monday"}, "22:00", "04:00", "")
	checkProbes(t, monday, []probe{
		{at: "2026-12-07 21:59 +0000", next: "2026-12-07 22:00 +0000"},
		{at: "2026-12-07 22:00 +0000", open: true},
		{at: "2026-12-07 23:59 +0000", open: true},
		{at: "2026-12-08 01:00 +0000", open: true}, // Tuesday, in Monday's window
		{at: "2026-12-08 04:00 +0000", next: "2026-12-14 22:00 +0000"},
		{at: "2026-12-07 01:00 +0000", next: "2026-12-07 22:00 +0000"}, // Monday early: Sunday is not listed
	})
	tuesday := mustNew(t, []string{"Tue"}, "22:00", "04:00", "UTC")
	checkProbes(t, tuesday, []probe{
		{at: "2026-12-08 01:00 +0000", next: "2026-12-08 22:00 +0000"}, // Monday's night is not Tuesday's
		{at: "2026-12-09 01:00 +0000", open: true},
	})
}

func TestWindowEndEqualToStartIsTwentyFourHours(t *testing.T) {
	w := mustNew(t, []string{"MON"}, "08:00", "08:00", "")
	checkProbes(t, w, []probe{
		{at: "2026-12-07 07:59 +0000", next: "2026-12-07 08:00 +0000"},
		{at: "2026-12-07 08:00 +0000", open: true},
		{at: "2026-12-08 07:59 +0000", open: true},
		{at: "2026-12-08 08:00 +0000", next: "2026-12-14 08:00 +0000"},
	})
}

func TestWindowEveryDayAllDayIsAlwaysOpen(t *testing.T) {
	all := []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
	for _, zone := range []string{"UTC", "Europe/Berlin", "America/New_York", "Pacific/Chatham"} {
		w := mustNew(t, all, "00:00", "00:00", zone)
		// Every 7 minutes over the weeks of both of Berlin's and New
		// York's changes of 2026, and one week without.
		for _, from := range []string{"2026-03-05 00:00 +0000", "2026-03-26 00:00 +0000", "2026-10-22 00:00 +0000", "2026-10-29 00:00 +0000", "2026-12-07 00:00 +0000"} {
			start := at(t, from)
			for now := start; now.Before(start.Add(7 * 24 * time.Hour)); now = now.Add(7 * time.Minute) {
				if !w.Open(now) || !w.Next(now).Equal(now) {
					t.Fatalf("%s: closed at %s (Next %s)", w, now, w.Next(now))
				}
			}
		}
	}
}

func TestWindowNextAcrossAWeek(t *testing.T) {
	w := mustNew(t, []string{"Monday"}, "10:00", "11:00", "Europe/Berlin")
	checkProbes(t, w, []probe{
		{at: "2026-12-07 10:30 +0100", open: true},
		{at: "2026-12-07 11:00 +0100", next: "2026-12-14 10:00 +0100"},
		{at: "2026-12-08 09:00 +0100", next: "2026-12-14 10:00 +0100"},
		{at: "2026-12-13 23:59 +0100", next: "2026-12-14 10:00 +0100"},
		{at: "2026-12-14 08:59 +0000", next: "2026-12-14 10:00 +0100"}, // 09:59 in Berlin
	})
	weekend := mustNew(t, []string{"sat", "SUNDAY"}, "23:00", "01:00", "America/New_York")
	checkProbes(t, weekend, []probe{
		{at: "2026-12-07 12:00 -0500", next: "2026-12-12 23:00 -0500"},
		{at: "2026-12-13 00:30 -0500", open: true}, // Saturday's window
		{at: "2026-12-13 01:00 -0500", next: "2026-12-13 23:00 -0500"},
		{at: "2026-12-14 00:59 -0500", open: true}, // Sunday's window, on Monday
		{at: "2026-12-14 01:00 -0500", next: "2026-12-19 23:00 -0500"},
	})
}

// America/New_York springs forward on 2026-03-08 at 02:00 EST to 03:00 EDT;
// Europe/Berlin on 2026-03-29 at 02:00 CET to 03:00 CEST.
func TestWindowSpringForwardOpensAtTheFirstInstantAfterTheGap(t *testing.T) {
	ny := mustNew(t, []string{"Sun"}, "02:30", "03:30", "America/New_York")
	checkProbes(t, ny, []probe{
		{at: "2026-03-08 01:59 -0500", next: "2026-03-08 03:00 -0400"},
		{at: "2026-03-08 03:00 -0400", open: true},
		{at: "2026-03-08 03:29 -0400", open: true},
		{at: "2026-03-08 03:30 -0400", next: "2026-03-15 02:30 -0400"},
		{at: "2026-03-01 02:29 -0500", next: "2026-03-01 02:30 -0500"}, // a week before: as written
	})
	berlin := mustNew(t, []string{"sun"}, "02:00", "05:00", "Europe/Berlin")
	checkProbes(t, berlin, []probe{
		{at: "2026-03-29 01:59 +0100", next: "2026-03-29 03:00 +0200"},
		{at: "2026-03-29 03:00 +0200", open: true},
		{at: "2026-03-29 04:59 +0200", open: true},
		{at: "2026-03-29 05:00 +0200", next: "2026-04-05 02:00 +0200"},
	})
	// An end inside the gap closes at the first instant after it.
	gapEnd := mustNew(t, []string{"Sunday"}, "01:00", "02:30", "America/New_York")
	checkProbes(t, gapEnd, []probe{
		{at: "2026-03-08 01:59 -0500", open: true},
		{at: "2026-03-08 03:00 -0400", next: "2026-03-15 01:00 -0400"},
	})
}

// America/New_York falls back on 2026-11-01 at 02:00 EDT to 01:00 EST;
// Europe/Berlin on 2026-10-25 at 03:00 CEST to 02:00 CET.
func TestWindowFallBackOpensOnceAndSkipsNoDay(t *testing.T) {
	ny := mustNew(t, []string{"Sun"}, "01:00", "01:30", "America/New_York")
	checkProbes(t, ny, []probe{
		{at: "2026-11-01 00:59 -0400", next: "2026-11-01 01:00 -0400"},
		{at: "2026-11-01 01:00 -0400", open: true},
		{at: "2026-11-01 01:29 -0400", open: true},
		{at: "2026-11-01 01:30 -0400", next: "2026-11-08 01:00 -0500"},
		{at: "2026-11-01 01:00 -0500", next: "2026-11-08 01:00 -0500"}, // the second 01:00 does not open it again
		{at: "2026-11-01 01:15 -0500", next: "2026-11-08 01:00 -0500"},
	})
	// 02:00 to 03:00 in Berlin covers both of that night's 02:xx hours, once.
	berlin := mustNew(t, []string{"Sunday"}, "02:00", "03:00", "Europe/Berlin")
	checkProbes(t, berlin, []probe{
		{at: "2026-10-25 01:59 +0200", next: "2026-10-25 02:00 +0200"},
		{at: "2026-10-25 02:00 +0200", open: true},
		{at: "2026-10-25 02:59 +0200", open: true},
		{at: "2026-10-25 02:30 +0100", open: true},
		{at: "2026-10-25 03:00 +0100", next: "2026-11-01 02:00 +0100"},
	})
	// A daily window opens exactly once a day across both changes.
	for _, c := range []struct{ zone, from string }{
		{"America/New_York", "2026-10-28 12:00 -0400"}, {"America/New_York", "2026-03-04 12:00 -0500"},
		{"Europe/Berlin", "2026-10-21 12:00 +0200"}, {"Europe/Berlin", "2026-03-25 12:00 +0100"},
	} {
		daily := mustNew(t, []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}, "01:30", "02:15", c.zone)
		now, last := at(t, c.from), time.Time{}
		for i := 0; i < 10; i++ {
			next := daily.Next(now)
			local := next.In(daily.Location())
			if !last.IsZero() && local.YearDay() != last.YearDay()+1 {
				t.Errorf("%s: after %s the next opening is %s: a day skipped or repeated", daily, last, local)
			}
			if local.Hour() != 1 || local.Minute() != 30 {
				t.Errorf("%s: opens at %s, want 01:30", daily, local)
			}
			last = local
			// Closed again 3 hours later: 45 minutes of wall clock, 1h45 on
			// New York's fall-back night (01:30 EDT to 02:15 EST).
			now = next.Add(3 * time.Hour)
			if daily.Open(now) {
				t.Errorf("%s: still open at %s", daily, now.In(daily.Location()))
			}
		}
	}
}

func TestNewRefusesBadFields(t *testing.T) {
	cases := []struct {
		days             []string
		start, end, zone string
		want             string
	}{
		{nil, "01:00", "02:00", "", "no days"},
		{[]string{"Mon", "Funday"}, "01:00", "02:00", "", `"Funday" is not a day of the week`},
		{[]string{"mo"}, "01:00", "02:00", "", `"mo" is not a day of the week`},
		{[]string{"Mon"}, "1:00", "02:00", "", `start: "1:00" is not a time of day`},
		{[]string{"Mon"}, "24:00", "02:00", "", `start: "24:00"`},
		{[]string{"Mon"}, "+1:00", "02:00", "", `start: "+1:00"`},
		{[]string{"Mon"}, "01:00", "02:60", "", `end: "02:60"`},
		{[]string{"Mon"}, "01:00", "0200", "", `end: "0200"`},
		{[]string{"Mon"}, "01:00", "02:00", "Mars/Olympus", `"Mars/Olympus" is not a known IANA time zone`},
		{[]string{"Mon"}, "01:00", "02:00", "Local", `"Local" is not an IANA time zone`},
	}
	for _, c := range cases {
		_, err := New(c.days, c.start, c.end, c.zone)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%v, %q, %q, %q) = %v, want an error with %q", c.days, c.start, c.end, c.zone, err, c.want)
		}
	}
	if w, err := New([]string{" Wednesday ", "SAT", "fri"}, "23:05", "00:00", "Asia/Kolkata"); err != nil || w.String() != "Wed, Fri, Sat 23:05-00:00 Asia/Kolkata" {
		t.Errorf("New = %v, %v", w, err)
	}
}
