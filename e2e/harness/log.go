package harness

type NopLogger struct{}

func (NopLogger) Debug(string, ...any) {}

func (NopLogger) Info(string, ...any) {}

func (NopLogger) Warn(string, ...any) {}

func (NopLogger) Error(string, ...any) {}
