//go:build !collector

package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// sampleBounds are the flags that bound what a command accepts of a sample
// beyond the wire format: the longest interval_s and, for ingest, how far in
// the future a sample may end.
type sampleBounds struct {
	maxInterval  time.Duration
	maxClockSkew time.Duration
	withSkew     bool
}

func addSampleBounds(fs *flag.FlagSet, withSkew bool) *sampleBounds {
	b := &sampleBounds{withSkew: withSkew}
	fs.DurationVar(&b.maxInterval, "max-interval", schemas.DefaultMaxInterval,
		"longest interval_s a sample may have; a longer one is an invalid line (the collector samples every 1s..1h)")
	if withSkew {
		fs.DurationVar(&b.maxClockSkew, "max-clock-skew", defaultMaxClockSkew,
			"a sample that ends more than this after the ingest clock is an invalid line (0: no check)")
	}
	return b
}

// defaultMaxClockSkew is how far ahead of the ingest clock a sample may end.
const defaultMaxClockSkew = 5 * time.Minute

// problems returns what is wrong with the flags' values.
func (b *sampleBounds) problems() []string {
	var out []string
	if b.maxInterval <= 0 || b.maxInterval > schemas.MaxIntervalLimit || b.maxInterval%time.Millisecond != 0 {
		out = append(out, fmt.Sprintf("--max-interval %v: want a whole number of milliseconds in (0, %v]", b.maxInterval, schemas.MaxIntervalLimit))
	}
	if b.maxClockSkew < 0 {
		out = append(out, fmt.Sprintf("--max-clock-skew %v: must not be negative (0 disables the check)", b.maxClockSkew))
	}
	return out
}

func (b *sampleBounds) options() schemas.DecoderOptions {
	return schemas.DecoderOptions{MaxInterval: b.maxInterval, MaxClockSkew: b.maxClockSkew}
}
