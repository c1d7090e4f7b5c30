# cuDNN and cuBLAS for the plugins' GPU paths (cntk, tensorflow), found once. Included after KhostCuda.cmake
# by every plugin that needs them; defines
#   KHOST_HAVE_CUDA_LIBS  ON when the CUDA toolkit, cuDNN and cuBLAS were all found
#   khost_cudnn           imported library (CUDNN_ROOT / CUDNN_INCLUDE_DIR / CUDNN_LIBRARY, else beside the toolkit)
#   KHOST_CUBLAS_TARGET   CUDA::cublas, or the imported khost_cublas from CUBLAS_ROOT (e.g. pip's nvidia/cu13)
#   KHOST_CUDA_LIBS_WHERE a line for the configure log: where each came from
# Included from each plugin directory (variables are directory-scoped); the finds are cached and the imported
# targets are GLOBAL and created once.
set(KHOST_HAVE_CUDA_LIBS OFF)
if(KHOST_HAVE_CUDA)
  find_path(CUDNN_INCLUDE_DIR cudnn.h
            HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
            PATH_SUFFIXES include)
  # pip wheels (nvidia-cudnn-cu13) ship only libcudnn.so.9, no unversioned link
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
               HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
               PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  set(KHOST_CUBLAS_TARGET "")
  if(CUBLAS_ROOT OR NOT TARGET CUDA::cublas)
    find_path(CUBLAS_INCLUDE_DIR cublas_v2.h HINTS ${CUBLAS_ROOT} $ENV{CUBLAS_ROOT} PATH_SUFFIXES include
              NO_DEFAULT_PATH)
    find_library(CUBLAS_LIBRARY NAMES cublas libcublas.so.13 libcublas.so.12 HINTS ${CUBLAS_ROOT} $ENV{CUBLAS_ROOT}
                 PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
    if(CUBLAS_INCLUDE_DIR AND CUBLAS_LIBRARY)
      if(NOT TARGET khost_cublas)
        add_library(khost_cublas UNKNOWN IMPORTED GLOBAL)
      endif()
      set_target_properties(khost_cublas PROPERTIES IMPORTED_LOCATION ${CUBLAS_LIBRARY}
                            INTERFACE_INCLUDE_DIRECTORIES ${CUBLAS_INCLUDE_DIR})
      set(KHOST_CUBLAS_TARGET khost_cublas)
      set(_khost_cublas_where ${CUBLAS_LIBRARY})
    endif()
  endif()
  if(NOT KHOST_CUBLAS_TARGET AND TARGET CUDA::cublas)
    set(KHOST_CUBLAS_TARGET CUDA::cublas)
    set(_khost_cublas_where ${CUDAToolkit_LIBRARY_DIR})
  endif()
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND KHOST_CUBLAS_TARGET)
    set(KHOST_HAVE_CUDA_LIBS ON)
    set(KHOST_CUDA_LIBS_WHERE "cuDNN ${CUDNN_LIBRARY} (headers ${CUDNN_INCLUDE_DIR}), cuBLAS ${_khost_cublas_where}")
    if(NOT TARGET khost_cudnn)
      add_library(khost_cudnn UNKNOWN IMPORTED GLOBAL)
    endif()
    set_target_properties(khost_cudnn PROPERTIES IMPORTED_LOCATION ${CUDNN_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_INCLUDE_DIR})
  elseif(KHOST_CUDA STREQUAL "ON")
    message(FATAL_ERROR "khost: KHOST_CUDA=ON but cuDNN (cudnn.h: ${CUDNN_INCLUDE_DIR}, library: ${CUDNN_LIBRARY}) "
                        "or cuBLAS was not found; set CUDNN_ROOT (or CUDNN_INCLUDE_DIR/CUDNN_LIBRARY) and CUBLAS_ROOT")
  elseif(NOT KHOST_CUDA_LIBS_SAID)
    set(KHOST_CUDA_LIBS_SAID ON CACHE INTERNAL "")
    message(STATUS "khost: no cuDNN/cuBLAS found; the plugins' GPU paths are not built (CUDNN_ROOT to point at one)")
  endif()
endif()

# khost_cuda_module(<target> <prefix>) — the settings every plugin's CUDA path shares: static CUDA runtime (no
# libcudart.so dependency; libcuda.so.1 loaded lazily by the runtime, so the module loads without a driver),
# -z nodelete (the static runtime registers fat binaries and atexit handlers inside the module, and the C++
# runtime cuDNN pulls in keeps its emergency pool there), warnings as errors for CUDA as for C, and
# <prefix>_CUDA_MIN_ARCH = the lowest architecture compiled in (sessions refuse older devices).
function(khost_cuda_module target prefix)
  set(_archs ${KHOST_CUDA_ARCHS})
  list(SORT _archs COMPARE NATURAL)
  list(GET _archs 0 _min)
  target_compile_definitions(${target} PRIVATE ${prefix}_HAVE_CUDA=1 ${prefix}_CUDA_MIN_ARCH=${_min})
  set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY Static CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_link_options(${target} PRIVATE -Wl,-z,nodelete)
  set(_flags -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
  if(KHOST_WERROR)
    list(APPEND _flags -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${_flags}>)
endfunction()

# khost_add_gpu_half(<module> <prefix> SOURCES ... [LIBS ...]) — a backend's GPU half (khost/kit/half.h): the
# module's CUDA code as <module>-cuda/<module>_cuda.so beside <module>.so, loaded by the module on first use of the CUDA
# kind, so the module itself links no CUDA library and cpu cells map none. One exported symbol (hidden
# visibility otherwise); the folder keeps it out of the host's plugin discovery. Defines <prefix>_GPU_HALF=1 on
# the module (the loader's `built`), links cuBLAS and cuDNN into the half and applies khost_cuda_module(<prefix>).
# The target is <module>_cuda; building the module builds both.
function(khost_add_gpu_half module prefix)
  cmake_parse_arguments(H "" "" "SOURCES;LIBS" ${ARGN})
  set(_t ${module}_cuda)
  add_library(${_t} MODULE ${H_SOURCES})
  set_target_properties(${_t} PROPERTIES PREFIX "" OUTPUT_NAME ${module}_cuda C_VISIBILITY_PRESET hidden
                        CUDA_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY ${KHOST_PLUGIN_OUTPUT_DIR}/${module}-cuda)
  target_include_directories(${_t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${_t} PRIVATE khost_kit_cuda khost_kit ${KHOST_CUBLAS_TARGET} khost_cudnn m ${H_LIBS}) # kit/cuda.h
  if(NOT KHOST_SANITIZE)
    target_link_options(${_t} PRIVATE -Wl,--no-undefined)
  endif()
  khost_cuda_module(${_t} ${prefix}) # static runtime, -z nodelete, CUDA warnings, <prefix>_CUDA_MIN_ARCH
  target_compile_definitions(${module} PRIVATE ${prefix}_GPU_HALF=1)
  add_dependencies(${module} ${_t})
  install(TARGETS ${_t} LIBRARY DESTINATION ${KHOST_INSTALL_MODDIR}/plugins/${module}-cuda)
endfunction()
