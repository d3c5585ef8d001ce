// Package window is the arithmetic of a rollout's maintenance window
// (spec.window): a start and an end on some days of the week, in a time
// zone. The operator asks it whether the window is open and when it opens
// next; the validation package and the provider parse with it. It imports
// the standard library only.
//
// The rules:
//   - The window belongs to the day it starts on: Mon 22:00–04:00 is open
//     on Tuesday at 01:00 only if Monday is one of its days.
//   - An end at or before the start closes the window on the next day; an
//     end equal to the start makes a window of 24 hours, so a window of
//     every day from 00:00 to 00:00 is always open.
//   - Start and end are wall-clock times of the zone, so the window follows
//     daylight saving changes. On a spring-forward day a start (or end) that
//     does not exist is the first instant after the gap (02:30 in
//     America/New_York on that day is 03:00 EDT); on a fall-back day a time
//     that occurs twice is its first occurrence, so the window opens once.
package window

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is a parsed maintenance window.
type Window struct {
	// days[d] is whether the window starts on weekday d.
	days [7]bool
	// start and end are minutes after midnight.
	start, end int
	loc        *time.Location
}

var dayNames = map[string]time.Weekday{}

func init() {
	for d := time.Sunday; d <= time.Saturday; d++ {
		name := strings.ToLower(d.String())
		dayNames[name] = d
		dayNames[name[:3]] = d
	}
}

// ParseDay reads an English day name, full or three letters, any case.
func ParseDay(s string) (time.Weekday, error) {
	d, ok := dayNames[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return 0, fmt.Errorf("%q is not a day of the week: use an English day name, full or three letters (Monday, mon, SAT)", s)
	}
	return d, nil
}

// ParseClock reads HH:MM (24 hours, two digits each) as minutes after
// midnight.
func ParseClock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	if ok && twoDigits(h) && twoDigits(m) {
		hh, _ := strconv.Atoi(h)
		mm, _ := strconv.Atoi(m)
		if hh < 24 && mm < 60 {
			return hh*60 + mm, nil
		}
	}
	return 0, fmt.Errorf("%q is not a time of day as HH:MM, 24 hours (e.g. 22:00)", s)
}

func twoDigits(s string) bool {
	return len(s) == 2 && s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9'
}

// LoadZone loads an IANA time zone; empty is UTC. "Local" is refused: the
// window must mean the same on every machine that reads it.
func LoadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("%q is not an IANA time zone: name one, e.g. Europe/Berlin or UTC", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not a known IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)", name)
	}
	return loc, nil
}

// New parses a window from its fields as spec.window holds them. The error
// says which field is wrong; the validation package names the field paths.
func New(days []string, start, end, timeZone string) (*Window, error) {
	w := &Window{}
	if len(days) == 0 {
		return nil, fmt.Errorf("no days: list the days the window starts on")
	}
	for _, s := range days {
		d, err := ParseDay(s)
		if err != nil {
			return nil, err
		}
		w.days[d] = true
	}
	var err error
	if w.start, err = ParseClock(start); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	if w.end, err = ParseClock(end); err != nil {
		return nil, fmt.Errorf("end: %w", err)
	}
	if w.loc, err = LoadZone(timeZone); err != nil {
		return nil, err
	}
	return w, nil
}

// Location is the window's time zone.
func (w *Window) Location() *time.Location { return w.loc }

// span is the window that starts on the day y-m-d of the window's zone, as
// instants: open from opens, closed again at closes.
func (w *Window) span(y int, m time.Month, d int) (opens, closes time.Time) {
	opens = wallClock(y, m, d, w.start, w.loc)
	endDay := d
	if w.end <= w.start {
		endDay++
	}
	return opens, wallClock(y, m, endDay, w.end, w.loc)
}

// wallClock is the instant the zone's clock shows minute of a day: the
// first of two when that time occurs twice (a fall-back day), and the first
// instant after the gap when it does not occur (a spring-forward day).
// time.Date picks either in both cases, so the candidates are the wall
// time less each offset the zone has around that day.
func wallClock(y int, m time.Month, d, minute int, loc *time.Location) time.Time {
	want := time.Date(y, m, d, minute/60, minute%60, 0, 0, time.UTC) // the wall clock, read as UTC
	var candidates []time.Time
	for _, probe := range []time.Duration{-48 * time.Hour, -12 * time.Hour, 0, 12 * time.Hour, 48 * time.Hour} {
		_, off := want.Add(probe).In(loc).Zone()
		candidates = append(candidates, want.Add(-time.Duration(off)*time.Second))
	}
	var first time.Time
	for _, c := range candidates {
		if wall(c, loc).Equal(want) && (first.IsZero() || c.Before(first)) {
			first = c
		}
	}
	if !first.IsZero() {
		return first
	}
	// A gap: the clock jumps over want, at the start of the zone period
	// (EDT, CEST) in which a candidate lands.
	for _, c := range candidates {
		start, _ := c.In(loc).ZoneBounds()
		if !start.IsZero() && wall(start, loc).After(want) && !wall(start.Add(-time.Second), loc).After(want) &&
			(first.IsZero() || start.Before(first)) {
			first = start
		}
	}
	if !first.IsZero() {
		return first
	}
	return time.Date(y, m, d, minute/60, minute%60, 0, 0, loc)
}

// wall is t's wall clock in loc, read as UTC, so wall clocks compare.
func wall(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// Open says whether the window is open at t.
func (w *Window) Open(t time.Time) bool {
	lt := t.In(w.loc)
	// A window that contains t started on t's day or on the day before.
	for back := 0; back <= 1; back++ {
		y, m, d := lt.Date()
		d -= back
		day := time.Date(y, m, d, 12, 0, 0, 0, w.loc)
		if !w.days[day.Weekday()] {
			continue
		}
		opens, closes := w.span(day.Date())
		if !t.Before(opens) && t.Before(closes) {
			return true
		}
	}
	return false
}

// Next is the first opening of the window after t, or t itself when the
// window is open at t. The zero time when it never opens (no day: New
// refuses that).
func (w *Window) Next(t time.Time) time.Time {
	if w.Open(t) {
		return t
	}
	lt := t.In(w.loc)
	y, m, d := lt.Date()
	// Eight days: today's opening may be past, and the same weekday next
	// week may be the only one.
	for i := 0; i <= 8; i++ {
		day := time.Date(y, m, d+i, 12, 0, 0, 0, w.loc)
		if !w.days[day.Weekday()] {
			continue
		}
		if open, _ := w.span(day.Date()); open.After(t) {
			return open
		}
	}
	return time.Time{}
}

// String is the window as a person reads it: "Mon, Tue 22:00-04:00
// Europe/Berlin".
func (w *Window) String() string {
	var names []string
	for d := time.Sunday; d <= time.Saturday; d++ {
		// Monday first, as a week is written in most zones' calendars.
		wd := (d + 1) % 7
		if w.days[wd] {
			names = append(names, wd.String()[:3])
		}
	}
	return fmt.Sprintf("%s %02d:%02d-%02d:%02d %s", strings.Join(names, ", "), w.start/60, w.start%60, w.end/60, w.end%60, w.loc)
}
