package core

import "time"

// Device is one watched GPU at one instant, as the decisions need it (the
// supervisor copies it from the probe's sample).
type Device struct {
	Index int
	UUID  string
	Name  string
	Used  uint64 // bytes
	Total uint64 // bytes
}

// Process is one process's use of one GPU.
type Process struct {
	PID    int
	Device int // Device.Index
	Used   uint64
}

// Reading is one good probe reading: the devices, and the per-process
// usage with when it was taken (zero ProcessesAt: the backend lists no
// processes).
type Reading struct {
	Devices     []Device
	Processes   []Process
	ProcessesAt time.Time
}
