package schemas

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"
)

// MaxLineBytes bounds one JSON Lines record; a longer line is an error, not an
// out-of-memory.
const MaxLineBytes = 1 << 20

var errLineTooLong = fmt.Errorf("line longer than %d bytes", MaxLineBytes)

// ReadOptions controls ReadSamples.
type ReadOptions struct {
	// SkipInvalid counts and reports invalid lines instead of stopping at the first.
	SkipInvalid bool
	// MaxReported bounds how many invalid lines are kept in ReadStats.Invalid.
	MaxReported int
	// Workers decodes in parallel (0: GOMAXPROCS). Lines are still delivered to the
	// sink in chunks; each Sink call gets samples of one chunk in line order.
	Workers int
	// Ordered delivers the chunks in input order, one Sink call at a time,
	// while they are still decoded in parallel: the sink sees the samples as
	// one worker would hand them (a writer whose compaction likes time order
	// keeps it), at the cost of a worker waiting when the chunk before its
	// own is not delivered yet.
	Ordered bool
	// DecoderOptions bound interval_s and, with Now, how far in the future a
	// sample may end; a line outside the bounds is invalid.
	DecoderOptions
	// Now is the clock MaxClockSkew is checked against, read once per chunk
	// (required when MaxClockSkew > 0).
	Now func() time.Time
	// OnInvalid, when set, is called for every invalid line (not only the
	// reported ones), from the decoding goroutines, concurrently when Workers
	// > 1; text is the line (nil when it was too long to keep) and is valid
	// only during the call.
	OnInvalid func(line int64, text []byte, err error)
}

// ReadStats summarizes a read.
type ReadStats struct {
	Lines        int64 // non-empty lines read
	Valid        int64
	InvalidCount int64
	Invalid      []*LineError // the first MaxReported invalid lines
}

// Sink consumes decoded samples. ReadSamples calls it from worker goroutines, one
// call at a time per worker, with the worker index in [0, Workers). A sink can keep
// per-worker state (an accumulator each) and merge at the end.
type Sink func(worker int, samples []Sample) error

type chunk struct {
	seq       int64 // the chunk's place in the input, from 0
	firstLine int64
	data      []byte
	buf       *[]byte // the pooled buffer data lives in
	tooLong   bool    // the chunk stands for one line over MaxLineBytes, discarded
}

// skipLine discards input up to and including the next newline.
func skipLine(br *bufio.Reader) (eof bool, err error) {
	for {
		_, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return true, nil
		default:
			return false, err
		}
	}
}

type chunkResult struct {
	lines   int64
	valid   int64
	invalid []*LineError
	count   int64
}

// ReadSamples reads cardhour.sample.v1 JSON Lines from r and hands the decoded
// samples to sink. Blank lines are ignored. It streams: memory is bounded by the
// chunk size times the number of workers, whatever the input size.
//
// Without SkipInvalid it stops at the first invalid line (the lowest line number,
// whatever the worker scheduling) and returns it as a *LineError.
func ReadSamples(r io.Reader, opt ReadOptions, sink Sink) (ReadStats, error) {
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if opt.MaxReported <= 0 {
		opt.MaxReported = 20
	}
	if err := opt.DecoderOptions.Validate(); err != nil {
		return ReadStats{}, err
	}
	if opt.MaxClockSkew > 0 && opt.Now == nil {
		return ReadStats{}, errors.New("read options: MaxClockSkew needs a clock (Now)")
	}
	rd := &sampleReader{opt: opt, sink: sink, stop: make(chan struct{})}
	rd.turn = sync.NewCond(&rd.turnMu)
	// Chunk buffers are recycled: decoded samples hold no reference into them
	// (strings are copied or interned by the decoder).
	rd.pool.New = func() any { b := make([]byte, 0, readChunkSize+64<<10); return &b }

	chunks := make(chan chunk, workers*2)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rd.work(w, chunks)
		}(w)
	}
	readErr := splitChunks(r, readChunkSize, chunks, rd.stop, &rd.pool)
	close(chunks)
	wg.Wait()
	return rd.result(readErr)
}

// readChunkSize is about how many bytes of input a worker decodes at a time.
const readChunkSize = 1 << 20

// sampleReader is what ReadSamples' workers share: the totals, the first
// invalid line and sink error, and the stop they close.
type sampleReader struct {
	opt  ReadOptions
	sink Sink
	pool sync.Pool

	mu       sync.Mutex
	stats    ReadStats
	firstErr *LineError
	sinkErr  error
	stop     chan struct{}
	stopOnce sync.Once

	// With Ordered: the seq of the chunk to deliver next, and turn, which
	// wakes the workers waiting for theirs.
	turnMu  sync.Mutex
	turn    *sync.Cond
	nextSeq int64
}

func (rd *sampleReader) halt() { rd.stopOnce.Do(func() { close(rd.stop) }) }

// work decodes chunks as worker w, handing each chunk's samples to the sink.
func (rd *sampleReader) work(w int, chunks <-chan chunk) {
	dec := NewDecoderWith(rd.opt.DecoderOptions)
	batch := make([]Sample, 0, 4096)
	for c := range chunks {
		if rd.opt.Now != nil {
			dec.SetNow(rd.opt.Now())
		}
		res := decodeChunk(dec, c, &batch, rd.opt)
		if c.buf != nil {
			rd.pool.Put(c.buf)
		}
		rd.count(res)
		if rd.opt.Ordered {
			rd.waitTurn(c.seq)
		}
		if !rd.opt.SkipInvalid && res.count > 0 {
			rd.halt()
		} else if len(batch) > 0 && !rd.halted() {
			if err := rd.sink(w, batch); err != nil {
				rd.mu.Lock()
				if rd.sinkErr == nil {
					rd.sinkErr = err
				}
				rd.mu.Unlock()
				rd.halt()
			}
		}
		if rd.opt.Ordered {
			rd.passTurn()
		}
	}
}

// halted reports whether the read is stopping: after an invalid line
// without SkipInvalid, or a sink error, no chunk is delivered any more.
func (rd *sampleReader) halted() bool {
	select {
	case <-rd.stop:
		return true
	default:
		return false
	}
}

// waitTurn waits until every chunk before seq has been delivered (Ordered).
// Every chunk the splitter sends reaches a worker, which passes the turn on
// whether it delivers it or not, so the wait ends.
func (rd *sampleReader) waitTurn(seq int64) {
	rd.turnMu.Lock()
	for rd.nextSeq != seq {
		rd.turn.Wait()
	}
	rd.turnMu.Unlock()
}

func (rd *sampleReader) passTurn() {
	rd.turnMu.Lock()
	rd.nextSeq++
	rd.turnMu.Unlock()
	rd.turn.Broadcast()
}

// count adds a chunk's result to the totals, keeping at most a few times
// MaxReported invalid lines (the lowest) and the first one.
func (rd *sampleReader) count(res chunkResult) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	st := &rd.stats
	st.Lines += res.lines
	st.Valid += res.valid
	st.InvalidCount += res.count
	st.Invalid = append(st.Invalid, res.invalid...)
	if len(st.Invalid) > 4*rd.opt.MaxReported {
		sortLineErrors(st.Invalid)
		st.Invalid = st.Invalid[:rd.opt.MaxReported]
	}
	if !rd.opt.SkipInvalid && res.count > 0 {
		if rd.firstErr == nil || res.invalid[0].Line < rd.firstErr.Line {
			rd.firstErr = res.invalid[0]
		}
	}
}

// result is the read's totals and its error: the first invalid line, else
// the sink's, else the input's.
func (rd *sampleReader) result(readErr error) (ReadStats, error) {
	stats := rd.stats
	sortLineErrors(stats.Invalid)
	if len(stats.Invalid) > rd.opt.MaxReported {
		stats.Invalid = stats.Invalid[:rd.opt.MaxReported]
	}
	switch {
	case rd.firstErr != nil:
		return stats, rd.firstErr
	case rd.sinkErr != nil:
		return stats, rd.sinkErr
	case readErr != nil:
		return stats, readErr
	}
	return stats, nil
}

// splitChunks cuts the input at line boundaries into chunks of about size bytes.
func splitChunks(r io.Reader, size int, out chan<- chunk, stop <-chan struct{}, pool *sync.Pool) error {
	br := bufio.NewReaderSize(r, size)
	line := int64(1)
	seq := int64(0)
	var carry []byte
	for {
		pb := pool.Get().(*[]byte)
		buf := *pb
		if cap(buf) < size+len(carry)+4096 {
			buf = make([]byte, 0, size+len(carry)+4096)
		}
		buf = append(buf[:0], carry...)
		// Fill up to size bytes beyond what was carried over.
		target := len(carry) + size
		carry = nil
		for len(buf) < target {
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := br.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				if len(buf) > 0 {
					*pb = buf
					if !send(out, chunk{seq: seq, firstLine: line, data: buf, buf: pb}, stop) {
						return nil
					}
				}
				return nil
			}
			if err != nil {
				return fmt.Errorf("cannot read samples: %w", err)
			}
		}
		// Cut after the last newline; carry the partial line over.
		cut := bytes.LastIndexByte(buf, '\n')
		if cut < 0 {
			if len(buf) > MaxLineBytes {
				// Discard the rest of the line and report it as one invalid line, so
				// that --skip-invalid goes on with the next one.
				eof, err := skipLine(br)
				if err != nil {
					return fmt.Errorf("cannot read samples: %w", err)
				}
				if !send(out, chunk{seq: seq, firstLine: line, tooLong: true}, stop) || eof {
					return nil
				}
				seq++
				line++
				continue
			}
			carry = append([]byte(nil), buf...)
			continue
		}
		carry = append(carry[:0], buf[cut+1:]...)
		data := buf[:cut+1]
		n := int64(bytes.Count(data, []byte{'\n'}))
		*pb = buf
		if !send(out, chunk{seq: seq, firstLine: line, data: data, buf: pb}, stop) {
			return nil
		}
		seq++
		line += n
	}
}

func send(out chan<- chunk, c chunk, stop <-chan struct{}) bool {
	select {
	case out <- c:
		return true
	case <-stop:
		return false
	}
}

func decodeChunk(dec *Decoder, c chunk, batch *[]Sample, opt ReadOptions) chunkResult {
	var res chunkResult
	b := (*batch)[:0]
	if c.tooLong {
		*batch = b
		if opt.OnInvalid != nil {
			opt.OnInvalid(c.firstLine, nil, errLineTooLong)
		}
		return chunkResult{lines: 1, count: 1, invalid: []*LineError{{Line: c.firstLine, Err: errLineTooLong}}}
	}
	data := c.data
	line := c.firstLine
	if line == 1 {
		// Files saved by Windows tools often start with a UTF-8 byte-order mark.
		data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	}
	for len(data) > 0 {
		var l []byte
		l, data = NextLine(data)
		if !BlankLine(l) {
			res.lines++
			if len(l) > MaxLineBytes {
				res.count++
				res.invalid = append(res.invalid, &LineError{Line: line, Err: errLineTooLong})
				if opt.OnInvalid != nil {
					opt.OnInvalid(line, l, errLineTooLong)
				}
			} else {
				b = append(b, Sample{})
				if err := dec.Decode(l, &b[len(b)-1]); err != nil {
					b = b[:len(b)-1]
					res.count++
					if opt.OnInvalid != nil {
						opt.OnInvalid(line, l, err)
					}
					if len(res.invalid) < opt.MaxReported {
						res.invalid = append(res.invalid, &LineError{Line: line, Err: err})
					}
					if !opt.SkipInvalid {
						break
					}
				} else {
					res.valid++
				}
			}
		}
		line++
	}
	*batch = b
	return res
}

// BlankLine reports whether a line of JSON Lines holds only whitespace (readers
// skip such lines). A line that starts with '{', as a sample does, is answered
// from its first byte.
func BlankLine(l []byte) bool {
	return (len(l) == 0 || l[0] != '{') && len(bytes.TrimSpace(l)) == 0
}

func sortLineErrors(errs []*LineError) {
	slices.SortFunc(errs, func(a, b *LineError) int { return cmp.Compare(a.Line, b.Line) })
}
