# Sourced by the scripts that boot a GRUB rescue ISO on Bochs 2.7 (run-bochs.sh,
# compare-xen-bochs.sh).

# writeBochsrc FILE ISO MEGS COM1_FILE LOG_FILE: a headless Bochs configuration that
# boots ISO from a CD-ROM with MEGS MiB, COM1 written to COM1_FILE, port 0xe9 enabled.
# BOCHS_CPU (default corei7_skylake_x: VMX with EPT, VPID, unrestricted guest and the
# preemption timer), BOCHS_CPUS (default 1) and BOCHS_IPS (default 50000000) choose the
# processor. clock: sync=none with a fixed time0 makes runs repeatable (no host clock).
writeBochsrc() {
  cat > "$1" <<RC
megs: $3
cpu: model=${BOCHS_CPU:-corei7_skylake_x}, count=${BOCHS_CPUS:-1}, ips=${BOCHS_IPS:-50000000}, reset_on_triple_fault=0
clock: sync=none, time0=946681200
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
display_library: sdl2
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-slave: type=cdrom, path="$2", status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev="$4"
port_e9_hack: enabled=1
speaker: enabled=0
sound: waveoutdrv=dummy, waveindrv=dummy, midioutdrv=dummy
panic: action=fatal
error: action=report
log: $5
RC
}
