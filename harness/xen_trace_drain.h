// vmxsim as the consumer of an unmodified Xen 4.17's own trace buffers: what xentrace does
// in dom0 through privcmd, done by the machine from guest memory with the help of Xen's
// symbol file xen-syms (Debian: xen-hypervisor-4.17-amd64-dbg), so that Xen can be traced
// with no tool stack in dom0 (`vmxsim run --xen-trace FILE --xen-syms XEN_SYMS`;
// docs/xen-trace.md, "vmxsim's own drain").
//
// What is read (Xen 4.17.7, xen/common/trace.c and xen/include/public/trace.h):
//   static struct t_info *t_info;      t_info->tbuf_size (uint16: pages per CPU),
//                                      t_info->mfn_offset[NR_CPUS] (uint16, in 32-bit
//                                      words from the start of t_info, 0 = CPU not
//                                      traced), then each CPU's list of uint32 MFNs
//   static unsigned int t_info_pages;  pages of the t_info allocation
//   static u32 data_size;              tbuf_size * PAGE_SIZE - sizeof(struct t_buf)
//   static DEFINE_PER_CPU_READ_MOSTLY(struct t_buf *, t_bufs);   per_cpu__t_bufs, at
//                                      &per_cpu__t_bufs + __per_cpu_offset[cpu]
//                                      (xen/arch/x86/include/asm/percpu.h): the directmap
//                                      address of the CPU's first MFN (checked)
//   struct t_buf { uint32_t cons, prod; }  at the start of a CPU's first page, the data
//                                      (data_size bytes) after it across its pages; cons
//                                      and prod run modulo 2 * data_size
// Statics are the LOCAL symbols of the FILE symbol common/trace.c in xen-syms' .symtab;
// per-CPU variables are per_cpu__NAME. Xen's virtual addresses (the image at
// 0xffff82d040000000, the directmap) are translated through Xen's idle page table
// (idle_pg_table, which maps the image and the directmap), found through CPU 0's page
// tables in VMX root operation (its CR3, or the current VMCS's host CR3 in non-root
// operation) and then kept.
//
// When: at every multiple of MachineConfig::XenTraceEvery retired instructions
// (Scheduler::setDrainPoints) and at the end of a run, never at host time. A drain point
// copies each CPU's [cons, prod) out as one TRACE_CPU_CHANGE window, as xentrace's
// write_buffer does (tools/xentrace/xentrace.c), and stores cons = prod into guest memory.
// Xen writes prod only after a record is complete (__insert_record), and a drain point is
// an instruction boundary of every CPU, so a window always holds whole records.
//
// Problems (problem(): one line; the vmxsim command exits kExitXenTrace): the running Xen
// is not the one of the symbol file (the GNU build id in memory at the address of
// xen-syms' .note.gnu.build-id differs), Xen's image never appeared at its link address
// (not Xen, or not this one), Xen never set up trace buffers (t_info stayed NULL: no
// tbuf_size= on its command line), or guest nonsense (t_info or an MFN outside RAM, sizes
// that disagree, a cons or prod out of range, as Xen's own bogus() sees them): the drain
// stops there, what it wrote stays in the file.
#pragma once
#include "harness/error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vmxsim {
class Machine;
namespace trace {
class TraceWriter;
}

/// What the drain needs of xen-syms: virtual addresses in Xen's address space.
struct XenTraceSymbols {
  uint64_t TInfo = 0, TInfoPages = 0, DataSize = 0, TBufs = 0; ///< common/trace.c's statics
  uint64_t PerCpuOffset = 0;  ///< unsigned long __per_cpu_offset[NR_CPUS]
  unsigned NrCpus = 0;        ///< NR_CPUS (__per_cpu_offset's size / 8)
  uint64_t IdlePgTable = 0;   ///< idle_pg_table, Xen's own top-level page table
  uint64_t BuildIdVa = 0;     ///< the section .note.gnu.build-id
  std::vector<uint8_t> BuildIdNote; ///< its bytes (the GNU build-id note)
};

/// Reads them from xen-syms at Path. Errors (ErrorCode::BadSymbolFile, one line naming
/// the file): it cannot be read, is not a 64-bit little-endian ELF, has no symbol table
/// (a stripped Xen), lacks one of the symbols (names it) or the build-id note.
ErrorOr<XenTraceSymbols> readXenTraceSymbols(const std::string &Path);

/// The hex digits of a GNU build-id note's descriptor (for messages), or "" if not one.
std::string buildIdHex(const std::vector<uint8_t> &Note);

class XenTraceDrain {
public:
  XenTraceDrain(Machine &M, XenTraceSymbols Syms, std::string SymsPath,
                trace::TraceWriter &Writer);
  /// A drain point: attaches when Xen is there, copies every CPU's new records out and
  /// advances its cons. Nothing once a problem was found.
  void drain();
  /// Empty, or the one line that says why the trace is not what Xen wrote (see the file
  /// comment); asked after a run.
  std::string problem() const;
  /// Bytes of records copied so far, and windows written.
  uint64_t bytesDrained() const { return Drained; }
  uint64_t windows() const { return Windows; }

private:
  /// Xen's virtual address Va as a physical one: through idle_pg_table once known, else
  /// through CPU 0's root-mode page tables; nullopt when unmapped.
  std::optional<uint64_t> xenPa(uint64_t Va) const;
  std::optional<uint64_t> walk(uint64_t Root, uint64_t Va) const;
  /// Reads Bytes at Xen's virtual address Va (page by page); false if unmapped or not RAM.
  bool readXen(uint64_t Va, void *Out, uint64_t Bytes) const;
  /// Checks the build id, finds idle_pg_table; false while Xen is not there yet.
  bool attach();
  /// Finds the buffers once t_info is set; false while it is NULL (or on a problem).
  bool findBuffers();
  void drainCpu(unsigned Cpu);
  void fail(std::string Why);

  Machine &M;
  XenTraceSymbols Syms;
  std::string SymsPath;
  trace::TraceWriter &Writer;
  bool Attached = false, HaveBuffers = false;
  std::optional<uint64_t> IdleRoot; ///< physical address of idle_pg_table
  std::string Failed;
  uint32_t DataSize = 0;
  /// Per CPU: the physical address of each page of its buffer (empty: not traced).
  std::vector<std::vector<uint64_t>> Pages;
  std::vector<uint8_t> Scratch;
  uint64_t Drained = 0, Windows = 0;
};

} // namespace vmxsim
