package validate

import (
	"debug/elf"
	"fmt"
	"strconv"
	"strings"
)

// Instruction is one Dockerfile instruction, continuation lines joined.
type Instruction struct {
	Cmd  string // upper case: FROM, RUN, COPY, ...
	Args []string
}

// ParseDockerfile splits a Dockerfile into instructions. It knows what the
// checks here need (comments, line continuations, JSON-form arguments as
// plain words), not the whole syntax; there is no Docker daemon on these
// machines to build the image.
func ParseDockerfile(text string) []Instruction {
	var out []Instruction
	var cur strings.Builder
	flush := func() {
		fields := strings.Fields(cur.String())
		cur.Reset()
		if len(fields) == 0 {
			return
		}
		var args []string
		for _, f := range fields[1:] {
			f = strings.Trim(f, `[],"`)
			if f != "" {
				args = append(args, f)
			}
		}
		out = append(out, Instruction{Cmd: strings.ToUpper(fields[0]), Args: args})
	}
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(t, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(t)
		flush()
	}
	flush()
	return out
}

// FinalCopy returns the destination of the last stage's COPY --from=...,
// which is where the image keeps the binary it copies in.
func FinalCopy(ins []Instruction) (string, error) {
	dest := ""
	for _, in := range ins {
		switch {
		case in.Cmd == "FROM":
			dest = ""
		case in.Cmd == "COPY" && len(in.Args) >= 3 && strings.HasPrefix(in.Args[0], "--from="):
			dest = in.Args[len(in.Args)-1]
		}
	}
	if dest == "" {
		return "", fmt.Errorf("the last stage copies nothing from another stage")
	}
	return dest, nil
}

// CheckGPUGuardDockerfile checks the gpuguard image's recipe: the binary is
// built with cgo, and the final image has a glibc (NVML is loaded at run
// time, which a static or musl binary cannot do).
func CheckGPUGuardDockerfile(ins []Instruction) []error {
	var errs []error
	var final string
	cgo := false
	for _, in := range ins {
		switch in.Cmd {
		case "FROM":
			if len(in.Args) > 0 {
				final = in.Args[0]
			}
		case "RUN":
			run := strings.Join(in.Args, " ")
			if strings.Contains(run, "go build") && strings.Contains(run, "CGO_ENABLED=1") {
				cgo = true
			}
		}
	}
	if !cgo {
		errs = append(errs, fmt.Errorf("no RUN builds gpuguard with CGO_ENABLED=1 (NVML needs cgo)"))
	}
	for _, bad := range []string{"scratch", "alpine", "distroless/static", "busybox"} {
		if strings.Contains(final, bad) {
			errs = append(errs, fmt.Errorf("final image %s has no glibc to load NVML with", final))
		}
	}
	return errs
}

// RequiredGlibc returns the newest GLIBC_x.y symbol version the ELF binary
// at file needs, or an error if it is not dynamically linked.
func RequiredGlibc(file string) (major, minor int, err error) {
	f, err := elf.Open(file)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w (a static binary cannot load NVML)", file, err)
	}
	for _, s := range syms {
		v, ok := strings.CutPrefix(s.Version, "GLIBC_")
		if !ok {
			continue
		}
		ma, mi, _ := strings.Cut(v, ".")
		a, err1 := strconv.Atoi(ma)
		b, err2 := strconv.Atoi(strings.Split(mi, ".")[0])
		if err1 == nil && err2 == nil && (a > major || a == major && b > minor) {
			major, minor = a, b
		}
	}
	if major == 0 {
		return 0, 0, fmt.Errorf("%s: needs no glibc symbol: not a cgo build", file)
	}
	return major, minor, nil
}
