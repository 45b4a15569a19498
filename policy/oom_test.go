package policy

import (
	"regexp"
	"strings"
	"testing"
)

// Tracebacks as the frameworks print them (paths and sizes varied).
const (
	torchOOM = `Traceback (most recent call last):
  File "/srv/serve.py", line 88, in <module>
    out = model.generate(**batch, max_new_tokens=512)
  File "/usr/lib/python3.11/site-packages/torch/utils/_contextlib.py", line 116, in decorate_context
    return func(*args, **kwargs)
  File "/usr/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py", line 345, in forward
    attn_weights = torch.matmul(query_states, key_states.transpose(2, 3))
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.04 GiB memory in use. Of the allocated memory 75.12 GiB is allocated by PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated.
`
	torchOldOOM = `RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.52 GiB already allocated; 6.75 MiB free; 14.60 GiB reserved in total by PyTorch)
`
	cudaRuntime = `  File "/srv/train.py", line 12, in <module>
    x = torch.empty(n, device="cuda")
RuntimeError: CUDA error: out of memory
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
`
	cublas = `RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling ` + "`cublasCreate(handle)`\n"
	xlaOOM = `jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.
BufferAssignment OOM Debugging.
`
	xlaBFC = `2025-01-01 12:00:00.000000: W external/xla/xla/tsl/framework/bfc_allocator.cc:497] Allocator (GPU_0_bfc) ran out of memory trying to allocate 4.00GiB (rounded to 4294967296)requested by op
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 4.00GiB (4294967296B) on device ordinal 0
`
	tfOOM = `tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[32,4096,4096] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc
`
	rocmOOM = `torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 63.98 GiB of which 512.00 MiB is free.
`
	npuOOM = `RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity; 58.01 GiB already allocated; 58.01 GiB current active; 1.13 GiB free; 58.50 GiB reserved in total by PyTorch)
`
	vllmKV = `(VllmWorker rank=0 pid=4242) ERROR 01-01 12:00:00 [multiproc_executor.py:470]   File "/usr/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 534, in check_enough_kv_cache_memory
ValueError: No available memory for the cache blocks. Try increasing ` + "`gpu_memory_utilization`" + ` when initializing the engine.
`
	cudaAlloc = `terminate called after throwing an instance of 'std::runtime_error'
  what():  cudaMalloc failed: cudaErrorMemoryAllocation: out of memory
`
	plainCrash = `Traceback (most recent call last):
  File "/srv/serve.py", line 3, in <module>
    import vllm
ModuleNotFoundError: No module named 'vllm'
`
	loadedMemory = `INFO 01-01 12:00:00 [gpu_model_runner.py:1843] Model loading took 14.99 GiB and 12.1 seconds
INFO: memory usage is fine, cuda out of memory handling enabled
KeyError: 'resource_exhausted'
`
)

func TestMatchStderr(t *testing.T) {
	o := Default().OOM
	tests := []struct {
		name   string
		stderr string
		want   string // substring of the matched line; "" = no match
	}{
		{"torch", torchOOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"},
		{"torch<2.5", torchOldOOM, "RuntimeError: CUDA out of memory"},
		{"cuda runtime", cudaRuntime, "RuntimeError: CUDA error: out of memory"},
		{"cublas", cublas, "CUBLAS_STATUS_ALLOC_FAILED"},
		{"xla", xlaOOM, "RESOURCE_EXHAUSTED: Out of memory"},
		{"xla bfc", xlaBFC, "Failed to allocate request"},
		{"tensorflow", tfOOM, "OOM when allocating tensor"},
		{"rocm", rocmOOM, "HIP out of memory"},
		{"ascend", npuOOM, "NPU out of memory"},
		{"vllm kv cache", vllmKV, "No available memory for the cache blocks"},
		{"cudaMalloc", cudaAlloc, "cudaErrorMemoryAllocation"},
		{"import error", plainCrash, ""},
		{"near misses", loadedMemory, ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := o.MatchStderr([]byte(tt.stderr))
			if tt.want == "" {
				if ok {
					t.Fatalf("matched %q, want no match", got)
				}
				return
			}
			if !ok || !strings.Contains(got, tt.want) {
				t.Fatalf("MatchStderr = %q, %v; want a line containing %q", got, ok, tt.want)
			}
			if strings.Contains(got, "\n") {
				t.Errorf("matched %q spans lines", got)
			}
		})
	}
}

func TestMatchStderrPrefersTheLastMatch(t *testing.T) {
	o := Default().OOM
	tail := "warning: retrying after CUDA out of memory\nok\ntorch.OutOfMemoryError: final\n"
	got, ok := o.MatchStderr([]byte(tail))
	if !ok || got != "torch.OutOfMemoryError: final" {
		t.Fatalf("MatchStderr = %q, %v", got, ok)
	}
}

func TestMatchStderrLongLine(t *testing.T) {
	o := Default().OOM
	line := "CUDA out of memory " + strings.Repeat("é", 1000)
	got, ok := o.MatchStderr([]byte(line))
	if !ok || len(got) > 512+3 || !strings.HasPrefix(got, "CUDA out of memory") {
		t.Fatalf("MatchStderr = %d bytes, %v", len(got), ok)
	}
}

func TestPolicyPatternsAreAdded(t *testing.T) {
	p, err := Parse([]byte(`[oom]
patterns = ["MyAllocatorFailed: \\d+ bytes", "(?i)kv cache too small"]
exit_codes = [3, 137]
`), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.OOM.Patterns); n != len(BuiltinOOMPatterns())+2 {
		t.Fatalf("%d patterns, want built-ins + 2", n)
	}
	for _, s := range []string{"MyAllocatorFailed: 4096 bytes", "KV Cache Too Small", "CUDA out of memory"} {
		if _, ok := p.OOM.MatchStderr([]byte(s)); !ok {
			t.Errorf("%q did not match", s)
		}
	}
	for code, want := range map[int]bool{3: true, 137: true, 1: false, 0: false} {
		if got := p.OOM.IsOOMExitCode(code); got != want {
			t.Errorf("IsOOMExitCode(%d) = %v", code, got)
		}
	}
	if Default().OOM.IsOOMExitCode(1) {
		t.Error("the default policy has no OOM exit codes")
	}
}

func TestBuiltinPatternsAreCaseSensitive(t *testing.T) {
	o := OOM{Patterns: []*regexp.Regexp{regexp.MustCompile(BuiltinOOMPatterns()[0])}}
	if _, ok := o.MatchStderr([]byte("cuda OUT of MEMORY")); ok {
		t.Error("built-in patterns must be case-sensitive")
	}
}
