# vmxsim_add_guest_image(NAME [NO_RUNTIME] SOURCES src...) builds
#   ${CMAKE_BINARY_DIR}/hvm/NAME.elf from SOURCES plus the runtime (boot/, lib/), unless
#   NO_RUNTIME. An image provides kmain() (boot/boot.h).
# vmxsim_guest_source_flags(src flags...) adds compiler flags for one source file.
#
# Each object is one add_custom_command running the guest compiler with exactly the
# flags below, so nothing set for the host emulator (sanitizers, CMAKE_C_FLAGS,
# build-type flags, directory compile/link options) can reach an image.

if(NOT CMAKE_HOST_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  message(FATAL_ERROR "hvm: the guest images are built by the host gcc; need an x86-64 host")
endif()

# The flags below are gcc's (-mstringop-strategy, -mgeneral-regs-only); use gcc even
# when the emulator is built with another compiler.
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  set(_vmxsim_default_guest_cc ${CMAKE_C_COMPILER})
else()
  find_program(_vmxsim_default_guest_cc NAMES gcc REQUIRED)
endif()
set(VMXSIM_GUEST_CC ${_vmxsim_default_guest_cc} CACHE FILEPATH "gcc used for the freestanding guest images")

# gcc's own header directory: stdint.h, stddef.h, stdarg.h, stdbool.h, cpuid.h. -nostdinc
# keeps the host C library's headers out, so an accidental #include <stdio.h> fails.
execute_process(COMMAND ${VMXSIM_GUEST_CC} -print-file-name=include
  OUTPUT_VARIABLE _vmxsim_guest_gcc_include OUTPUT_STRIP_TRAILING_WHITESPACE)

get_filename_component(_vmxsim_hvm_dir ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)

set(_cflags
  -std=gnu11
  -ffreestanding -nostdinc -isystem ${_vmxsim_guest_gcc_include}
  # Linked at 1 MiB and identity mapped below 4 GiB: absolute 32-bit addresses work,
  # so the small code model; -mcmodel=kernel needs the top 2 GiB of the address space.
  -fno-pic -fno-pie -mcmodel=small
  # Exceptions are taken on the current stack, so nothing may live below RSP.
  -mno-red-zone
  # No runtime support for these; -fcf-protection=none keeps endbr64 out even where the
  # distribution's gcc enables it by default, so the instruction stream is the same.
  -fno-stack-protector -fno-stack-clash-protection -fcf-protection=none
  -fno-asynchronous-unwind-tables -fno-unwind-tables
  -O2 -g0 -Wall -Wextra
  -I${_vmxsim_hvm_dir})
if(VMXSIM_WERROR)
  list(APPEND _cflags -Werror)
endif()

set(_ldflags
  -nostdlib -static -no-pie
  -Wl,--build-id=none -Wl,-z,max-page-size=0x1000
  # One RWX segment on purpose: the Multiboot a.out kludge loads the file as one flat
  # range, and the self-modifying-code test writes into code.
  -Wl,--no-warn-rwx-segments
  -Wl,--orphan-handling=error)

# Cache variables, not plain ones: the helper may be called from any directory (tests/,
# benchmarks/), where this directory's variables are not visible.
set(VMXSIM_GUEST_CFLAGS ${_cflags} CACHE INTERNAL "Compiler flags of the guest images")
set(VMXSIM_GUEST_LDFLAGS ${_ldflags} CACHE INTERNAL "Linker flags of the guest images")
set(VMXSIM_GUEST_LINKER_SCRIPT ${_vmxsim_hvm_dir}/boot/image.ld CACHE INTERNAL "")
set(VMXSIM_HVM_DIR ${_vmxsim_hvm_dir} CACHE INTERNAL "Source directory of hvm/")
set(VMXSIM_IMAGE_DIR ${CMAKE_BINARY_DIR}/hvm CACHE INTERNAL "Freestanding guest images")
set(VMXSIM_IMAGE_NAMES "" CACHE INTERNAL "Names of the freestanding guest images")
if(NOT TARGET vmxsim_images)
  add_custom_target(vmxsim_images ALL)
endif()

# The runtime every image links: Multiboot entry, exception stubs, UART, printf, string.h.
set(VMXSIM_GUEST_RUNTIME
  ${_vmxsim_hvm_dir}/boot/boot.S
  ${_vmxsim_hvm_dir}/boot/exceptions.S
  ${_vmxsim_hvm_dir}/boot/idt.c
  ${_vmxsim_hvm_dir}/lib/uart.c
  ${_vmxsim_hvm_dir}/lib/debugcon.c
  ${_vmxsim_hvm_dir}/lib/exit.c
  ${_vmxsim_hvm_dir}/lib/printf.c
  ${_vmxsim_hvm_dir}/lib/string.c
  ${_vmxsim_hvm_dir}/lib/multiboot.c
  CACHE INTERNAL "Sources of the guest runtime")

function(vmxsim_guest_source_flags src)
  get_filename_component(abs ${src} ABSOLUTE)
  set_property(GLOBAL APPEND PROPERTY "VMXSIM_GUEST_FLAGS:${abs}" ${ARGN})
endfunction()

function(vmxsim_add_guest_image name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "NO_RUNTIME" "" "SOURCES")
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "vmxsim_add_guest_image(${name}): no SOURCES")
  endif()
  if(NOT ARG_NO_RUNTIME)
    list(PREPEND ARG_SOURCES ${VMXSIM_GUEST_RUNTIME})
  endif()
  set(image ${CMAKE_BINARY_DIR}/hvm/${name}.elf)
  set(objdir ${CMAKE_CURRENT_BINARY_DIR}/obj/${name})
  set(objs "")
  foreach(src IN LISTS ARG_SOURCES)
    get_filename_component(abs ${src} ABSOLUTE)
    # Object paths mirror the source tree, relative to hvm/ or else to the caller.
    file(RELATIVE_PATH rel ${VMXSIM_HVM_DIR} ${abs})
    if(rel MATCHES "^\\.\\./")
      file(RELATIVE_PATH rel ${CMAKE_CURRENT_SOURCE_DIR} ${abs})
    endif()
    string(REPLACE "../" "__/" rel "${rel}") # never above objdir
    set(obj ${objdir}/${rel}.o)
    get_filename_component(dir ${obj} DIRECTORY)
    get_property(extra GLOBAL PROPERTY "VMXSIM_GUEST_FLAGS:${abs}")
    add_custom_command(OUTPUT ${obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
      COMMAND ${VMXSIM_GUEST_CC} ${VMXSIM_GUEST_CFLAGS} ${extra}
              -MD -MF ${obj}.d -c ${abs} -o ${obj}
      DEPENDS ${abs} ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
      DEPFILE ${obj}.d
      COMMENT "Guest CC ${name}: ${rel}"
      VERBATIM)
    list(APPEND objs ${obj})
  endforeach()
  # libgcc supplies what gcc calls for builtins without an instruction in the baseline
  # ISA (__popcountdi2) and 128-bit division (__udivti3). Its objects may use the red
  # zone; that is safe because no interrupt ever resumes code inside them.
  add_custom_command(OUTPUT ${image}
    COMMAND ${VMXSIM_GUEST_CC} ${VMXSIM_GUEST_LDFLAGS} -T ${VMXSIM_GUEST_LINKER_SCRIPT}
            -Wl,-Map,${CMAKE_BINARY_DIR}/hvm/${name}.map
            ${objs} -lgcc -o ${image}
    DEPENDS ${objs} ${VMXSIM_GUEST_LINKER_SCRIPT}
    BYPRODUCTS ${CMAKE_BINARY_DIR}/hvm/${name}.map
    COMMENT "Guest LD ${name}.elf"
    VERBATIM)
  add_custom_target(vmxsim_image_${name} DEPENDS ${image})
  set_target_properties(vmxsim_image_${name} PROPERTIES IMAGE_FILE ${image})
  add_dependencies(vmxsim_images vmxsim_image_${name})
  set(VMXSIM_IMAGE_NAMES ${VMXSIM_IMAGE_NAMES} ${name} CACHE INTERNAL "Names of the freestanding guest images")
endfunction()

# Otherwise gcc recognises the loops in memset/memcpy and turns them into calls to
# memset/memcpy: infinite recursion.
vmxsim_guest_source_flags(${_vmxsim_hvm_dir}/lib/string.c -fno-tree-loop-distribute-patterns)
# The exception handler can resume an interrupted test; it must not touch the
# interrupted code's SSE registers, which the stubs do not save.
vmxsim_guest_source_flags(${_vmxsim_hvm_dir}/boot/idt.c -mgeneral-regs-only)
