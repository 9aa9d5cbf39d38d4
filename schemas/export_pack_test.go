package schemas

// SealForTest seals any bytes as a version-2 pack.
func SealForTest(b []byte) []byte { return seal(b) }
