// The machine the snapshot test and benchmark boot the Debian Linux kit on: the guest
// cache's kernel and busybox initramfs (tests/support/files.h), 512 MiB, "console=ttyS0",
// the debug console discarded.
#pragma once
#include "harness/machine.h"
#include "tests/support/files.h"

namespace vmxsim::test {

/// Fills Cfg for the kit with COM1 going to Serial; false when the cache lacks the kit.
inline bool debianLinuxBootConfig(MachineConfig &Cfg, const OutputSpec &Serial) {
  const DebianLinuxKit Kit = debianLinuxKit();
  if (!Kit)
    return false;
  Cfg.Kernel = Kit.Kernel;
  Cfg.Modules = {Kit.Initrd};
  Cfg.RamBytes = 512ull << 20;
  Cfg.Append = "console=ttyS0";
  Cfg.Serial = Serial;
  Cfg.Debugcon = OutputSpec::discard();
  return true;
}

} // namespace vmxsim::test
