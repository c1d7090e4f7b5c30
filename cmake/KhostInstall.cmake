# `cmake --install`: khost, the ABI headers, the helper library, khost.pc and a CMake package, so third
# parties build modules out of tree (docs/WRITING_MODULES.md). Layout:
#   bin/khost, include/khost/*.h, lib/libkhost_kit.a, lib/pkgconfig/khost.pc, lib/cmake/khost/,
#   lib/khost/khost.ini (the registry, found by khost at <bin>/../lib/khost/khost.ini),
#   lib/khost/plugins/*.so, lib/khost/tasks/*.so, share/khost/examples/
install(DIRECTORY include/khost DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS khost_kit EXPORT khostTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The installed registry leaves data_dir and results_dir unset, so the defaults apply: data under
# $XDG_DATA_HOME/khost, results in ./results of the working directory — never inside the installation.
file(READ ${CMAKE_SOURCE_DIR}/conf/khost.ini _khost_ini)
string(REGEX REPLACE "\ndata_dir = [^\n]*\nresults_dir = [^\n]*\n"
       "\n;   data_dir default: $XDG_DATA_HOME/khost (~/.local/share/khost)\n;   results_dir default: ./results of the working directory\n"
       _khost_ini_installed "${_khost_ini}")
if(_khost_ini_installed STREQUAL _khost_ini)
  message(FATAL_ERROR "conf/khost.ini: data_dir/results_dir lines not found for the installed registry")
endif()
file(WRITE ${CMAKE_BINARY_DIR}/khost-installed.ini "${_khost_ini_installed}")
install(FILES ${CMAKE_BINARY_DIR}/khost-installed.ini DESTINATION ${KHOST_INSTALL_MODDIR} RENAME khost.ini)
# the example modules, as docs/WRITING_MODULES.md builds them
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/khost/examples)
install(EXPORT khostTargets NAMESPACE khost:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/khost)

include(CMakePackageConfigHelpers)
configure_package_config_file(cmake/khostConfig.cmake.in ${CMAKE_BINARY_DIR}/khostConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/khost)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/khostConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/khostConfig.cmake ${CMAKE_BINARY_DIR}/khostConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/khost)

configure_file(cmake/khost.pc.in ${CMAKE_BINARY_DIR}/khost.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/khost.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
