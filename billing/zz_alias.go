package billing

import "github.com/cardhour/cardhour/schemas"

type (
	Key      = schemas.Key
	Run      = schemas.Run
	IdleRun  = schemas.IdleRun
	RawPoint = schemas.RawPoint
)
