package policy

// Variables gpuguard sets in the child's environment. Arguments may name
// them as ${GPUGUARD_...} alongside the profile's own env.
const (
	VarName       = "GPUGUARD_NAME"
	VarProfile    = "GPUGUARD_PROFILE"
	VarLevel      = "GPUGUARD_LEVEL"
	VarLevels     = "GPUGUARD_LEVELS"
	VarRestarts   = "GPUGUARD_RESTARTS"
	VarLastExit   = "GPUGUARD_LAST_EXIT"
	VarCheckpoint = "GPUGUARD_CHECKPOINT"
	VarState      = "GPUGUARD_STATE"
	VarSocket     = "GPUGUARD_SOCKET"
	VarSimDir     = "GPUGUARD_SIM_DIR"
)

// ChildVars lists the GPUGUARD_* variables, in the contract's order.
func ChildVars() []string {
	return []string{
		VarName, VarProfile, VarLevel, VarLevels, VarRestarts,
		VarLastExit, VarCheckpoint, VarState, VarSocket, VarSimDir,
	}
}

// validEnvName reports whether s is a POSIX environment variable name:
// [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}
