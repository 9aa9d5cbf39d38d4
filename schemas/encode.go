package schemas

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends s as one cardhour.sample.v1 JSON object (no newline). Fields
// come in the order of the format's table, then the optional extras.
func (s *Sample) AppendJSON(b []byte) []byte {
	b = append(b, `{"schema":"`+SampleSchemaV1+`","ts":"`...)
	b = AppendTimestampMS(b, s.StartMS)
	b = append(b, `","interval_s":`...)
	b = appendMS(b, s.IntervalMS)
	b = appendStrField(b, "node", s.Node)
	b = appendStrField(b, "gpu_uuid", s.GPUUUID)
	b = appendStrField(b, "gpu_model", s.GPUModel)
	b = appendStrField(b, "instance_id", s.InstanceID)
	b = appendStrField(b, "profile", s.Profile)
	b = appendStrField(b, "project", s.Project)
	b = appendStrField(b, "user", s.User)
	b = append(b, `,"util":`...)
	if s.UtilKnown {
		b = strconv.AppendFloat(b, s.Util, 'f', -1, 64)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"mem_used_bytes":`...)
	b = strconv.AppendInt(b, s.MemUsed, 10)
	b = append(b, `,"mem_total_bytes":`...)
	b = strconv.AppendInt(b, s.MemTotal, 10)
	b = append(b, `,"processes":`...)
	b = strconv.AppendInt(b, s.Processes, 10)
	if s.UtilSource != "" {
		b = appendStrField(b, "util_source", s.UtilSource)
	}
	if s.HolderRef != "" {
		b = appendStrField(b, "holder_ref", s.HolderRef)
	}
	if s.ShareKind != "" || s.ShareMem != 0 || s.ShareCores != 0 {
		b = s.appendShare(b)
	}
	return append(b, '}')
}

// appendShare writes the share fields that are present, after the extras.
func (s *Sample) appendShare(b []byte) []byte {
	if s.ShareKind != "" {
		b = appendStrField(b, "share_kind", s.ShareKind)
	}
	if s.ShareMem != 0 {
		b = append(b, `,"share_mem":`...)
		b = strconv.AppendFloat(b, s.ShareMem, 'f', -1, 64)
	}
	if s.ShareCores != 0 {
		b = append(b, `,"share_cores":`...)
		b = strconv.AppendFloat(b, s.ShareCores, 'f', -1, 64)
	}
	return b
}

// appendMS writes milliseconds as seconds with up to three decimals (10000 → 10,
// 2500 → 2.5).
func appendMS(b []byte, ms int64) []byte {
	if ms < 0 {
		b = append(b, '-')
		ms = -ms
	}
	b = strconv.AppendInt(b, ms/1000, 10)
	if frac := ms % 1000; frac != 0 {
		b = append(b, '.')
		d := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
		n := 3
		for n > 1 && d[n-1] == '0' {
			n--
		}
		b = append(b, d[:n]...)
	}
	return b
}

// AppendSecondsMS writes a millisecond count as a JSON number of seconds.
func AppendSecondsMS(b []byte, ms int64) []byte { return appendMS(b, ms) }

func appendStrField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return AppendJSONString(b, v)
}

// AppendJSONString appends v as a JSON string literal.
func AppendJSONString(b []byte, v string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, v[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
