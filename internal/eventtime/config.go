package eventtime

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Mode values besides layout names.
const (
	ModeAuto = "auto" // find any known layout near the start of the line
	ModeNone = "none" // never parse a timestamp
)

// Config is a line source's event-time setting. It is meant to be inlined
// into the source's config, so the keys are `timestamp` and `timezone`.
type Config struct {
	// Mode is auto, none, or one layout name from the package doc table
	// (iso8601 also accepts iso8601-space; epoch accepts every epoch-*).
	// Empty means auto.
	Mode string `yaml:"timestamp"`
	// Zone is the time zone of layouts that carry none: UTC, Local, an
	// IANA name (Europe/Berlin) or a fixed offset (+05:30). Empty means UTC.
	Zone string `yaml:"timezone"`
}

// Sentinel errors of Validate and New.
var (
	ErrUnknownLayout = errors.New("unknown timestamp layout")
	ErrUnknownZone   = errors.New("unknown time zone")
)

// Defaults is auto-detection with zone-less times in UTC.
func Defaults() Config { return Config{Mode: ModeAuto, Zone: "UTC"} }

// Validate reports every problem of c, naming the key.
func (c Config) Validate() error {
	var errs []error
	if _, err := modeMask(c.Mode); err != nil {
		errs = append(errs, fmt.Errorf("timestamp: %w", err))
	}
	if _, err := loadZone(c.Zone); err != nil {
		errs = append(errs, fmt.Errorf("timezone: %w", err))
	}
	return errors.Join(errs...)
}

// allLayouts is every layout; autoLayouts those auto tries: all but a
// date alone (yyyy.mm.dd), which names a day rather than a line's time and
// looks like a calendar version number.
const (
	allLayouts  = uint32(1<<numLayouts-1) &^ 1
	autoLayouts = allLayouts &^ (1 << LayoutDotDate)
)

// modeMask is the set of layouts (bit i for LayoutID i) a mode tries.
func modeMask(mode string) (uint32, error) {
	switch mode {
	case "", ModeAuto:
		return autoLayouts, nil
	case ModeNone:
		return 0, nil
	case "iso8601":
		return 1<<LayoutISO8601 | 1<<LayoutISO8601Sp, nil
	case "epoch":
		return 1<<LayoutEpochSec | 1<<LayoutEpochMilli | 1<<LayoutEpochMicro | 1<<LayoutEpochNano, nil
	}
	for id := LayoutID(1); id < numLayouts; id++ {
		if layoutNames[id] == mode {
			return 1 << id, nil
		}
	}
	return 0, fmt.Errorf("%w %q (want auto, none or one of %s)", ErrUnknownLayout, mode,
		strings.Join(layoutNames[1:], ", "))
}

// loadZone resolves a Config.Zone.
func loadZone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC", "Z":
		return time.UTC, nil
	}
	if name[0] == '+' || name[0] == '-' {
		b := []byte(name)
		var off int
		ok := false
		switch len(b) {
		case 3: // +hh
			if h, k := num2(b, 1); k {
				off, ok = h*3600, h <= 23
			}
		case 5, 6: // +hhmm, +hh:mm
			h, k1 := num2(b, 1)
			j := 3
			if len(b) == 6 {
				k1 = k1 && b[3] == ':'
				j = 4
			}
			m, k2 := num2(b, j)
			off, ok = h*3600+m*60, k1 && k2 && h <= 23 && m <= 59
		}
		if !ok {
			return nil, fmt.Errorf("%w %q (want an IANA name or ±hh:mm)", ErrUnknownZone, name)
		}
		if b[0] == '-' {
			off = -off
		}
		return time.FixedZone(name, off), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrUnknownZone, name, err)
	}
	return loc, nil
}
