#!/usr/bin/env python3
"""The figures of scripts/gpu-smoke.sh, out of its logs and journals.

Standard library only (the GPU machine has no package registry). Each
command prints what it found, one line each; a line starting "CHECK ok",
"CHECK FAIL" or "CHECK info" is a verdict that the script's final summary
lists again. Commands:

  gpu0 STATUS_JSON                   "USED TOTAL" bytes of the first GPU
  gpus STATUS_JSON                   each GPU gpuguard lists (section 1)
  scope STATUS_JSON NAME SMI_APPS    what scope = "process" sees (section 0)
  oom JOURNAL                        restarts, and exit -> next start (section 4)
  share JOURNAL_LO JOURNAL_HI        two tenants sharing one GPU (section 6)
  order JOURNAL_A ERR_A LOG_A JOURNAL_B ERR_B LOG_B SETTLE_S
                                     two tenants launched at once (section 7)
  ramp LOG JOURNAL TOTAL QUOTA HIGH TRACE CALM_JSON
                                     the adaptive period on a ramp (section 8)
  trace SOCKET OUT SECONDS           poll an instance's status every 50 ms
"""
import inspect
import json
import os
import re
import sys
import time
from datetime import datetime, timezone

GiB = 1 << 30
MiB = 1 << 20


def check(ok, what):
    print(f"CHECK {'ok' if ok else 'FAIL'} {what}")


def info(what):
    print(f"CHECK info {what}")


def rfc3339(s):
    """Epoch seconds of a journal time (RFC 3339, nanoseconds)."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", s)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {s!r}")
    dt = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    frac = m.group(2) or ""
    return dt.timestamp() + (int(frac) / 10 ** len(frac) if frac else 0.0)


def journal(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        print(f"  cannot read {path}: {e}")
        return []


def events(evs, name):
    return [e for e in evs if e.get("event") == name]


def json_lines(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError as e:
        print(f"  cannot read {path}: {e}")
    return out


def stamped(path, text):
    """Epoch seconds of the first line of a stamped log (EPOCHREALTIME, then
    the line) that contains text; None if none."""
    try:
        with open(path) as f:
            for line in f:
                stamp, _, rest = line.partition(" ")
                if text in rest:
                    return float(stamp.replace(",", "."))
    except (OSError, ValueError):
        pass
    return None


def load_status(path):
    """The object of a `gpuguard status --json` output, {} if none.
    gpu-smoke.sh keeps stderr in the file (2>&1): gpuguard's warning lines
    may come before or after the JSON, which starts a line with "{"."""
    try:
        with open(path) as f:
            text = f.read()
        m = re.search(r"^\{", text, re.M)
        if not m:
            raise ValueError("no JSON object")
        st = json.JSONDecoder().raw_decode(text, m.start())[0]
        if not isinstance(st, dict):
            raise ValueError("no JSON object")
        return st
    except (OSError, ValueError) as e:
        print(f"  cannot read {path}: {e}")
        return {}


def cmd_gpu0(path):
    g = load_status(path).get("gpus") or [{}]
    print(g[0].get("used_bytes", 0), g[0].get("total_bytes", 0))


def cmd_gpus(path):
    st = load_status(path)
    if not st.get("gpus"):
        try:
            with open(path) as f:
                print(f"  no GPU list in {path}: {f.read(300)}")
        except OSError:
            pass
    for g in st.get("gpus") or []:
        print(f"  gpuguard: GPU {g['index']} {g['name']} {g['uuid']} used {g['used_bytes'] / MiB:.0f} MiB "
              f"of {g['total_bytes'] / MiB:.0f} MiB")


def nspid(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return line.split()[1:]
    except OSError:
        pass
    return []


def cmd_scope(path, name, smi_apps):
    st = load_status(path)
    inst = next((i for i in st.get("instances", []) if i.get("name") == name), None)
    if inst is None:
        check(False, f"scope=process: no instance {name} in status")
        return
    child = inst.get("child_pid", 0)
    procs = [(p["pid"], p.get("used_bytes", 0)) for g in inst.get("gpus", []) for p in g.get("processes") or []]
    print(f"  child pid {child} (NSpid {' '.join(nspid(child)) or '?'}); gpuguard's NVML processes: "
          + (", ".join(f"{p} ({u / MiB:.0f} MiB)" for p, u in procs) or "none"))
    try:
        with open(smi_apps) as f:
            print(f"  nvidia-smi compute apps: {' | '.join(l.strip() for l in f if l.strip()) or 'none'}")
    except OSError:
        pass
    listed = any(p == child for p, _ in procs)
    w = inst.get("watermark", 0)
    info(f"scope=process: the child's pid {'IS' if listed else 'is NOT'} among NVML's processes; "
         f"watermark {w:.3f} of the 4 GiB quota ({'its own memory was seen' if w > 0 else 'none of its memory was seen'})")


def cmd_oom(path):
    evs = journal(path)
    restarts = events(evs, "restart")
    for r in restarts:
        print(f"  restart reason={r.get('reason')} {r.get('from')} -> {r.get('to')}")
    ex, st = events(evs, "exit"), events(evs, "start")
    if ex and len(st) > 1:
        ms = (rfc3339(st[1]["time"]) - rfc3339(ex[0]["time"])) * 1000
        print(f"  exit -> next start (backoff 10ms + waiting for the driver to free the memory): {ms:.0f} ms")
    else:
        print(f"  {'' if restarts else 'no restart journaled, '}no exit -> next start figure "
              f"({len(ex)} exits, {len(st)} starts)")


def cmd_share(lo_path, hi_path):
    lo, hi = journal(lo_path), journal(hi_path)
    for name, evs in (("lo (priority 10)", lo), ("hi (priority 90)", hi)):
        counts = {k: len(events(evs, k)) for k in ("start", "stepdown", "yield", "oom", "restart", "critical", "exit")}
        print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        for e in events(evs, "stepdown") + events(evs, "yield")[:3]:
            print(f"    {e['event']} {e.get('profile')} reason={e.get('reason', '')} to={e.get('to', '')} "
                  f"{e.get('detail', '')}".rstrip())
    check(len(events(lo, "stepdown")) >= 1, f"sharing: the priority-10 tenant stepped down ({len(events(lo, 'stepdown'))} times)")
    check(not events(hi, "stepdown"), f"sharing: the priority-90 tenant never stepped down ({len(events(hi, 'stepdown'))})")
    yields = [e for e in events(hi, "yield") if e.get("to") == "lo"]
    check(len(yields) >= 1, f"sharing: the priority-90 tenant journaled yields to lo ({len(yields)})")
    ooms = len(events(lo, "oom")) + len(events(hi, "oom"))
    restarts = len(events(lo, "restart")) + len(events(hi, "restart"))
    check(ooms == 0 and restarts == 0, f"sharing: no OOM and no restart ({ooms} OOMs, {restarts} restarts)")


def first_start(evs):
    st = events(evs, "start")
    return rfc3339(st[0]["time"]) if st else None


def cmd_order(ja, ea, la, jb, eb, lb, settle):
    settle = float(settle)
    runs = []
    for j, e, log in ((ja, ea, la), (jb, eb, lb)):
        evs = journal(j)
        name = evs[0].get("name", "?") if evs else "?"
        runs.append({"name": name, "start": first_start(evs), "err": e, "log": log})
    if any(r["start"] is None for r in runs):
        check(False, "start order: a tenant never started: " + ", ".join(f"{r['name']} {r['start']}" for r in runs))
        return
    first, second = sorted(runs, key=lambda r: r["start"])
    settled = stamped(first["err"], "start complete")
    t0 = first["start"]
    child = json_lines(first["log"])
    cuda = next((r["t"] for r in child if r.get("ev") == "cuda"), None)
    flat = next((r["t"] for r in child if r.get("ev") == "flat"), None)

    def rel(t):
        return "?" if t is None else f"+{t - t0:.3f}s"

    print(f"  {first['name']} started at {datetime.fromtimestamp(t0, timezone.utc).isoformat()} (+0); "
          f"its CUDA context {rel(cuda)}, its memory flat {rel(flat)}, settled (gpuguard: start complete) {rel(settled)}")
    print(f"  {second['name']} started {rel(second['start'])}")
    if settled is None:
        check(False, f"start order: no 'start complete' line from {first['name']}")
        return
    # The stamp is taken when the line is read from a pipe: allow 50 ms.
    gap = second["start"] - settled
    check(gap > -0.05, f"start order: {second['name']} started {gap * 1000:+.0f} ms after {first['name']} settled")
    if flat is not None:
        # Growth counts once it passes max(64 MiB, 1 % of the GPU) above the
        # peak, so the settle timer may start a few blocks before the last:
        # allow half a second.
        early = flat + settle - settled
        if early > 0.5:
            info(f"start order: {first['name']} was declared settled {early:.2f}s before its memory had been flat for "
                 f"{settle:g}s: gpuguard did not see its loading (torch's import outlasting settle, or NVML PIDs "
                 "that do not map to the container's)")
        else:
            info(f"start order: {first['name']} settled {-early + settle:.2f}s after its memory went flat (settle {settle:g}s)")


def cmd_ramp(log, jpath, total, quota, high, trace, calm):
    total, quota, high = int(total), int(quota), float(high)
    recs = json_lines(log)
    allocs = [r for r in recs if r.get("ev") == "alloc"]
    sigs = [r for r in recs if r.get("ev") == "signal"]
    if len(allocs) < 2:
        check(False, f"ramp: the child allocated {len(allocs)} blocks")
        return
    line = high * quota
    crossing = next((a for a in allocs if total - a["free"] >= line), None)
    a0, a1 = allocs[0], allocs[-1]
    rate = (a1["mib"] - a0["mib"]) * MiB / max(1e-9, a1["m"] - a0["m"])
    print(f"  ramp: {a1['mib'] - a0['mib']} MiB in {a1['m'] - a0['m']:.2f}s: {rate / GiB:.2f} GiB/s, "
          f"{rate / quota:.3f} of the quota a second")
    if crossing is None:
        check(False, f"ramp: the child's memory never crossed high ({line / GiB:.2f} GiB used of {total / GiB:.1f})")
        return
    if not sigs:
        check(False, "ramp: no SIGUSR1 arrived")
        return
    # The block became visible to NVML somewhere inside its allocation:
    # count from the allocation's start (an upper bound), and show its end.
    lat = (sigs[0]["m"] - crossing.get("m0", crossing["m"])) * 1000
    print(f"  crossed high ({line / GiB:.2f} GiB used, by cudaMemGetInfo) at block {crossing['mib']} MiB; "
          f"SIGUSR1 {lat:.0f} ms after that block's allocation began, "
          f"{(sigs[0]['m'] - crossing['m']) * 1000:.0f} ms after it was done")
    evs = journal(jpath)
    sd = events(evs, "stepdown")
    if sd:
        print(f"  stepdown journaled {(rfc3339(sd[0]['time']) - crossing['t']) * 1000:.0f} ms after the crossing "
              f"(reason {sd[0].get('reason')})")
    # A latency outside [0, 1 s) means the crossing is misplaced (CUDA's free
    # memory disagrees with NVML's) or the period did not adapt; either is a
    # finding.
    check(0 <= lat < 1000, f"ramp: crossing high -> SIGUSR1 {lat:.0f} ms (sustain 0s, adaptive defaults)")
    tr = json_lines(trace)
    above = next((r for r in tr if (r.get("watermark") or 0) >= high), None)
    if above:
        print(f"  gpuguard's status first showed the watermark at or above high {(above['t'] - crossing['t']) * 1000:.0f} ms "
              f"after the crossing ({above['watermark']:.3f})")
    before = [r for r in tr if r.get("t", 0) <= crossing["t"] and r.get("interval_seconds")]
    if before:
        near = before[-5:]
        print("  period (status trace) just before the crossing: "
              + ", ".join(f"{r['interval_seconds'] * 1000:.0f} ms at {r['watermark']:.3f}" for r in near))
        print(f"  shortest period during the ramp: {min(r['interval_seconds'] for r in before) * 1000:.0f} ms")
    # The instance the journal names: status lists every instance of the
    # runtime dir, a stale socket of an earlier section's too.
    name = next((e["name"] for e in evs if e.get("name")), None)
    insts = load_status(calm).get("instances") or [{}]
    inst = next((i for i in insts if i.get("name") == name), insts[0])
    iv = inst.get("interval_seconds")
    if iv is None:
        check(False, "ramp: no status at calm")
        return
    check(abs(iv - 1.0) < 1e-6, f"ramp: period at calm {iv:g}s (watermark {inst.get('watermark', 0):.3f}; "
          "max_interval 1s expected)")


def cmd_trace(sock, out, seconds):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
    import gpuguard
    c = gpuguard.Client(sock, timeout=1)
    end = time.monotonic() + float(seconds)
    misses = 0
    with open(out, "w") as f:
        while time.monotonic() < end and misses < 20:
            t = time.time()
            try:
                s = c.status()
            except gpuguard.Error:
                misses += 1
                time.sleep(0.05)
                continue
            misses = 0
            f.write(json.dumps({"t": t, "watermark": s.get("watermark"), "interval_seconds": s.get("interval_seconds"),
                                "eta_seconds": s.get("eta_seconds"), "profile": s.get("profile"),
                                "state": s.get("state")}) + "\n")
            f.flush()
            time.sleep(0.05)


COMMANDS = {"gpu0": cmd_gpu0, "gpus": cmd_gpus, "scope": cmd_scope, "oom": cmd_oom, "share": cmd_share, "order": cmd_order,
            "ramp": cmd_ramp, "trace": cmd_trace}


def main(argv):
    if len(argv) < 2 or argv[1] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 64
    cmd = COMMANDS[argv[1]]
    try:
        inspect.signature(cmd).bind(*argv[2:])
    except TypeError as e:
        print(f"gpu_smoke.py {argv[1]}: {e}", file=sys.stderr)
        return 64
    try:
        cmd(*argv[2:])
    except Exception as e:
        # Input the command did not expect: a verdict in the summary (which
        # keeps stdout), never a traceback that loses the section's figures.
        print(f"CHECK FAIL gpu_smoke.py {argv[1]}: cannot finish ({type(e).__name__}: {e})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
