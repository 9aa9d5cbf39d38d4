package schemas_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// dayOfRuns is one project-day of runs as a fleet writes them: many keys,
// several runs each, names that repeat across keys.
func dayOfRuns(keys int) ([]schemas.Run, []schemas.IdleRun) {
	const day = 20_400 * schemas.DayMS
	var occ []schemas.Run
	var idle []schemas.IdleRun
	for k := range keys {
		key := schemas.Key{Project: "nlp-lab", User: fmt.Sprintf("student%03d", k%40), InstanceID: fmt.Sprintf("node%03d-gpu%d-mig%d", k/56, k/7%8, k%7),
			GPUModel: "NVIDIA A100-SXM4-80GB", Profile: "1g.10gb"}
		for r := range 4 {
			s := day + int64(k*1_000+r*3_600_000)
			occ = append(occ, schemas.Run{Key: key, StartMS: s, EndMS: s + 1_800_000})
			idle = append(idle, schemas.IdleRun{Run: schemas.Run{Key: key, StartMS: s, EndMS: s + 600_000}, Class: 1, MinUtil: 0, MaxUtil: 0.01})
		}
	}
	return occ, idle
}

// unsealed re-encodes a sealed pack's runs as version 1, as a build before
// sealing wrote them.
func unsealed(t *testing.T, pack []byte) []byte {
	t.Helper()
	plain, err := schemas.Unseal(pack)
	require.NoError(t, err)
	return append([]byte(nil), plain...)
}

// A pack that compresses is written sealed (version 2), several times smaller,
// and decodes to the same runs as its version-1 bytes; a store holding both
// versions reads both.
func TestRunPackSealed(t *testing.T) {
	occ, idle := dayOfRuns(700)
	packs := schemas.PackRuns(occ, idle)
	require.Len(t, packs, 1)
	sealed := packs[0].Data
	v, _ := binary.Uvarint(sealed)
	require.Equal(t, uint64(2), v, "a pack of 700 keys is sealed")
	plain := unsealed(t, sealed)
	v, _ = binary.Uvarint(plain)
	require.Equal(t, uint64(1), v)
	require.Less(t, 3*len(sealed), len(plain), "sealed %d bytes, version 1 %d", len(sealed), len(plain))

	var a, b schemas.DecodedPack
	require.NoError(t, a.Decode(sealed))
	require.NoError(t, b.Decode(plain))
	ao, ai := a.Runs()
	bo, bi := b.Runs()
	require.Equal(t, bo, ao)
	require.Equal(t, bi, ai)
	require.Len(t, ao, len(occ))
	require.Len(t, ai, len(idle))

	// One DecodedPack decoding sealed, plain and sealed again in turn: the
	// buffer a sealed pack decompresses into is reused, never stale.
	var d schemas.DecodedPack
	for _, p := range [][]byte{sealed, plain, sealed} {
		require.NoError(t, d.Decode(p))
		o, i := d.Runs()
		require.Equal(t, ao, o)
		require.Equal(t, ai, i)
		require.Equal(t, "nlp-lab", string(d.ProjectBytes()))
	}

	// Merging a version-1 pack with a sealed one gives one sealed pack of
	// the same runs.
	merged, err := schemas.MergePacks([][]byte{plain, sealed})
	require.NoError(t, err)
	require.Len(t, merged, 1)
	v, _ = binary.Uvarint(merged[0].Data)
	require.Equal(t, uint64(2), v)
	require.NoError(t, d.Decode(merged[0].Data))
	o, i := d.Runs()
	require.Equal(t, ao, o)
	require.Equal(t, ai, i)
}

// A pack too small to gain from LZ4 stays version 1.
func TestRunPackSmallStaysPlain(t *testing.T) {
	occ, idle := dayOfRuns(1)
	packs := schemas.PackRuns(occ[:1], idle[:0])
	require.Len(t, packs, 1)
	v, _ := binary.Uvarint(packs[0].Data)
	require.Equal(t, uint64(1), v)
}

// Corrupt sealed packs fail with an error, allocate nothing absurd and never
// panic: a truncated block, a wrong declared length, a length LZ4 could not
// reach, a sealed pack inside a sealed pack.
func TestRunPackSealedCorrupt(t *testing.T) {
	occ, idle := dayOfRuns(200)
	sealed := schemas.PackRuns(occ, idle)[0].Data
	header := func(n uint64, body []byte) []byte {
		b := binary.AppendUvarint([]byte{2}, n)
		return append(b, body...)
	}
	_, off := binary.Uvarint(sealed[1:])
	declared, _ := binary.Uvarint(sealed[1:])
	block := sealed[1+off:]
	cases := map[string][]byte{
		"truncated block":      sealed[:len(sealed)-7],
		"length one short":     header(declared-1, block),
		"length one long":      header(declared+1, block),
		"length beyond LZ4":    header(1<<40, block[:10]),
		"no length":            {2},
		"zero length":          header(0, block),
		"sealed inside sealed": header(uint64(len(sealed)), sealed), // not LZ4 at all
		"garbage block":        header(100, []byte{0xff, 0xff, 0xff, 0xff}),
		"version 3":            append([]byte{3}, block...),
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			var d schemas.DecodedPack
			require.Error(t, d.Decode(p))
		})
	}
	// A block that decompresses to a sealed pack's bytes (version 2 inside).
	inner := schemas.SealForTest(sealed)
	var d schemas.DecodedPack
	require.ErrorContains(t, d.Decode(inner), "sealed pack holds version 2")
}

// FuzzDecodePack: no input makes Decode panic, and a pack that decodes
// decodes again, to the same runs, after being merged (which re-seals it).
func FuzzDecodePack(f *testing.F) {
	occ, idle := dayOfRuns(30)
	sealed := schemas.PackRuns(occ, idle)[0].Data
	f.Add(sealed)
	f.Add(unsealed(&testing.T{}, sealed))
	f.Add([]byte{2, 5, 0})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, pack []byte) {
		var d schemas.DecodedPack
		if d.Decode(pack) != nil {
			return
		}
		o, i := d.Runs()
		merged, err := schemas.MergePacks([][]byte{pack})
		require.NoError(t, err)
		var n int
		for _, m := range merged {
			var e schemas.DecodedPack
			require.NoError(t, e.Decode(m.Data))
			mo, mi := e.Runs()
			n += len(mo) + len(mi)
		}
		require.LessOrEqual(t, n, len(o)+len(i))
	})
}
