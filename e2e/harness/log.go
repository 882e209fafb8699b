package harness

// NopLogger is a Temporal SDK logger that drops every line, so a test's
// clients do not fill its output.
type NopLogger struct{}

// Debug drops the line.
func (NopLogger) Debug(string, ...any) {}

// Info drops the line.
func (NopLogger) Info(string, ...any) {}

// Warn drops the line.
func (NopLogger) Warn(string, ...any) {}

// Error drops the line.
func (NopLogger) Error(string, ...any) {}
