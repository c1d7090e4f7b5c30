# `cmake --install`: khost, the ABI headers, the helper library, khost.pc and a CMake package, so third
# parties build modules out of tree (docs/WRITING_MODULES.md). Layout:
#   bin/khost, include/khost/*.h, lib/libkhost_kit.a, lib/pkgconfig/khost.pc, lib/cmake/khost/,
#   lib/khost/khost.ini (the registry, found by khost at <bin>/../lib/khost/khost.ini),
#   lib/khost/plugins/*.so, lib/khost/tasks/*.so
install(DIRECTORY include/khost DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS khost_kit EXPORT khostTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES conf/khost.ini DESTINATION ${KHOST_INSTALL_MODDIR})
install(EXPORT khostTargets NAMESPACE khost:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/khost)

include(CMakePackageConfigHelpers)
configure_package_config_file(cmake/khostConfig.cmake.in ${CMAKE_BINARY_DIR}/khostConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/khost)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/khostConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/khostConfig.cmake ${CMAKE_BINARY_DIR}/khostConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/khost)

configure_file(cmake/khost.pc.in ${CMAKE_BINARY_DIR}/khost.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/khost.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
