// Machine::saveSnapshot and Machine::restoreSnapshot: the whole machine in one file
// (format: state/snapshot_io.h). Every component saves its own fields next to its state
// (Cpu::save, PhysMem::save, each device's save, Scheduler::save, TraceWriter::save);
// this file only puts the sections in order and checks that a snapshot belongs to the
// machine it is restored into.
//
// Sections, in this order: CONF (the configuration's fingerprint), MEM (RAM), IOBS (the
// port bus's stop flags and the stop latch), CPU (one per processor, with its local
// APIC), DEVS (the platform devices), SCHD (the scheduler's open slice), OUTS (the byte
// counts of the device outputs), GT (the ground truth's writer and link, when written),
// XT (the hypervisor trace's writer and drain, when written), INPL (where the replay of
// an input log is, when the run replays one: harness/input_log.h; the log's events are
// not copied: the restoring run names the log again with --replay-input).
//
// What a restore re-derives instead of loading: the processors' decoded blocks (flushed),
// the host pointers of their TLB entries (from the saved page frames), their
// mode-derived values and armed breakpoints; the device wiring and the firmware's
// read-only regions come from building the machine with the same configuration.
#include "cpu/cpu_model.h"
#include "cpu/vmx/vmx_features.h"
#include "harness/ground_truth_link.h"
#include "harness/machine.h"
#include "trace/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>

namespace vmxsim {

namespace {
/// The fingerprint's parts, in the order CONF holds them, for the mismatch message.
struct ConfigPrint {
  uint64_t RamBytes = 0, NumCpus = 0, Quantum = 0;
  uint32_t ImageCrc = 0;
  std::string Image, Model, Vmx;
  bool GroundTruth = false, GroundTruthInsns = false, Xentrace = false, TraceInsns = false;
};

ConfigPrint printOf(const MachineConfig &Cfg, const CpuModel &Model, uint32_t ImageCrc) {
  ConfigPrint P;
  P.RamBytes = Cfg.RamBytes;
  P.NumCpus = Cfg.NumCpus;
  P.Quantum = Cfg.QuantumCycles;
  P.ImageCrc = ImageCrc;
  P.Image = Cfg.Kernel;
  P.Model = Model.Name ? Model.Name : "";
  P.Vmx = Model.Vmx && Model.Vmx->Name ? Model.Vmx->Name : "";
  P.GroundTruth = !Cfg.GroundTruthFile.empty();
  P.GroundTruthInsns = Cfg.GroundTruthInsns;
  P.Xentrace = !Cfg.XentraceFile.empty();
  P.TraceInsns = bool(Cfg.TraceInsns);
  return P;
}

const char *onOff(bool B) { return B ? "on" : "off"; }

Error readWholeFile(const std::string &Path, std::vector<uint8_t> &Out) {
  std::FILE *F = std::fopen(Path.c_str(), "rb");
  if (!F)
    return Error(ErrorCode::FileUnreadable,
                 fmt::format("cannot open snapshot: {}", std::strerror(errno)), Path);
  uint8_t Buf[1 << 16];
  size_t N;
  while ((N = std::fread(Buf, 1, sizeof(Buf), F)) > 0)
    Out.insert(Out.end(), Buf, Buf + N);
  const bool Bad = std::ferror(F);
  std::fclose(F);
  if (Bad)
    return Error(ErrorCode::FileUnreadable, "cannot read snapshot", Path);
  return Error::success();
}
} // namespace

Machine::OutputOffsets Machine::currentOutputOffsets() const {
  OutputOffsets O;
  O.Serial = SerialSink.produced();
  O.Serial2 = Serial2Out == &Serial2Sink ? Serial2Sink.produced() : 0;
  O.Debugcon = SharedDebugcon ? 0 : DebugconSink.produced();
  O.TraceInsns = TraceSink.produced();
  O.GroundTruth = GroundTruthWriter ? GroundTruthWriter->bytesWritten() : 0;
  O.Xentrace = XentraceWriter ? XentraceWriter->bytesWritten() : 0;
  return O;
}

void Machine::saveConfig(SnapshotWriter &W) const {
  const ConfigPrint P = printOf(Cfg, Model, ImageCrc);
  W.all(P.RamBytes, P.NumCpus, P.Quantum, P.ImageCrc);
  W.str(P.Image);
  W.str(P.Model);
  W.str(P.Vmx);
  W.all(P.GroundTruth, P.GroundTruthInsns, P.Xentrace, P.TraceInsns);
}

Error Machine::checkConfig(SnapshotReader &R) const {
  ConfigPrint S;
  R.all(S.RamBytes, S.NumCpus, S.Quantum, S.ImageCrc);
  R.str(S.Image, 4096);
  R.str(S.Model, 4096);
  R.str(S.Vmx, 4096);
  R.all(S.GroundTruth, S.GroundTruthInsns, S.Xentrace, S.TraceInsns);
  if (!R.ok())
    return Error(ErrorCode::BadSnapshot, R.error());
  const ConfigPrint M = printOf(Cfg, Model, ImageCrc);
  auto Mismatch = [](std::string What) {
    return Error(ErrorCode::SnapshotMismatch, "snapshot of another machine: " + What);
  };
  if (S.RamBytes != M.RamBytes)
    return Mismatch(fmt::format("memory {} bytes, this machine has {}", S.RamBytes,
                                M.RamBytes));
  if (S.NumCpus != M.NumCpus)
    return Mismatch(fmt::format("{} CPUs, this machine has {}", S.NumCpus, M.NumCpus));
  if (S.ImageCrc != M.ImageCrc)
    return Mismatch(fmt::format("image '{}' (CRC-32C {:08x} of the image, modules and "
                                "command line), this machine runs '{}' ({:08x})",
                                S.Image, S.ImageCrc, M.Image, M.ImageCrc));
  if (S.Model != M.Model || S.Vmx != M.Vmx)
    return Mismatch(fmt::format("processor model {} with VMX profile {}, this machine has "
                                "{} with {}",
                                S.Model, S.Vmx.empty() ? "(the model's)" : S.Vmx, M.Model,
                                M.Vmx.empty() ? "(the model's)" : M.Vmx));
  if (S.Quantum != M.Quantum)
    return Mismatch(fmt::format("scheduler quantum {} cycles, this machine has {}",
                                S.Quantum, M.Quantum));
  if (S.GroundTruth != M.GroundTruth || S.GroundTruthInsns != M.GroundTruthInsns ||
      S.Xentrace != M.Xentrace || S.TraceInsns != M.TraceInsns)
    return Mismatch(fmt::format(
        "traces ground truth {}, ground-truth instructions {}, hypervisor trace {}, "
        "instruction trace {}; this machine has {}, {}, {}, {}",
        onOff(S.GroundTruth), onOff(S.GroundTruthInsns), onOff(S.Xentrace),
        onOff(S.TraceInsns), onOff(M.GroundTruth), onOff(M.GroundTruthInsns),
        onOff(M.Xentrace), onOff(M.TraceInsns)));
  return Error::success();
}

Error Machine::saveSnapshot(const std::string &Path) {
  // What cannot be saved (a snapshot that restores wrong is worse than none).
  for (const Uart16550 *U : {&Uart, &Uart2})
    if (U->input() && U->input()->interactive())
      return Error(ErrorCode::NotSnapshottable,
                   fmt::format("cannot snapshot: {}'s serial input is the host's standard "
                               "input (not deterministic)",
                               U == &Uart ? "COM1" : "COM2"));
  if (XenDrain)
    return Error(ErrorCode::NotSnapshottable,
                 "cannot snapshot: the Xen trace drain (--xen-trace) is not saved in snapshots");
  // The outputs' bytes so far are counted, not saved: flush what the host buffers.
  Scheduler &Sch = scheduler();
  SnapshotWriter W;
  W.begin("CONF");
  saveConfig(W);
  W.end();
  W.begin("MEM ");
  Mem.save(W);
  W.end();
  W.begin("IOBS");
  Io.save(W);
  Latch.save(W);
  W.end();
  for (unsigned I = 0; I < Cpus.size(); ++I) {
    W.begin("CPU ");
    Cpus[I]->save(W);
    Apics[I]->save(W);
    W.end();
  }
  W.begin("DEVS");
  Uart.save(W);
  Uart2.save(W);
  Fw.save(W);
  Pci.save(W);
  Pic.Master.save(W);
  Pic.Slave.save(W);
  W.io(ApicRouter.Current);
  Pit.save(W);
  IoApicDev.save(W);
  A20.save(W);
  SysA.save(W);
  SysB.save(W);
  FpuError.save(W);
  ResetCtl.save(W);
  Post.save(W);
  Rtc.save(W);
  HpetDev.save(W);
  Kbc.save(W);
  W.io(RtcIrqLevel);
  PowerOff.save(W);
  Pm.save(W);
  W.end();
  W.begin("SCHD");
  Sch.save(W);
  W.end();
  W.begin("OUTS");
  const OutputOffsets O = currentOutputOffsets();
  W.all(O.Serial, O.Serial2, O.Debugcon, O.TraceInsns);
  W.end();
  if (GroundTruthWriter) {
    W.begin("GT  ");
    GroundTruthWriter->save(W);
    GroundTruthTransitions->save(W);
    W.end();
  }
  if (XentraceWriter) {
    W.begin("XT  ");
    XentraceWriter->save(W);
    TraceDrain->save(W);
    W.end();
  }
  if (Replay) {
    W.begin("INPL");
    for (const Uart16550 *U : {&Uart, &Uart2}) {
      const SerialInput *In = U->input();
      const bool Replays = In && In->replays();
      W.io(Replays);
      if (Replays)
        W.all(In->polls(), uint64_t(In->replayPosition()));
    }
    W.end();
  }
  const std::vector<uint8_t> File = W.finish();
  // Written beside the target and renamed over it: a reader never sees half a file.
  const std::string Tmp = Path + ".tmp";
  std::FILE *F = std::fopen(Tmp.c_str(), "wb");
  if (!F)
    return Error(ErrorCode::HostFailure,
                 fmt::format("cannot create snapshot: {}", std::strerror(errno)), Path);
  const bool Wrote = std::fwrite(File.data(), 1, File.size(), F) == File.size();
  const int WriteErrno = errno;
  const bool Closed = std::fclose(F) == 0;
  if (!Wrote || !Closed || std::rename(Tmp.c_str(), Path.c_str()) != 0) {
    const int E = !Wrote ? WriteErrno : errno;
    std::remove(Tmp.c_str());
    return Error(ErrorCode::HostFailure,
                 fmt::format("cannot write snapshot: {}", std::strerror(E ? E : EIO)), Path);
  }
  return Error::success();
}

Error Machine::restoreSnapshot(const std::string &Path) {
  std::vector<uint8_t> File;
  if (Error E = readWholeFile(Path, File))
    return E;
  SnapshotReader R;
  std::string Why;
  if (!R.open(std::move(File), Why))
    return Error(ErrorCode::BadSnapshot, Why, Path);
  if (!R.begin("CONF"))
    return Error(ErrorCode::BadSnapshot, R.error(), Path);
  if (Error E = checkConfig(R)) {
    E.Path = Path;
    return E;
  }
  if (!R.end())
    return Error(ErrorCode::BadSnapshot, R.error(), Path);

  Scheduler &Sch = scheduler();
  if (R.begin("MEM "))
    Mem.load(R);
  R.end();
  if (R.begin("IOBS")) {
    Io.load(R);
    Latch.load(R);
  }
  R.end();
  for (unsigned I = 0; I < Cpus.size(); ++I) {
    if (R.begin("CPU ")) {
      Cpus[I]->load(R);
      Apics[I]->load(R);
    }
    R.end();
  }
  if (R.begin("DEVS")) {
    Uart.load(R);
    Uart2.load(R);
    Fw.load(R);
    Pci.load(R);
    Pic.Master.load(R);
    Pic.Slave.load(R);
    R.io(ApicRouter.Current);
    if (ApicRouter.Current >= Cpus.size()) {
      R.fail("the snapshot's executing CPU is out of range");
      ApicRouter.Current = 0;
    }
    Pit.load(R);
    IoApicDev.load(R);
    A20.load(R);
    SysA.load(R);
    SysB.load(R);
    FpuError.load(R);
    ResetCtl.load(R);
    Post.load(R);
    Rtc.load(R);
    HpetDev.load(R);
    Kbc.load(R);
    R.io(RtcIrqLevel);
    PowerOff.load(R);
    Pm.load(R);
  }
  R.end();
  if (R.begin("SCHD"))
    Sch.load(R);
  R.end();
  OutputOffsets O;
  if (R.begin("OUTS"))
    R.all(O.Serial, O.Serial2, O.Debugcon, O.TraceInsns);
  R.end();
  if (GroundTruthWriter) {
    if (R.begin("GT  ")) {
      GroundTruthWriter->load(R);
      GroundTruthTransitions->load(R);
    }
    R.end();
    O.GroundTruth = GroundTruthWriter->bytesWritten();
  }
  if (XentraceWriter) {
    if (R.begin("XT  ")) {
      XentraceWriter->load(R);
      TraceDrain->load(R);
    }
    R.end();
    O.Xentrace = XentraceWriter->bytesWritten();
  }
  const bool SavedReplay = R.ok() && R.peekTag() == "INPL";
  if (R.ok() && SavedReplay != bool(Replay))
    return Error(ErrorCode::SnapshotMismatch,
                 SavedReplay ? "snapshot of a run that replayed an input log: restore it "
                               "with --replay-input and that log"
                             : "snapshot of a run that replayed no input log: restore it "
                               "without --replay-input",
                 Path);
  if (SavedReplay && R.begin("INPL")) {
    installReplayInputs();
    for (Uart16550 *U : {&Uart, &Uart2}) {
      bool Replays = false;
      uint64_t Polls = 0, Position = 0;
      R.io(Replays);
      if (Replays)
        R.all(Polls, Position);
      SerialInput *In = U->input();
      if (R.ok() && Replays != (In && In->replays()))
        R.fail("the input log feeds other ports than the snapshot's run read");
      else if (R.ok() && Replays && !In->seekReplay(Polls, size_t(Position)))
        R.fail("the snapshot is past the end of the input log");
    }
    R.end();
  }
  if (R.ok() && !R.peekTag().empty())
    R.fail("section " + R.peekTag() + " is not one this vmxsim reads");
  if (!R.ok())
    return Error(ErrorCode::BadSnapshot, R.error(), Path);
  SerialSink.setProduced(O.Serial);
  if (Serial2Out == &Serial2Sink)
    Serial2Sink.setProduced(O.Serial2);
  if (!SharedDebugcon)
    DebugconSink.setProduced(O.Debugcon);
  TraceSink.setProduced(O.TraceInsns);
  RestoredOffsets = O;
  return Error::success();
}

} // namespace vmxsim
