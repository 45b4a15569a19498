package policy

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
)

// BuiltinOOMPatterns returns the RE2 patterns that mark a child's stderr as
// an out-of-memory death, whatever the policy says. Each names an
// allocator failure, not merely the word "memory", because a false match
// moves the server down a profile for nothing.
func BuiltinOOMPatterns() []string {
	return []string{
		`CUDA out of memory`,                       // PyTorch caching allocator
		`OutOfMemoryError`,                         // torch.OutOfMemoryError, torch.cuda.OutOfMemoryError
		`CUDA error: out of memory`,                // a raw CUDA runtime error surfaced by PyTorch
		`CUDA_ERROR_OUT_OF_MEMORY`,                 // the driver API (JAX, TensorFlow, cuda-python)
		`CUBLAS_STATUS_ALLOC_FAILED`,               // cuBLAS workspace allocation
		`cudaErrorMemoryAllocation`,                // the runtime API's enum name
		`RESOURCE_EXHAUSTED.*memory`,               // XLA: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate"
		`RESOURCE_EXHAUSTED: Failed to allocate`,   // XLA's BFC allocator
		`OOM when allocating tensor`,               // TensorFlow ResourceExhaustedError
		`HIP out of memory`,                        // PyTorch on ROCm
		`hipErrorOutOfMemory`,                      // the HIP runtime's enum name
		`NPU out of memory`,                        // torch_npu on Ascend
		`No available memory for the cache blocks`, // vLLM: the KV cache does not fit
	}
}

// builtinOOM compiles BuiltinOOMPatterns; they are constants, so a failure
// is a bug in this file.
func builtinOOM() []*regexp.Regexp {
	pats := BuiltinOOMPatterns()
	res := make([]*regexp.Regexp, len(pats))
	for i, p := range pats {
		res[i] = regexp.MustCompile(p)
	}
	return res
}

// MatchStderr reports whether the tail of a child's stderr shows an
// out-of-memory death, and if so returns the line that matched (trimmed,
// at most 512 bytes) for the journal. Of several matches the last one
// counts, as it is the nearest to the exit. It does not look at
// ScanStderr: the caller decides whether stderr is captured at all.
func (o OOM) MatchStderr(tail []byte) (matched string, ok bool) {
	best := -1
	var bestLoc []int
	for _, re := range o.Patterns {
		locs := re.FindAllIndex(tail, -1)
		if len(locs) == 0 {
			continue
		}
		if last := locs[len(locs)-1]; last[0] > best {
			best, bestLoc = last[0], last
		}
	}
	if bestLoc == nil {
		return "", false
	}
	start := bytes.LastIndexByte(tail[:bestLoc[0]], '\n') + 1
	end := bytes.IndexByte(tail[bestLoc[1]:], '\n')
	if end < 0 {
		end = len(tail)
	} else {
		end += bestLoc[1]
	}
	if end < bestLoc[1] {
		end = bestLoc[1] // the match itself spans a newline
	}
	line := bytes.TrimSpace(tail[start:end])
	const maxLine = 512
	if len(line) > maxLine {
		line = line[:maxLine]
	}
	return strings.ToValidUTF8(string(line), "\uFFFD"), true
}

// IsOOMExitCode reports whether an exit code is one the policy declares to
// mean out of memory ([oom] exit_codes).
func (o OOM) IsOOMExitCode(code int) bool {
	return slices.Contains(o.ExitCodes, code)
}
