package postgres

// Pipeline is pipeline, for the external tests, which a real database's
// helper (pgtest) keeps out of this package's own.
var Pipeline = pipeline
