#!/usr/bin/env bash
# Checks a hypervisor's XenTrace file with Xen's own analyser: `xenalyze --summary` and
# `vmxsim trace summary` must report the same exits per reason and the same mean cycles
# per exit (xenalyze prints whole cycles; vmxsim's mean is rounded down to compare).
#   scripts/peers/xenalyze-check.sh XENALYZE TRACE [VMXSIM]
# XENALYZE: a xenalyze binary. Debian does not package it; build it from xen.git
# (tools/xentrace/xenalyze.c and mread.c, with xen/include/public/trace.h and
# tools/include/xen-tools/common-macros.h on the include path:
#   gcc -O2 -I inc -I . -o xenalyze xenalyze.c mread.c). This project does not ship it.
# TRACE: e.g. from `vmxsim run --xentrace TRACE build/hvm/vmx_e2e.elf`.
# Only single-domain traces of hvm/'s core are compared (xenalyze's per-vCPU table of
# domain 1, vCPU 0, against vmxsim's all-CPU table). Exits xenalyze leaves out (an exit
# with no VMENTRY after it: HLT at the end of a run) are left out of both.
# Exit status: 0 same, 1 different, 2 usage or a tool failed.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 XENALYZE TRACE [VMXSIM]" >&2
  exit 2
fi
xenalyze=$1 trace=$2 vmxsim=${3:-$(dirname "$0")/../../build/vmxsim}
[ -x "$xenalyze" ] || { echo "xenalyze-check: no xenalyze at $xenalyze" >&2; exit 2; }
[ -x "$vmxsim" ] || { echo "xenalyze-check: no vmxsim at $vmxsim" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/xenalyze-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# xenalyze's names of the basic exit reasons (docs: xentrace-format.md, section 10).
names=(EXCEPTION_NMI EXTERNAL_INTERRUPT TRIPLE_FAULT INIT SIPI IO_SMI OTHER_SMI
  PENDING_VIRT_INTR PENDING_VIRT_NMI TASK_SWITCH CPUID GETSEC HLT INVD INVLPG RDPMC RDTSC
  RSM VMCALL VMCLEAR VMLAUNCH VMPTRLD VMPTRST VMREAD VMRESUME VMWRITE VMXOFF VMXON
  CR_ACCESS DR_ACCESS IO_INSTRUCTION MSR_READ MSR_WRITE INVALID_GUEST_STATE MSR_LOADING
  35 MWAIT_INSTRUCTION MONITOR_TRAP_FLAG 38 MONITOR_INSTRUCTION PAUSE_INSTRUCTION
  MCE_DURING_VMENTRY 42 TPR_BELOW_THRESHOLD APIC_ACCESS 45 ACCESS_GDTR_OR_IDTR
  ACCESS_LDTR_OR_TR EPT_VIOLATION EPT_MISCONFIG INVEPT RDTSCP VMX_PREEMPTION_TIMER_EXPIRED
  INVVPID WBINVD XSETBV)

"$xenalyze" --summary "$trace" >"$work/xa.txt" 2>"$work/xa.err" ||
  { echo "xenalyze-check: xenalyze failed: $(tail -1 "$work/xa.err")" >&2; exit 2; }
"$vmxsim" trace summary --format csv "$trace" >"$work/vx.csv" ||
  { echo "xenalyze-check: vmxsim trace summary failed" >&2; exit 2; }

# "NAME  count  secs  pct  mean cyc {...}" rows of the first "Exit reasons:" table.
awk '/^Exit reasons:/ {on = 1; next} on && /^[A-Z]/ {exit}
     on && /^ [A-Z0-9_]+ +[0-9]+ / {print $1, $2, $5}' "$work/xa.txt" | sort >"$work/xa.rows"
# vmxsim: the first CPU scope's reason rows with closed exits: name, count, floor(mean).
awk -F, -v names="${names[*]}" '
  BEGIN { n = split(names, N, " ") }
  $1 == "cpu" && $3 == "reason" && $8 > 0 {
    name = ($4 + 1 <= n) ? N[$4 + 1] : $4
    printf "%s %d %d\n", name, $8, int($10)
  }' "$work/vx.csv" | sort >"$work/vx.rows"

if diff -u --label xenalyze --label "vmxsim trace summary" "$work/xa.rows" "$work/vx.rows"; then
  echo "xenalyze-check: same exits and mean cycles for $(wc -l <"$work/vx.rows") exit reasons"
  exit 0
fi
exit 1
