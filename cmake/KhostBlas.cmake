# CPU BLAS (CBLAS interface): OpenBLAS through pkg-config when present. Optional, so the GPU machine (which
# has none) still builds; KHOST_HAVE_BLAS tells the plugins.
pkg_check_modules(OPENBLAS IMPORTED_TARGET openblas)
if(OPENBLAS_FOUND)
  set(KHOST_HAVE_BLAS ON)
  message(STATUS "khost: BLAS = OpenBLAS ${OPENBLAS_VERSION}")
else()
  set(KHOST_HAVE_BLAS OFF)
  message(STATUS "khost: no OpenBLAS found; CPU backends that need BLAS are built without their CPU path")
endif()
