package ingest

import "github.com/cardhour/cardhour/schemas"

// The idle classes are part of the stored row format (schemas); these names
// are kept for ingest's callers.

// IdleClasses is the number of known-utilisation idle classes (1…IdleClasses).
const IdleClasses = schemas.IdleClasses

// IdleClassNull is the class of held samples with util null and no process.
const IdleClassNull = schemas.IdleClassNull

// IdleClassBounds returns the exclusive upper bounds of the known-utilisation
// idle classes (schemas.IdleClassBounds).
func IdleClassBounds() [IdleClasses]float64 { return schemas.IdleClassBounds() }

// IdleClassOf returns the idle class of a held sample (schemas.IdleClassOf).
func IdleClassOf(s *schemas.Sample) (class uint8, ok bool) { return schemas.IdleClassOf(s) }
