package collector

import (
	"bufio"
	"context"
	"io"
	"sync"

	"github.com/cardhour/cardhour/schemas"
)

// JSONLPublisher writes samples as JSON Lines (cardhour.sample.v1) to a writer.
// It is safe for concurrent use.
type JSONLPublisher struct {
	mu  sync.Mutex
	w   *bufio.Writer
	buf []byte
	n   int64
}

// NewJSONLPublisher returns a publisher that writes to w; call Flush at the end.
func NewJSONLPublisher(w io.Writer) *JSONLPublisher {
	return &JSONLPublisher{w: bufio.NewWriterSize(w, 256<<10)}
}

// Publish writes one line per sample.
func (p *JSONLPublisher) Publish(_ context.Context, samples []schemas.Sample) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range samples {
		p.buf = samples[i].AppendJSON(p.buf[:0])
		p.buf = append(p.buf, '\n')
		if _, err := p.w.Write(p.buf); err != nil {
			return err
		}
	}
	p.n += int64(len(samples))
	return nil
}

// Count returns the number of samples written.
func (p *JSONLPublisher) Count() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Flush writes buffered lines.
func (p *JSONLPublisher) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Flush()
}

// MemoryPublisher keeps every sample in memory: the in-memory fake of Publisher.
// Err, when set, is returned by Publish instead of keeping the samples.
type MemoryPublisher struct {
	mu      sync.Mutex
	samples []schemas.Sample
	Err     error
}

// Publish appends copies of the samples.
func (p *MemoryPublisher) Publish(_ context.Context, samples []schemas.Sample) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Err != nil {
		return p.Err
	}
	p.samples = append(p.samples, samples...)
	return nil
}

// Samples returns a copy of everything published so far.
func (p *MemoryPublisher) Samples() []schemas.Sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]schemas.Sample(nil), p.samples...)
}
