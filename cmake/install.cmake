# `cmake --install BUILD [--prefix P]` puts, under P:
#   lib/libvmxsim.a, lib/libvmxsim_mmu.a (and libvmxsim_gtest.a when built)
#   include/vmxsim/{cpu,cpu/vmx,mmu,state,trace,harness}/...  the headers and .def tables; users
#                       include them as the repository does: "harness/machine.h"
#   bin/vmxsim          the command
#   share/vmxsim/images/NAME.elf  the bundled guest images (hv.elf is the hypervisor core)
#   lib/cmake/vmxsim/   the CMake package: find_package(vmxsim) gives vmxsim::vmxsim (and
#                       vmxsim::gtest, the GoogleTest helpers), VMXSIM_IMAGE_DIR and
#                       VMXSIM_EXECUTABLE
#   lib/pkgconfig/vmxsim.pc  the same for pkg-config (relocatable: paths from ${pcfiledir})
# Tested by tests/install/ (builds examples/hypervisor-test against the installed tree).
include(CMakePackageConfigHelpers)

set(VMXSIM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/vmxsim)
set(VMXSIM_INSTALL_IMAGEDIR ${CMAKE_INSTALL_DATADIR}/vmxsim/images)

set_target_properties(vmxsim_options PROPERTIES EXPORT_NAME options)
set_target_properties(vmxsim_mmu PROPERTIES EXPORT_NAME mmu)
set(VMXSIM_INSTALL_TARGETS vmxsim vmxsim_mmu vmxsim_options)
# A sanitized library needs its users' programs linked with the same runtime.
if(VMXSIM_SANITIZE)
  target_link_options(vmxsim_options INTERFACE $<INSTALL_INTERFACE:${VMXSIM_SAN_FLAGS}>)
endif()
set(VMXSIM_HAS_GTEST OFF)
if(TARGET vmxsim_gtest)
  set_target_properties(vmxsim_gtest PROPERTIES EXPORT_NAME gtest)
  list(APPEND VMXSIM_INSTALL_TARGETS vmxsim_gtest)
  set(VMXSIM_HAS_GTEST ON)
endif()
install(TARGETS ${VMXSIM_INSTALL_TARGETS} EXPORT vmxsimTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS vmxsim_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Every header and X-macro table of the library's layers (the libFuzzer target's folder
# is not part of the API).
install(DIRECTORY cpu mmu state trace harness
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vmxsim
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def"
        PATTERN "fuzz" EXCLUDE)

if(VMXSIM_IMAGES)
  foreach(name IN LISTS VMXSIM_IMAGE_NAMES)
    install(FILES ${VMXSIM_IMAGE_DIR}/${name}.elf DESTINATION ${VMXSIM_INSTALL_IMAGEDIR})
  endforeach()
endif()

install(EXPORT vmxsimTargets NAMESPACE vmxsim:: DESTINATION ${VMXSIM_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/vmxsimConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/vmxsimConfig.cmake
  INSTALL_DESTINATION ${VMXSIM_INSTALL_CMAKEDIR}
  PATH_VARS VMXSIM_INSTALL_IMAGEDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/vmxsimConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/vmxsimConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake/vmxsimConfigVersion.cmake
        DESTINATION ${VMXSIM_INSTALL_CMAKEDIR})

configure_file(${CMAKE_CURRENT_LIST_DIR}/vmxsim.pc.in ${CMAKE_BINARY_DIR}/cmake/vmxsim.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/cmake/vmxsim.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
