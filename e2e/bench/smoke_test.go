package bench

import (
	"os"
	"strings"
	"testing"
)

// benchSmokeEnv names the variable that makes every benchmark a smoke run
// (SLUICE_BENCH_SMOKE=1): each runs its whole path, seeding, drains,
// processes and checks, at a tiny size, so that `make test` fails when a
// benchmark would fail under `make bench`, in well under two minutes. The
// figures of a smoke run measure nothing: they are printed labelled as a
// smoke run, with no verdict against their targets, and reported to the
// testing package not at all.
const benchSmokeEnv = "SLUICE_BENCH_SMOKE"

// benchSmoke reports whether this is a smoke run.
var benchSmoke = os.Getenv(benchSmokeEnv) == "1"

// benchSize is full under `make bench` and smoke in a smoke run.
func benchSize[T ~int | ~int64 | ~float64](full, smoke T) T {
	if benchSmoke {
		return smoke
	}
	return full
}

// benchMetric reports a figure to the testing package, except in a smoke
// run, whose figures are not results.
func benchMetric(b *testing.B, value float64, unit string) {
	b.Helper()
	if !benchSmoke {
		b.ReportMetric(value, unit)
	}
}

// benchVerdict says whether a figure met its target, and in a smoke run
// that it was not judged.
func benchVerdict(ok bool) string {
	switch {
	case benchSmoke:
		return "not judged: smoke run"
	case ok:
		return "met"
	default:
		return "MISSED"
	}
}

// benchPrint writes a summary to standard output, every heading of a
// smoke run marked as one. The testing package keeps only ten lines of a
// benchmark's b.Log output, so summaries and plans go straight to stdout,
// which go test passes through.
func benchPrint(s string) {
	if benchSmoke {
		s = strings.ReplaceAll(s, "\n== ", "\n== SMOKE RUN, tiny sizes, figures not results: ")
	}
	_, _ = os.Stdout.WriteString(s)
}
