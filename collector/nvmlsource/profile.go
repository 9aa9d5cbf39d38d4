package nvmlsource

import (
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ProfileName derives the MIG profile name (1g.10gb, 3g.40gb, 1g.10gb+me, …) of a
// GPU instance profile, the way NVIDIA's go-nvlib does: the memory of the slice
// as a fraction of the card, rounded up to eighths, times the card's memory in
// whole GB. deviceMemBytes is the total memory of the parent GPU.
func ProfileName(profileIndex int, info nvml.GpuInstanceProfileInfo, deviceMemBytes uint64) string {
	name := fmt.Sprintf("%dg.%dgb", info.SliceCount, migMemoryGB(deviceMemBytes, info.MemorySizeMB))
	switch profileIndex {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1:
		name += "+me"
	}
	return name
}

func migMemoryGB(totalDeviceMemory, migMemorySizeMB uint64) uint64 {
	const fracDenominator = 8
	const oneMB = 1024 * 1024
	const oneGB = 1024 * 1024 * 1024
	if totalDeviceMemory == 0 {
		return 0
	}
	frac := float64(migMemorySizeMB) * oneMB / float64(totalDeviceMemory)
	frac = math.Ceil(frac*fracDenominator) / fracDenominator
	totalGB := float64((totalDeviceMemory + oneGB - 1) / oneGB)
	return uint64(math.Round(frac * totalGB))
}
