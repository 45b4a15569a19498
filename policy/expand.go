package policy

import (
	"errors"
	"fmt"
	"strings"
)

// UnknownVarError is a ${NAME} in the child's arguments that nothing
// defines. It is a configuration error (exit 78).
type UnknownVarError struct {
	Name    string
	Arg     string // the argument as written
	Index   int    // its index in argv (0 = the program)
	Profile string // the profile that lacks it; "" from ExpandArgs
}

func (e *UnknownVarError) Error() string {
	msg := fmt.Sprintf("unknown variable ${%s} in argument %q", e.Name, e.Arg)
	if e.Profile != "" {
		msg += fmt.Sprintf(": profile %q has no %s in its env and it is not a GPUGUARD_* variable", e.Profile, e.Name)
	}
	return msg
}

// ArgSyntaxError is a malformed ${...} in the child's arguments, such as an
// unterminated "${" or "${1X}". It is a configuration error (exit 78).
type ArgSyntaxError struct {
	Arg   string
	Index int
	Msg   string
}

func (e *ArgSyntaxError) Error() string {
	return fmt.Sprintf("argument %q: %s (write $$ for a literal $)", e.Arg, e.Msg)
}

// ExpandArgs replaces ${NAME} in each argument with vars[NAME], the way
// systemd's ExecStart= does: "$$" is a literal "$" and a bare "$X" is left
// as it is. An undefined ${NAME} is an *UnknownVarError, a malformed one an
// *ArgSyntaxError. Nothing is passed through a shell, and args is not
// modified.
func ExpandArgs(args []string, vars map[string]string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		s, err := expandArg(a, i, vars)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

func expandArg(a string, index int, vars map[string]string) (string, error) {
	if !strings.Contains(a, "$") {
		return a, nil
	}
	var b strings.Builder
	for i := 0; i < len(a); i++ {
		if a[i] != '$' || i+1 == len(a) {
			b.WriteByte(a[i])
			continue
		}
		switch a[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(a[i+2:], '}')
			if end < 0 {
				return "", &ArgSyntaxError{Arg: a, Index: index, Msg: "unterminated ${"}
			}
			name := a[i+2 : i+2+end]
			if !validEnvName(name) {
				return "", &ArgSyntaxError{Arg: a, Index: index, Msg: fmt.Sprintf("invalid variable name %q in ${...}", name)}
			}
			v, ok := vars[name]
			if !ok {
				return "", &UnknownVarError{Name: name, Arg: a, Index: index}
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), nil
}

// CheckArgs reports whether every ${NAME} in args resolves in every
// profile, from the profile's env or the GPUGUARD_* variables, so that a
// missing variable is found before anything starts rather than at the
// first step down. The error is an *UnknownVarError naming the profile, or
// an *ArgSyntaxError.
func (p *Policy) CheckArgs(args []string) error {
	for _, prof := range p.Profiles {
		vars := make(map[string]string, len(prof.Env)+len(ChildVars()))
		for _, v := range ChildVars() {
			vars[v] = ""
		}
		for k, v := range prof.Env {
			vars[k] = v
		}
		if _, err := ExpandArgs(args, vars); err != nil {
			var ue *UnknownVarError
			if errors.As(err, &ue) {
				ue.Profile = prof.Name
			}
			return err
		}
	}
	return nil
}
