#include "harness/machine.h"

#include "cpu/cpu_model.h"
#include "harness/devices/cmos_layout.h"
#include "harness/firmware.h"
#include "harness/ground_truth_link.h"
#include "harness/insn_trace.h"
#include "harness/xen_trace_drain.h"
#include "trace/async_output.h"
#include "trace/ground_truth.h"
#include "trace/slot_layout.h"
#include "trace/writer.h"

#include <fmt/format.h>

namespace vmxsim {

Error Machine::validate(const MachineConfig &Cfg) {
  if (Cfg.RamBytes < kMinRamBytes || Cfg.RamBytes > kMaxRamBytes)
    return Error(ErrorCode::BadConfig,
                 fmt::format("memory size {} bytes is outside 2 MiB..64 GiB", Cfg.RamBytes));
  if (Cfg.RamBytes % kPageSize)
    return Error(ErrorCode::BadConfig,
                 fmt::format("memory size {} bytes is not a multiple of 4 KiB", Cfg.RamBytes));
  if (Cfg.NumCpus < 1 || Cfg.NumCpus > kMaxCpus)
    return Error(ErrorCode::BadConfig,
                 fmt::format("CPU count {} is outside 1..{}", Cfg.NumCpus, kMaxCpus));
  if (Cfg.RtcBaseSeconds < 0 || Cfg.RtcBaseSeconds > kMaxRtcBase)
    return Error(ErrorCode::BadConfig,
                 fmt::format("RTC base {} is outside 0..{} (1970 to 9999)", Cfg.RtcBaseSeconds,
                             kMaxRtcBase));
  const bool HasImage = !Cfg.Kernel.empty() || !Cfg.KernelImage.empty();
  if (Cfg.SerialIn == "-" && Cfg.Serial2In == "-")
    return Error(ErrorCode::BadConfig,
                 "only one serial port can take its input from standard input");
  if (!Cfg.RecordInput.empty() && !Cfg.ReplayInput.empty())
    return Error(ErrorCode::BadConfig, "an input log is either recorded or replayed, not both");
  if (Cfg.FlatAddr && !HasImage)
    return Error(ErrorCode::BadConfig, "a flat load address needs an image");
  if (!Cfg.XenTraceFile.empty() && Cfg.XenSymsFile.empty())
    return Error(ErrorCode::BadSymbolFile,
                 "draining Xen's trace (--xen-trace) needs Xen's symbol file (--xen-syms "
                 "xen-syms, from xen-hypervisor-4.17-amd64-dbg)");
  if (Cfg.XenTraceFile.empty() && !Cfg.XenSymsFile.empty())
    return Error(ErrorCode::BadConfig, "a Xen symbol file (--xen-syms) is only read for --xen-trace");
  if (!Cfg.XenTraceFile.empty() && Cfg.XenTraceEvery == 0)
    return Error(ErrorCode::BadConfig, "the Xen trace drain's interval must be at least 1 instruction");
  if (Cfg.FlatAddr && !Cfg.Modules.empty())
    return Error(ErrorCode::BadConfig, "modules need a Multiboot kernel, not a flat image");
  if (!HasImage && !Cfg.Modules.empty())
    return Error(ErrorCode::BadConfig, "modules need a kernel");
  return Error::success();
}

namespace {
bool sameFile(const OutputSpec &A, const OutputSpec &B) {
  return A.K == OutputSpec::Kind::File && B.K == OutputSpec::Kind::File && A.Path == B.Path;
}
} // namespace

Machine::Machine(const MachineConfig &C)
    : Cfg(C), Mem(C.RamBytes), Latch(Io),
      Serial2Out(sameFile(C.Serial2, C.Serial)     ? &SerialSink
                 : sameFile(C.Serial2, C.Debugcon) ? &DebugconSink
                                                   : &Serial2Sink),
      Uart(Uart16550::kCom1, SerialSink), Uart2(Uart16550::kCom2, *Serial2Out), DbgExit(Latch),
      Fw(C.RamBytes, C.NumCpus), SysA(Latch, A20), SysB(Pit), ResetCtl(Latch),
      Rtc(C.RtcBaseSeconds), Kbc(Latch, A20), PowerOff(Latch), Pm(Latch) {}

Machine::~Machine() {
  // Detach observers before the tracer goes away.
  for (auto &C : Cpus) {
    C->Observer = nullptr;
    C->Transitions = nullptr;
    GroundTruthLink::detachInline(*C);
  }
}

std::unique_ptr<Machine> Machine::create(const MachineConfig &Cfg, Error &Err) {
  Err = validate(Cfg);
  if (Err)
    return nullptr;
  std::unique_ptr<Machine> M(new Machine(Cfg));
  if (!M->Mem.ok()) {
    Err = Error(ErrorCode::HostFailure,
                fmt::format("the host refused {} bytes of address space for guest RAM",
                            Cfg.RamBytes));
    return nullptr;
  }
  Err = M->init();
  if (Err)
    return nullptr;
  return M;
}

Error Machine::init() {
  if (Error E = SerialSink.open(Cfg.Serial))
    return E;
  SharedDebugcon = sameFile(Cfg.Debugcon, Cfg.Serial);
  if (!SharedDebugcon)
    if (Error E = DebugconSink.open(Cfg.Debugcon))
      return E;
  if (Serial2Out == &Serial2Sink)
    if (Error E = Serial2Sink.open(Cfg.Serial2))
      return E;
  Debugcon = std::make_unique<DebugConsole>(SharedDebugcon ? SerialSink : DebugconSink);
  for (auto [Spec, U] : {std::pair{&Cfg.SerialIn, &Uart}, std::pair{&Cfg.Serial2In, &Uart2}})
    if (!Spec->empty()) {
      std::unique_ptr<SerialInput> In;
      if (Error E = SerialInput::open(*Spec, In))
        return E;
      U->setInput(std::move(In));
    }

  // Later registrations win on the bus; none of these overlap.
  Io.add(Uart16550::kCom1, 8, &Uart);
  Io.add(Uart16550::kCom2, 8, &Uart2);
  Io.add(DebugConsole::kPort, 1, Debugcon.get());
  Io.add(DebugExit::kPort, DebugExit::kSize, &DbgExit);
  Io.add(FwCfg::kSelectorPort, 2, &Fw);
  Io.add(PciHost::kAddressPort, 8, &Pci);
  Pic.attach(Io);
  Io.add(SystemControlA::kPort, 1, &SysA);
  Io.add(SystemControlB::kPort, 1, &SysB);
  Io.add(CoprocessorError::kPort, 1, &FpuError);
  FpuError.Irq = [this](bool Level) { isaIrqLevel(CoprocessorError::kIrq, Level); };
  Io.add(PowerOffPort::kPort, 1, &PowerOff);
  Io.add(AcpiPm::kBase, AcpiPm::kSize, &Pm);
  Mem.addMmio(Hpa(LocalApic::kBase), LocalApic::kSize, &ApicRouter);
  // The PIT and the I/O APIC see the clock of the vCPU that is executing.
  Io.add(Pit8254::kBase, 4, &Pit);
  Mem.addMmio(Hpa(IoApic::kBase), IoApic::kSize, &IoApicDev);
  ApicRouter.LevelEoi = &IoApicDev;
  Pit.Now = IoApicDev.Now = [this] {
    return ApicRouter.Current < Cpus.size() ? Cpus[ApicRouter.Current]->Cycles : 0;
  };
  Pm.Now = Pit.Now; // the ACPI PM timer counts from the same clock
  Pit.Irq0 = [this] {
    if (!HpetDev.legacyReplacement()) // the HPET's legacy route disconnects the PIT
      isaIrqEdge(0);
  };
  Pit.Irq0Observed = [this] { return !HpetDev.legacyReplacement() && isaIrqObserved(0); };
  initPlatform();

  Model = Cfg.Model ? *Cfg.Model : CpuModel::defaultModel();
  if (Cfg.Vmx)
    Model.Vmx = Cfg.Vmx;
  for (unsigned I = 0; I < Cfg.NumCpus; ++I) {
    Cpus.push_back(std::make_unique<Cpu>(Mem, Io, Model, I));
    Cpus.back()->setExecMode(Cfg.Exec);
    CpuPtrs.push_back(Cpus.back().get());
  }
  for (unsigned I = 0; I < Cfg.NumCpus; ++I) {
    Cpu &C = *Cpus[I];
    C.Mmu.setPeers(CpuPtrs.data(), Cfg.NumCpus);
    Apics.push_back(std::make_unique<LocalApic>(C, ApicRouter, uint8_t(I)));
    Apics.back()->Latch = &Latch;
    ApicRouter.Apics.push_back(Apics.back().get());
    C.Intr = Apics.back().get();
    C.Apic = Apics.back().get();
    C.Ferr = &FpuError;
    FpuError.Cpus.push_back(&C);
    if (I == 0) {
      Apics.back()->Pic = &Pic; // the PIC's INTR line goes to the BSP's LINT0
    } else {
      // wait-for-SIPI (SDM Vol. 3A, MP Initialization Protocol)
      C.Activity = ActivityState::WaitForSipi;
    }
  }
  fillCmosLayout(Rtc, Mem.lowRamBytes(), Mem.highRamBytes(), Cfg.NumCpus);
  // The firmware describes the devices registered above (an HPET is listed when one is
  // mapped at kHpetBase by then).
  FirmwareConfig Firmware;
  Firmware.NumCpus = Cfg.NumCpus;
  Firmware.ComPorts = {Uart16550::kCom1, Uart16550::kCom2};
  Firmware.Hpet = Mem.mmioAt(kHpetBase) != nullptr;
  for (const CpuidLeaf &L : Model.Cpuid)
    if (L.Leaf == 1) {
      Firmware.CpuidSignature = L.Eax;
      Firmware.CpuidFeatures = L.Edx;
    }
  if (Error E = buildFirmware(Mem, Firmware))
    return E;

  if (Error E = loadImage())
    return E;
  if (Error E = setUpInputLog())
    return E;

  if (Cfg.TraceInsns) {
    if (Error E = TraceSink.open(*Cfg.TraceInsns, OutputSink::Buffering::FullyBuffered))
      return E;
    Tracer = std::make_unique<InsnTracer>(TraceSink);
    bsp().Observer = Tracer.get();
  }
  if (!Cfg.GroundTruthFile.empty()) {
    GroundTruthOut = std::make_unique<trace::AsyncFileOutput>();
    std::string Why;
    if (!GroundTruthOut->open(Cfg.GroundTruthFile, Why, Cfg.TraceFileThreads))
      return Error(ErrorCode::HostFailure, Why, Cfg.GroundTruthFile);
    GroundTruthWriter = std::make_unique<trace::TraceWriter>(*GroundTruthOut, Cfg.NumCpus);
    GroundTruth = std::make_unique<trace::GroundTruthRecorder>(*GroundTruthWriter);
    GroundTruthTransitions = std::make_unique<GroundTruthLink>(*GroundTruth);
    // An image that publishes its trace slots (trace/slot_layout.h): the ground truth
    // records every store to them, so `trace check` can prove each recorded value.
    if (SlotTablePa)
      GroundTruthTransitions->watchSlotTable(Mem, CpuPtrs, *SlotTablePa);
    for (auto &C : Cpus) {
      C->Transitions = GroundTruthTransitions.get();
      if (Cfg.GroundTruthInline)
        GroundTruthTransitions->attachInline(*C);
      if (Cfg.GroundTruthInsns) {
        GroundTruthInsnObservers.push_back(
            std::make_unique<GroundTruthInsnObserver>(*GroundTruth, C->Observer));
        C->Observer = GroundTruthInsnObservers.back().get();
      }
    }
  }
  if (!Cfg.XentraceFile.empty()) {
    XentraceOut = std::make_unique<trace::AsyncFileOutput>();
    std::string Why;
    if (!XentraceOut->open(Cfg.XentraceFile, Why, Cfg.TraceFileThreads))
      return Error(ErrorCode::HostFailure, Why, Cfg.XentraceFile);
    XentraceWriter = std::make_unique<trace::TraceWriter>(*XentraceOut, Cfg.NumCpus);
    TraceDrain = std::make_unique<TraceBufferDrain>(Mem, *XentraceWriter);
    Io.add(TraceBufferDrain::kPort, TraceBufferDrain::kSize, TraceDrain.get());
  }
  if (!Cfg.XenTraceFile.empty()) {
    ErrorOr<XenTraceSymbols> Syms = readXenTraceSymbols(Cfg.XenSymsFile);
    if (!Syms)
      return Syms.error();
    XenTraceOut = std::make_unique<trace::AsyncFileOutput>();
    std::string Why;
    if (!XenTraceOut->open(Cfg.XenTraceFile, Why, Cfg.TraceFileThreads))
      return Error(ErrorCode::HostFailure, Why, Cfg.XenTraceFile);
    XenTraceWriter = std::make_unique<trace::TraceWriter>(*XenTraceOut, Cfg.NumCpus);
    XenDrain = std::make_unique<XenTraceDrain>(*this, std::move(*Syms), Cfg.XenSymsFile,
                                               *XenTraceWriter);
  }
  return Error::success();
}

// The platform devices of harness/machine.h's list beyond the interrupt controllers:
// CMOS/RTC, HPET, i8042, the A20 gate, reset control and POST-code ports.
void Machine::initPlatform() {
  Io.add(ResetControl::kPort, 1, &ResetCtl); // over the PCI host's 0xcf8-0xcff (bytes)
  Io.add(PostCodePort::kPort, 1, &Post);
  Io.add(Rtc146818::kIndexPort, 2, &Rtc);
  Io.add(I8042::kDataPort, 1, &Kbc);
  Io.add(I8042::kCommandPort, 1, &Kbc);
  Mem.addMmio(Hpa(Hpet::kBase), Hpet::kSize, &HpetDev);
  auto Now = [this] {
    return ApicRouter.Current < Cpus.size() ? Cpus[ApicRouter.Current]->Cycles : 0;
  };
  Rtc.Now = Now;
  HpetDev.Now = Now;
  // COM1 on IRQ 4, COM2 on IRQ 3 (edge-triggered ISA IRQs, as the MADT leaves them).
  for (auto [U, Line] : {std::pair{&Uart, Uart16550::kCom1Irq}, std::pair{&Uart2, Uart16550::kCom2Irq}}) {
    U->Now = Now;
    U->Irq = [this, Line](bool Level) { isaIrqLevel(Line, Level); };
    U->IrqObserved = [this, Line] { return isaIrqObserved(Line); };
  }
  Rtc.Irq = [this](bool Level) {
    RtcIrqLevel = Level;
    if (!HpetDev.legacyReplacement()) // the HPET's legacy route disconnects the RTC
      isaIrqLevel(8, Level);
  };
  HpetDev.LegacyChanged = [this](bool Legacy) {
    if (RtcIrqLevel)
      isaIrqLevel(8, !Legacy); // IRQ8 leaves the RTC, or comes back to its level
  };
  Rtc.IrqObserved = [this] { return !HpetDev.legacyReplacement() && isaIrqObserved(8); };
  HpetDev.SetLine = [this](bool Legacy, unsigned Line, bool Level) {
    if (Legacy) {
      isaIrqLevel(Line, Level);
    } else {
      IoApicDev.setPin(Line, Level);
      bsp().breakBlock();
    }
  };
  HpetDev.LineObserved = [this](bool Legacy, unsigned Line) {
    return Legacy ? isaIrqObserved(Line) : !(IoApicDev.Redir[Line] & IoApic::kMasked);
  };
  Kbc.Pulse = [this](unsigned Irq) { isaIrqEdge(Irq); };
  // SDM Vol. 3A, "A20M#": the gate changes every physical address the CPUs form, so
  // every cached translation and decoded block goes (the rule in cpu/mmu.h).
  A20.Changed = [this](bool Enabled) {
    Mem.setA20(Enabled);
    for (auto &C : Cpus) {
      C->Mmu.flushTlbAllContexts();
      C->Mmu.flushDecodeCache();
      C->breakBlock();
    }
  };
}

void Machine::isaIrqLevel(unsigned Irq, bool Level) {
  Pic.setIrq(Irq, Level);
  IoApicDev.setPin(Irq == 0 ? 2 : Irq, Level); // MADT: ISA IRQ0 is pin 2
  if (Level && !Cpus.empty())
    bsp().breakBlock();
}

void Machine::isaIrqEdge(unsigned Irq) {
  isaIrqLevel(Irq, true);
  isaIrqLevel(Irq, false);
}

bool Machine::isaIrqObserved(unsigned Irq) const {
  const bool AtPic = Irq < 8 ? !((Pic.Master.Imr >> Irq) & 1)
                             : !((Pic.Slave.Imr >> (Irq - 8)) & 1) && !(Pic.Master.Imr & 4);
  return AtPic || !(IoApicDev.Redir[Irq == 0 ? 2 : Irq] & IoApic::kMasked);
}

Error Machine::loadImage() {
  if (Cfg.Kernel.empty() && Cfg.KernelImage.empty())
    return Error::success();
  const std::string Name = Cfg.Kernel.empty() ? std::string("<memory>") : Cfg.Kernel;
  ImageFile File;
  std::span<const uint8_t> Image = Cfg.KernelImage;
  if (Cfg.KernelImage.empty()) {
    Error E = ImageFile::open(Cfg.Kernel, Cfg.RamBytes, File);
    if (E) {
      E.Path = Cfg.Kernel;
      return E;
    }
    Image = File.bytes();
  }
  ImageCrc = crc32c(crc32c(0, Image.data(), Image.size()), Cfg.Append.data(),
                    Cfg.Append.size());

  // Which loader: --flat first (any bytes can be a flat binary, so only the option says
  // so), then a Linux bzImage (the setup header's "HdrS" at 0x202: a Multiboot header or
  // ELF magic never sits there in a real kernel, and a bzImage has neither), else
  // Multiboot (ELF or the a.out kludge), whose loader names what is wrong with anything
  // that is none of these.
  Error E;
  if (Cfg.FlatAddr) {
    E = loadFlat(bsp(), Image, *Cfg.FlatAddr, Cfg.FlatMode, &Layout);
  } else if (isBzImage(Image)) {
    return loadLinux(Name, Image);
  } else {
    MultibootParams P;
    P.KernelName = Name;
    P.Append = Cfg.Append;
    std::vector<ImageFile> ModuleFiles(Cfg.Modules.size());
    for (size_t I = 0; I < Cfg.Modules.size(); ++I) {
      const std::string &Spec = Cfg.Modules[I];
      // "path args": the path ends at the first space; the whole text is the module's
      // string (as QEMU's -initrd passes it).
      std::string Path = Spec.substr(0, Spec.find(' '));
      ModuleImage M;
      M.CmdLine = Spec;
      Error ME = ImageFile::open(Path, std::min<uint64_t>(Cfg.RamBytes, 1ull << 32),
                                 ModuleFiles[I]);
      if (ME) {
        ME.Path = Path;
        return ME;
      }
      M.Bytes = ModuleFiles[I].bytes();
      ImageCrc = crc32c(crc32c(ImageCrc, Spec.data(), Spec.size()), M.Bytes.data(),
                        M.Bytes.size());
      P.Modules.push_back(std::move(M));
    }
    E = loadMultiboot(bsp(), Image, P, &Layout);
    uint64_t TablePa = 0, TableBytes = 0;
    if (!E && findElfSymbol(Image, XT_SLOT_LAYOUT_SYMBOL, TablePa, TableBytes) &&
        TableBytes == XT_SLOT_LAYOUT_BYTES)
      SlotTablePa = TablePa;
  }
  if (E)
    E.Path = Name;
  return E;
}

Error Machine::loadLinux(const std::string &Name, std::span<const uint8_t> Image) {
  // QEMU's -initrd for a Linux kernel: one file, the initial ramdisk.
  LinuxParams P;
  P.CmdLine = Cfg.Append;
  if (Cfg.Modules.size() > 1)
    return Error(ErrorCode::BadConfig,
                 fmt::format("a Linux kernel takes one initrd, {} were given", Cfg.Modules.size()),
                 Name);
  ImageFile Initrd;
  if (!Cfg.Modules.empty()) {
    const std::string &Path = Cfg.Modules[0];
    if (Error IE = ImageFile::open(Path, std::min<uint64_t>(Cfg.RamBytes, 1ull << 32), Initrd)) {
      IE.Path = Path;
      return IE;
    }
    P.Initrd = Initrd.bytes();
    ImageCrc = crc32c(ImageCrc, P.Initrd.data(), P.Initrd.size());
  }
  Error E = loadBzImage(bsp(), Image, P, &Layout);
  if (E)
    E.Path = Name;
  return E;
}

RunResult Machine::run() { return runScheduled(nullptr, 0, Cfg.MaxInsns, false); }

RunResult Machine::run(const ProgressFn &Progress, uint64_t EveryInsns) {
  return runScheduled(&Progress, EveryInsns, Cfg.MaxInsns, false);
}

void Machine::finishOutputs() {
  if (InputRecorder)
    InputRecorder->finish();
  SerialSink.flush();
  Serial2Sink.flush();
  DebugconSink.flush();
  TraceSink.flush();
  if (GroundTruthWriter)
    GroundTruthWriter->flush();
  if (TraceDrain)
    TraceDrain->drainAll();
  if (XenDrain) {
    XenDrain->drain();
    XenTraceWriter->flush();
  }
}

RunResult Machine::runToRetired(uint64_t Total, const ProgressFn *Progress,
                                uint64_t EveryInsns) {
  return runScheduled(Progress, EveryInsns, Total, true);
}

Scheduler &Machine::scheduler() {
  if (!Sched) {
    std::vector<LocalApic *> ApicPtrs;
    for (auto &A : Apics)
      ApicPtrs.push_back(A.get());
    Sched = std::make_unique<Scheduler>(CpuPtrs, std::move(ApicPtrs), ApicRouter,
                                        Cfg.QuantumCycles);
    Sched->addSharedSource(&Pit);
    Sched->addSharedSource(&Rtc);
    Sched->addSharedSource(&HpetDev);
    Sched->addSharedSource(&Uart);
    Sched->addSharedSource(&Uart2);
  }
  return *Sched;
}

RunResult Machine::runScheduled(const ProgressFn *Progress, uint64_t EveryInsns,
                                uint64_t MaxTotal, bool Stoppable) {
  Scheduler &Sch = scheduler();
  if (Progress && *Progress && EveryInsns)
    Sch.setProgress(*Progress, EveryInsns);
  else
    Sch.setProgress(nullptr, 0);
  Sch.setStopFlag(Cfg.StopFlag);
  if (XenDrain)
    Sch.setDrainPoints([this] { XenDrain->drain(); }, Cfg.XenTraceEvery);
  const Scheduler::Outcome Out = Sch.run(std::min(MaxTotal, Cfg.MaxInsns));
  const StopReason Why = Out.Why;
  // A stop of the run control: a condition's break (IoBus::requestBreak), a limit, or
  // this call's own budget below the machine's. A device stop in the same instruction
  // stays pending: the next run returns it at once.
  const bool Broke = Why == StopReason::StopRequested && Io.breakRequested();
  Io.clearBreak();
  const bool Stopped =
      Stoppable && !Out.Interrupted &&
      (Broke || Out.Limit ||
       (Why == StopReason::InsnLimit && MaxTotal < Cfg.MaxInsns &&
        Sch.totalRetired() >= MaxTotal));
  Cpu &C = cpu(Stopped && !Broke && !Out.Limit ? Sch.lastCpu() : Out.CpuId);
  SerialSink.flush();
  Serial2Sink.flush();
  DebugconSink.flush();
  TraceSink.flush();
  // Draining the rings (which the guest sees: their consumer index) or flushing the
  // ground truth's buffers (which cuts its windows) at a run-control stop would make the
  // files differ from an unstopped run's; they are drained and flushed when it ends.
  if (!Stopped) {
    if (InputRecorder)
      InputRecorder->finish();
    if (GroundTruthWriter)
      GroundTruthWriter->flush();
    if (TraceDrain)
      TraceDrain->drainAll();
    if (XenDrain) {
      XenDrain->drain();
      XenTraceWriter->flush();
    }
  }

  RunResult R;
  R.Retired = Sch.totalRetired();
  R.Cycles = bsp().Cycles;
  R.CpuId = C.Id;
  R.Rip = C.S.Rip;
  if (Stopped) {
    R.Reason = RunReason::Stopped;
    R.ExitStatus = 0;
    return R;
  }
  if (Out.Interrupted) {
    R.Reason = RunReason::Interrupted;
    R.ExitStatus = kExitInterrupted;
    return R;
  }
  switch (Why) {
  case StopReason::StopRequested:
    switch (Latch.cause()) {
    case StopCause::DebugExit:
      R.Reason = RunReason::GuestExit;
      R.ExitValue = Latch.value();
      R.ExitStatus = DebugExit::exitStatusFor(R.ExitValue);
      break;
    case StopCause::Reset:
      R.Reason = RunReason::Reset;
      R.ExitValue = Latch.value(); // the port
      R.ExitStatus = 0;
      break;
    case StopCause::PowerOff:
      R.Reason = RunReason::PowerOff;
      R.ExitValue = Latch.value(); // the port: 0x8900, or PM1a_CNT (ACPI S5)
      R.ExitStatus = Io.exitStatus();
      break;
    case StopCause::Unimplemented:
      R.Reason = RunReason::Unimplemented;
      R.ExitStatus = kExitUnimplemented;
      R.What = Latch.what();
      break;
    case StopCause::None: // an embedder's own IoBus::requestStop
      R.Reason = RunReason::PowerOff;
      R.ExitStatus = Io.exitStatus();
      break;
    }
    break;
  case StopReason::Shutdown:
    R.Reason = RunReason::TripleFault;
    R.ExitStatus = kExitTripleFault;
    break;
  case StopReason::Halted: {
    // Every CPU waits (HLT with nothing deliverable and no timer armed, or wait-for-SIPI)
    // and no event can come: the machine has nothing left to do.
    R.Reason = RunReason::Halted;
    R.ExitStatus = kExitHalted;
    unsigned Waiting = 0;
    for (auto &C : Cpus)
      Waiting += C->Activity == ActivityState::WaitForSipi && !C->NonRoot;
    if (Waiting)
      R.What = fmt::format("{} of {} CPUs never received a start-up IPI", Waiting,
                           numCpus());
    break;
  }
  case StopReason::Unimplemented:
    R.Reason = RunReason::Unimplemented;
    R.ExitStatus = kExitUnimplemented;
    R.What = C.StopWhat ? C.StopWhat : "an unnamed feature";
    R.Rip = C.StopWhat ? C.StopRip : C.S.Rip;
    break;
  case StopReason::LockstepMismatch:
    R.Reason = RunReason::LockstepMismatch;
    R.ExitStatus = kExitLockstepMismatch;
    R.What = C.StopWhat ? C.StopWhat : "lockstep mismatch";
    R.Rip = C.StopRip;
    break;
  case StopReason::InsnLimit:
  case StopReason::Deadline:
    R.Reason = RunReason::InsnLimit;
    R.ExitStatus = kExitInsnLimit;
    break;
  }
  return R;
}

std::vector<std::string> Machine::outputProblems() const {
  std::vector<std::string> Out;
  for (const OutputSink *S : {&SerialSink, &Serial2Sink, &DebugconSink, &TraceSink})
    if (!S->failure().empty())
      Out.push_back(S->failure());
  if (GroundTruthWriter && !GroundTruthWriter->ok())
    Out.push_back(GroundTruthOut->failure());
  if (XentraceWriter && !XentraceWriter->ok())
    Out.push_back(XentraceOut->failure());
  if (XenTraceWriter && !XenTraceWriter->ok())
    Out.push_back(XenTraceOut->failure());
  return Out;
}

Error Machine::setUpInputLog() {
  if (!Cfg.RecordInput.empty()) {
    // Needs the image's CRC (loadImage) for the machine line.
    const unsigned Ports = (Cfg.SerialIn == "-" ? 1u : 0u) | (Cfg.Serial2In == "-" ? 2u : 0u);
    InputRecorder = std::make_unique<InputLogWriter>();
    if (Error E = InputRecorder->open(Cfg.RecordInput, ImageCrc, Cfg.NumCpus, Ports))
      return E;
    for (auto [P, U] : {std::pair{1u, &Uart}, std::pair{2u, &Uart2}})
      if (Ports & (1u << (P - 1)))
        U->recordInput(InputRecorder.get(), P);
  }
  if (!Cfg.ReplayInput.empty()) {
    InputLog Log;
    if (Error E = InputLog::read(Cfg.ReplayInput, Log)) {
      E.Code = ErrorCode::BadInputLog; // a missing log too: the input log's status
      return E;
    }
    auto Mismatch = [&](std::string What) {
      return Error(ErrorCode::InputLogMismatch, "input log of another machine: " + What,
                   Cfg.ReplayInput);
    };
    if (Log.ImageCrc != ImageCrc)
      return Mismatch(fmt::format("image CRC-32C {:08x} (image, modules and command line), "
                                  "this machine runs {:08x}",
                                  Log.ImageCrc, ImageCrc));
    if (Log.NumCpus != Cfg.NumCpus)
      return Mismatch(fmt::format("{} CPUs, this machine has {}", Log.NumCpus, Cfg.NumCpus));
    for (auto [P, Spec] : {std::pair{1u, &Cfg.SerialIn}, std::pair{2u, &Cfg.Serial2In}})
      if ((Log.Ports & (1u << (P - 1))) && !Spec->empty() && *Spec != "-")
        return Mismatch(fmt::format("it feeds COM{}, which reads the file '{}' here", P, *Spec));
    Replay = std::move(Log);
    installReplayInputs();
  }
  return Error::success();
}

void Machine::installReplayInputs() {
  for (auto [P, U] : {std::pair{1u, &Uart}, std::pair{2u, &Uart2}}) {
    if (!(Replay->Ports & (1u << (P - 1))))
      continue;
    std::vector<InputEvent> Mine;
    for (const InputEvent &E : Replay->Events)
      if (E.Port == P)
        Mine.push_back(E);
    U->setInput(SerialInput::replaying(std::move(Mine), P));
  }
}

GdbStopPoint Machine::stopPoint() const {
  GdbStopPoint P;
  for (const auto &C : Cpus) {
    P.Retired += C->Retired;
    P.Cycles.push_back(C->Cycles);
  }
  return P;
}

void Machine::logGdbWrite(const GdbWrite &W) {
  if (InputRecorder)
    InputRecorder->addGdbWrite(stopPoint(), W);
}

const std::vector<GdbStopPoint> &Machine::replayedGdbStops() const {
  static const std::vector<GdbStopPoint> None;
  return Replay ? Replay->Gdb : None;
}

std::string Machine::inputLogProblem() const {
  if (InputRecorder && !InputRecorder->failure().empty())
    return InputRecorder->failure();
  for (const Uart16550 *U : {&Uart, &Uart2})
    if (U->input() && !U->input()->replayMismatch().empty())
      return U->input()->replayMismatch();
  return {};
}

std::string RunResult::describe() const {
  switch (Reason) {
  case RunReason::GuestExit:
    return fmt::format("guest exit {:#x} (status {})", ExitValue, ExitStatus);
  case RunReason::PowerOff:
    return ExitValue == AcpiPm::kPm1aCnt ? "guest powered off (ACPI S5, PM1a_CNT)"
                                         : "guest powered off (port 0x8900)";
  case RunReason::Reset:
    return fmt::format("guest reset (port {:#x})", ExitValue);
  case RunReason::TripleFault:
    return fmt::format("triple fault at RIP={:#x} (CPU {})", Rip, CpuId);
  case RunReason::InsnLimit:
    return fmt::format("instruction limit reached at RIP={:#x} (CPU {})", Rip, CpuId);
  case RunReason::Halted:
    return fmt::format("all CPUs halted with no wakeup possible (CPU {} at RIP={:#x}){}{}",
                       CpuId, Rip, What.empty() ? "" : "; ", What);
  case RunReason::Unimplemented:
    return fmt::format("unimplemented: {} at RIP={:#x} (CPU {})", What, Rip, CpuId);
  case RunReason::LockstepMismatch:
    return fmt::format("{} (CPU {})", What, CpuId);
  case RunReason::Interrupted:
    return fmt::format("stopped{}{} at RIP={:#x} (CPU {})", What.empty() ? "" : " by ", What,
                       Rip, CpuId);
  case RunReason::Stopped:
    return fmt::format("stopped at {} at RIP={:#x} (CPU {})", What, Rip, CpuId);
  }
  return "stopped";
}

std::string RunResult::summary() const {
  return fmt::format("vmxsim: {}; {} instructions, {} cycles", describe(), Retired, Cycles);
}

std::string formatCpuState(const CpuState &S) {
  static const char *const Names[16] = {"RAX", "RCX", "RDX", "RBX", "RSP", "RBP",
                                        "RSI", "RDI", "R8",  "R9",  "R10", "R11",
                                        "R12", "R13", "R14", "R15"};
  std::string Out;
  for (unsigned I = 0; I < 16; ++I)
    Out += fmt::format("{:<3}={:016x}{}", Names[I], S.Gpr[I], I % 4 == 3 ? "\n" : " ");
  Out += fmt::format("RIP={:016x} RFLAGS={:08x} CPL={}\n", S.Rip, S.Rflags, S.cpl());
  static const char *const SegNames[6] = {"ES", "CS", "SS", "DS", "FS", "GS"};
  for (unsigned I = 0; I < kNumSegRegs; ++I)
    Out += fmt::format("{} ={:04x} base={:016x} limit={:08x} attr={:05x}\n", SegNames[I],
                       S.Seg[I].Selector, S.Seg[I].Base, S.Seg[I].Limit, S.Seg[I].Attr);
  Out += fmt::format("TR ={:04x} base={:016x} limit={:08x} attr={:05x}\n", S.Tr.Selector,
                     S.Tr.Base, S.Tr.Limit, S.Tr.Attr);
  Out += fmt::format("GDTR={:016x}/{:04x} IDTR={:016x}/{:04x}\n", S.Gdtr.Base, S.Gdtr.Limit,
                     S.Idtr.Base, S.Idtr.Limit);
  Out += fmt::format("CR0={:08x} CR2={:016x} CR3={:016x} CR4={:08x} EFER={:x}", S.Cr0, S.Cr2,
                     S.Cr3, S.Cr4, S.Efer);
  return Out;
}

} // namespace vmxsim
