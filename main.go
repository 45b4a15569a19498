// Command gpuguard launches and supervises GPU inference servers, stepping
// them down as GPU memory fills and restarting them one profile lower on OOM.
package main

import (
	"os"

	"github.com/gpuguard/gpuguard/cmd"
)

func main() {
	os.Exit(cmd.Main())
}
