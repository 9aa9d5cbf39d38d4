package postgres

// Rebind is the dialect's placeholder rewriting, for the plan test.
var Rebind = rebind
