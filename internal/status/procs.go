package status

import (
	"context"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/gpuguard/gpuguard/api"
)

// describeProcesses names the command and user of every GPU process, the
// way nvitop and gpustat do, so the GPU table says who holds the memory.
// A process that is gone, or in another PID namespace, stays a bare pid.
func describeProcesses(ctx context.Context, gpus []api.GPU) {
	for i := range gpus {
		for j := range gpus[i].Processes {
			gp := &gpus[i].Processes[j]
			p, err := process.NewProcessWithContext(ctx, int32(gp.PID))
			if err != nil {
				continue
			}
			if name, err := p.NameWithContext(ctx); err == nil {
				gp.Command = name
			}
			if user, err := p.UsernameWithContext(ctx); err == nil {
				gp.User = user
			}
		}
	}
}
