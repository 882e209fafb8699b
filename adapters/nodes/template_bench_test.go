package nodes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// workerPeakTarget is the most heap one hostile TRANSFORM may take on a
// worker.
const workerPeakTarget = 512 << 20

// BenchmarkTemplateAmplificationPeakHeap measures what a worker spends on a
// TRANSFORM whose output repeats {{ input.s }} 2,000 times over a 400 KB
// string (800 MB if resolution were unbounded), beside a benign TRANSFORM
// that references the same input once. Each runs the worker's path: decode
// the execution input from JSON, run the executor with the default limits,
// encode the output. The collector is off while a run is measured, so the
// heap it ends with, less the heap it started with, is the most it held at
// any point: the peak. Both run in the same process, interleaved, and the
// ratio is printed beside the target.
func BenchmarkTemplateAmplificationPeakHeap(b *testing.B) {
	input, err := json.Marshal(map[string]any{"s": strings.Repeat("x", 400<<10)})
	if err != nil {
		b.Fatal(err)
	}
	exec := nodes.All(nodes.DefaultConfig())[1]
	if exec.Type() != domain.NodeTransform {
		b.Fatalf("executor 1 is %s, want TRANSFORM", exec.Type())
	}
	hostile := mustJSONB(b, map[string]any{"output": strings.Repeat("{{ input.s }}", 2000)})
	benign := mustJSONB(b, map[string]any{"output": map[string]any{"s": "{{ input.s }}"}})

	var hostilePeak, benignPeak uint64
	var hostileErr, benignErr error
	for range max(b.N, 3) {
		p, err := workerPeak(exec, hostile, input)
		hostilePeak, hostileErr = max(hostilePeak, p), err
		p, err = workerPeak(exec, benign, input)
		benignPeak, benignErr = max(benignPeak, p), err
	}
	if !strings.Contains(fmt.Sprint(hostileErr), "budget") {
		b.Fatalf("hostile run ended with %v, want the template budget", hostileErr)
	}
	if benignErr != nil {
		b.Fatalf("benign run failed: %v", benignErr)
	}
	mb := func(n uint64) float64 { return float64(n) / (1 << 20) }
	ratio := float64(hostilePeak) / float64(benignPeak)
	b.ReportMetric(mb(hostilePeak), "hostile_peak_MB")
	b.ReportMetric(mb(benignPeak), "benign_peak_MB")
	b.ReportMetric(ratio, "hostile/benign")
	verdict := "met"
	if hostilePeak >= workerPeakTarget {
		verdict = "MISSED"
	}
	fmt.Fprintf(os.Stdout, "worker template amplification (2,000 x 400 KB): peak heap %.1f MB  benign template, same input: %.1f MB  "+
		"hostile/benign %.2f  [target < %d MB: %s]\n", mb(hostilePeak), mb(benignPeak), ratio, workerPeakTarget>>20, verdict)
}

// workerPeak runs one node as the worker does and returns the heap it
// added at its highest.
func workerPeak(exec ports.NodeExecutor, config, input []byte) (uint64, error) {
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	before := heapBytes()
	var in any
	if err := json.Unmarshal(input, &in); err != nil {
		return 0, err
	}
	node := domain.Node{Key: "t", Type: domain.NodeTransform, Config: config}
	_, out, err := exec.Execute(context.Background(), ports.NodeRun{Node: node, Context: domain.TemplateContext{Input: in}})
	if err == nil {
		_, err = json.Marshal(out)
	}
	return heapBytes() - before, err
}

// heapBytes is the heap held by objects, freed or not yet swept included.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func mustJSONB(b *testing.B, v any) []byte {
	b.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}
