package schemas

import (
	"errors"
	"time"
	"unicode/utf8"
)

// badRune is what decodeRune returns for bytes that are not UTF-8. It is
// not utf8.RuneError: U+FFFD itself, properly encoded, is a valid character
// (and what a lone surrogate escape decodes to).
const badRune = -1

func decodeRune(b []byte) (rune, int) {
	r, size := utf8.DecodeRune(b)
	if r == utf8.RuneError && size <= 1 {
		return badRune, size
	}
	return r, size
}

func appendRune(b []byte, r rune) []byte { return utf8.AppendRune(b, r) }

var errTimestamp = errors.New("not an RFC 3339 timestamp (want e.g. 2026-11-01T08:00:00Z or 2026-11-01T16:00:00.250+08:00)")

// ParseTimestampMS parses an RFC 3339 timestamp (UTC "Z" or a ±hh:mm offset, up to
// millisecond precision) into Unix milliseconds. Fractional digits beyond the
// millisecond must be zero: the wire format does not carry finer time, and silently
// truncating it would make two readers disagree.
func ParseTimestampMS(b []byte) (int64, error) {
	// YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return 0, errTimestamp
	}
	year, ok1 := digits(b[0:4])
	month, ok2 := digits(b[5:7])
	day, ok3 := digits(b[8:10])
	hour, ok4 := digits(b[11:13])
	minute, ok5 := digits(b[14:16])
	sec, ok6 := digits(b[17:19])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return 0, errTimestamp
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || sec > 59 {
		return 0, errors.New("date or time out of range")
	}
	i := 19
	var ms int64
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			d := int64(b[i] - '0')
			switch n := i - start; {
			case n < 3:
				ms = ms*10 + d
			case d != 0:
				return 0, errors.New("more than millisecond precision")
			}
			i++
		}
		n := i - start
		if n == 0 {
			return 0, errTimestamp
		}
		for ; n < 3; n++ {
			ms *= 10
		}
	}
	if i >= len(b) {
		return 0, errors.New("missing time zone offset (Z or ±hh:mm)")
	}
	var off int64
	switch b[i] {
	case 'Z':
		i++
	case '+', '-':
		if len(b)-i != 6 || b[i+3] != ':' {
			return 0, errTimestamp
		}
		oh, okh := digits(b[i+1 : i+3])
		om, okm := digits(b[i+4 : i+6])
		if !okh || !okm || oh > 23 || om > 59 {
			return 0, errors.New("time zone offset out of range")
		}
		off = int64(oh*3600+om*60) * 1000
		if b[i] == '-' {
			off = -off
		}
		i += 6
	default:
		return 0, errTimestamp
	}
	if i != len(b) {
		return 0, errTimestamp
	}
	days := daysFromCivil(year, month, day)
	t := (days*86400+int64(hour*3600+minute*60+sec))*1000 + ms - off
	if t < minUnixMS || t > maxUnixMS {
		return 0, errors.New("out of range (years 1970-9999)")
	}
	return t, nil
}

// AppendTimestampMS appends ms as RFC 3339 UTC with milliseconds when non-zero.
func AppendTimestampMS(b []byte, ms int64) []byte {
	t := time.UnixMilli(ms).UTC()
	if ms%1000 == 0 {
		return t.AppendFormat(b, "2006-01-02T15:04:05Z")
	}
	return t.AppendFormat(b, "2006-01-02T15:04:05.000Z")
}

func digits(b []byte) (int, bool) {
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns days since 1970-01-01 (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}
