// Package collector turns what a GPU node has now into cardhour.sample.v1 samples.
//
// The data path is: a Source reads every GPU instance of the node (NVML, or a
// simulated fleet), Resolvers attribute each instance to a project and a user, the
// Collector builds and validates one sample per instance per interval, and a
// Publisher ships them (Kafka through an on-disk spool, or a file).
//
// The collector declares the interfaces it needs (Source, Resolver, Publisher,
// Clock); implementations live in the subpackages beside it:
//
//	nvmlsource  Source over github.com/NVIDIA/go-nvml (real library or its mocks)
//	nvmlmock    MIG-capable go-nvml mock servers whose memory, processes and GPM can be scripted
//	fleet       a simulated fleet of nodes (YAML) for demos, tests and `cardhour simulate`
//	attrib      resolvers: static map, Unix processes (+ Slurm), Kubernetes PodResources
//	spool       bounded, crash-safe on-disk queue of encoded samples
//	kafkapub    Publisher that spools every sample and sends it to Kafka in order
//
// Each sample covers the interval that has just elapsed: the tick at the aligned
// boundary T_k emits [T_{k-1}, T_k) with the state observed at T_k (GPM utilisation is
// measured over exactly that interval). The first sample after start covers
// [start, T_1) and the last one, taken on shutdown, covers [T_last, now), so a
// collector that runs from A to B claims exactly [A, B) and never more.
package collector
