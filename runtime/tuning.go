package runtime

import (
	ort "github.com/yalue/onnxruntime_go"
)

// Tuning holds optional ONNX Runtime session settings for performance work.
// Its zero value changes nothing: ONNX Runtime's defaults (and the settings
// Options already implies) stay in force.
type Tuning struct {
	// ProfilePrefix, when set, turns on ONNX Runtime's profiler; the JSON
	// trace (per-node timings) is written to "<prefix>_<date>.json" when the
	// session is closed.
	ProfilePrefix string
	// Parallel selects ORT's parallel executor (independent nodes run
	// concurrently on the inter-op pool) instead of the sequential one.
	Parallel bool
	// InterOpThreads overrides the inter-op thread count (Options.Threads > 0
	// sets it to 1); 0 leaves it.
	InterOpThreads int
	// NoArena disables the CPU memory arena (memory goes back to the system
	// as tensors are freed; lowers peak RSS at some allocation cost).
	NoArena bool
	// NoMemPattern disables ORT's memory-pattern preallocation.
	NoMemPattern bool
	// OptimizedModelPath, when set, makes ONNX Runtime write the graph it
	// actually runs (after its fusions) to this file at session creation.
	OptimizedModelPath string
	// Config adds session configuration entries (keys from ORT's
	// onnxruntime_session_options_config_keys.h), e.g.
	// "session.intra_op.allow_spinning": "0".
	Config map[string]string
}

// apply sets t on so; called by open after the base options.
func (t Tuning) apply(so *ort.SessionOptions) error {
	if t.ProfilePrefix != "" {
		if err := so.EnableProfiling(t.ProfilePrefix); err != nil {
			return err
		}
	}
	if t.Parallel {
		if err := so.SetExecutionMode(ort.ExecutionModeParallel); err != nil {
			return err
		}
	}
	if t.InterOpThreads > 0 {
		if err := so.SetInterOpNumThreads(t.InterOpThreads); err != nil {
			return err
		}
	}
	if t.NoArena {
		if err := so.SetCpuMemArena(false); err != nil {
			return err
		}
	}
	if t.NoMemPattern {
		if err := so.SetMemPattern(false); err != nil {
			return err
		}
	}
	if t.OptimizedModelPath != "" {
		if err := so.SetOptimizedModelFilePath(t.OptimizedModelPath); err != nil {
			return err
		}
	}
	for k, v := range t.Config {
		if err := so.AddSessionConfigEntry(k, v); err != nil {
			return err
		}
	}
	return nil
}
